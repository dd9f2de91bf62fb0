package exportconnector.gateway;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;

import org.apache.accumulo.proxy.thrift.AccumuloSecurityException;

/** The gateway's shared secret; callers prove they know it on every table-level call. */
final class SharedSecret {
  private final byte[] expected;

  SharedSecret(String secret) {
    if (secret == null || secret.isEmpty()) {
      throw new IllegalArgumentException("the gateway shared secret must not be empty");
    }
    this.expected = secret.getBytes(StandardCharsets.UTF_8);
  }

  /** Constant-time comparison, so response timing does not leak how much of a guess was right. */
  void check(String given) throws AccumuloSecurityException {
    byte[] g = given == null ? new byte[0] : given.getBytes(StandardCharsets.UTF_8);
    if (!MessageDigest.isEqual(expected, g)) {
      throw new AccumuloSecurityException("invalid shared secret");
    }
  }

  @Override
  public String toString() {
    return "SharedSecret(****)";
  }
}
