package exportconnector.gateway;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;

import org.apache.accumulo.proxy.thrift.AccumuloSecurityException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The gateway's shared secret; callers prove they know it on every table-level call. */
final class SharedSecret {
  private static final Logger LOG = LoggerFactory.getLogger(SharedSecret.class);
  private final byte[] expected;

  SharedSecret(String secret) {
    if (secret == null || secret.isEmpty()) {
      throw new IllegalArgumentException("the gateway shared secret must not be empty");
    }
    this.expected = secret.getBytes(StandardCharsets.UTF_8);
  }

  /**
   * Constant-time comparison ({@link MessageDigest#isEqual} on the UTF-8 bytes), so response timing
   * does not leak how much of a guess was right. A refusal is logged with the peer's address, never
   * with the secret or the guess.
   */
  void check(String given) throws AccumuloSecurityException {
    byte[] g = given == null ? new byte[0] : given.getBytes(StandardCharsets.UTF_8);
    if (!MessageDigest.isEqual(expected, g)) {
      LOG.warn("refused a call with a wrong shared secret from {}", GatewayServer.currentPeer());
      throw new AccumuloSecurityException("invalid shared secret");
    }
  }

  @Override
  public String toString() {
    return "SharedSecret(****)";
  }
}
