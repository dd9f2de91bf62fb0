package exportconnector.gateway;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What {@code java -jar accumulo-gateway.jar --help} prints: the arguments and every key of
 * gateway.properties with its default ({@link GatewayConfig#KEYS}); integration/gateway/README.md
 * says more about each.
 */
final class Usage {
  private static final Map<String,String> MEANING = new LinkedHashMap<>();

  static {
    MEANING.put(GatewayConfig.CLIENT_PROPERTIES, "accumulo-client.properties file, read by Accumulo's own"
        + " client (instance, zookeepers, auth.*, ssl.*) (required)");
    MEANING.put(GatewayConfig.HOST, "bind address; 0.0.0.0 for all interfaces");
    MEANING.put(GatewayConfig.PORT, "Thrift port; 0 picks a free one (see the READY line)");
    MEANING.put(GatewayConfig.SECRET_FILE, "file with the shared secret clients send on every call"
        + " (required)");
    MEANING.put(GatewayConfig.IDLE_TIMEOUT_MS, "writers and scanners idle this long are closed"
        + " (writers flushed)");
    MEANING.put(GatewayConfig.MAX_FRAME_BYTES, "largest Thrift frame; a longer one closes its connection");
    MEANING.put(GatewayConfig.TLS_ENABLED, "TLS on the Thrift port (true or false)");
    MEANING.put(GatewayConfig.TLS_CERT_FILE, "server certificate chain, PEM (with "
        + GatewayConfig.TLS_KEY_FILE + ")");
    MEANING.put(GatewayConfig.TLS_KEY_FILE, "its private key, unencrypted PKCS#8 PEM");
    MEANING.put(GatewayConfig.TLS_KEYSTORE_FILE, "instead of the PEM pair: a PKCS12 keystore");
    MEANING.put(GatewayConfig.TLS_KEYSTORE_PASSWORD_FILE, "file holding that keystore's password");
    MEANING.put(GatewayConfig.TLS_CLIENT_CA_FILE, "PEM CA certificate(s) every client certificate must"
        + " chain to (unset: no client certificates)");
    MEANING.put(GatewayConfig.TLS_PROTOCOLS, "enabled TLS versions");
    MEANING.put(GatewayConfig.BULK_DIR, "where bulk imports stage their RFiles: an absolute path on the"
        + " default file system of the Hadoop configuration on the classpath, or a URI (hdfs://...)");
    MEANING.put(GatewayConfig.KERBEROS_RENEW_SECONDS, "with auth.type=kerberos: how often the gateway"
        + " checks its ticket and logs in again from the keytab when it nears its end");
  }

  private Usage() {}

  static String text() {
    StringBuilder b = new StringBuilder();
    b.append("usage: java -jar accumulo-gateway.jar --config gateway.properties\n")
        .append("       java -jar accumulo-gateway.jar --help\n\n")
        .append("A Thrift gateway speaking the Accumulo Proxy 2.x interface (framed transport, compact\n")
        .append("protocol). Once listening it prints READY {\"host\": ..., \"port\": ..., \"tls\": ...} on\n")
        .append("stdout; logs go to stderr. SIGTERM or SIGINT stops it after flushing open writers.\n\n")
        .append("arguments:\n")
        .append("  --config FILE   the gateway's settings, a Java properties file (below)\n")
        .append("  -h, --help      print this text and exit\n\n")
        .append("gateway.properties (relative paths resolve against the file's folder; an unknown key is\n")
        .append("an error; no secret is a value here or on the command line, only files holding them):\n");
    for (Map.Entry<String,String> e : GatewayConfig.KEYS.entrySet()) {
      String meaning = MEANING.getOrDefault(e.getKey(), "");
      String fallback = e.getValue().isEmpty() ? "" : " (default " + e.getValue() + ")";
      b.append("  ").append(e.getKey()).append('\n')
          .append("      ").append(meaning).append(fallback).append('\n');
    }
    b.append("\nexit status: 2 a configuration or argument error (the message names it), 1 start-up\n")
        .append("failed. More: integration/gateway/README.md.\n");
    return b.toString();
  }
}
