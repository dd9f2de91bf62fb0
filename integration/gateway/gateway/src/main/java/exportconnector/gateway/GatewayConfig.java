package exportconnector.gateway;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

/**
 * The settings of one gateway, read from a {@code gateway.properties} file. Relative paths in it
 * are resolved against the file's own folder. Unknown keys are errors, so a typo fails loudly.
 * integration/gateway/README.md documents every key; {@link #KEYS} lists them with defaults.
 *
 * <p>The keys and defaults are public for programs that write such a file for a gateway they start
 * in their own JVM ({@link GatewayMain.Running#start(Path, String)}; the harness's launcher does).
 */
public final class GatewayConfig {
  public static final String CLIENT_PROPERTIES = "accumulo.client.properties";
  public static final String HOST = "gateway.host";
  public static final String PORT = "gateway.port";
  public static final String SECRET_FILE = "gateway.secret.file";
  public static final String IDLE_TIMEOUT_MS = "gateway.idle.timeout.ms";
  public static final String MAX_FRAME_BYTES = "gateway.max.frame.bytes";
  public static final String TLS_ENABLED = "gateway.tls.enabled";
  public static final String TLS_CERT_FILE = "gateway.tls.cert.file";
  public static final String TLS_KEY_FILE = "gateway.tls.key.file";
  public static final String TLS_KEYSTORE_FILE = "gateway.tls.keystore.file";
  public static final String TLS_KEYSTORE_PASSWORD_FILE = "gateway.tls.keystore.password.file";
  public static final String TLS_CLIENT_CA_FILE = "gateway.tls.client.ca.file";
  public static final String TLS_PROTOCOLS = "gateway.tls.protocols";
  public static final String BULK_DIR = "gateway.bulk.dir";
  public static final String KERBEROS_RENEW_SECONDS = "gateway.kerberos.renew.seconds";

  public static final int DEFAULT_PORT = 42424;
  public static final long DEFAULT_IDLE_TIMEOUT_MS = 10 * 60 * 1000L;
  /** Largest frame accepted unless gateway.max.frame.bytes says otherwise (upstream's proxy: 16M). */
  public static final int DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;
  /** A frame limit below 1 KiB could not even carry a createWriter call. */
  public static final int MIN_MAX_FRAME_BYTES = 1024;
  static final String DEFAULT_TLS_PROTOCOLS = "TLSv1.3,TLSv1.2";

  /** Every key with its default ("" = none; required keys say so in the README). */
  static final Map<String,String> KEYS = new LinkedHashMap<>();

  static {
    KEYS.put(CLIENT_PROPERTIES, "");
    KEYS.put(HOST, "127.0.0.1");
    KEYS.put(PORT, Integer.toString(DEFAULT_PORT));
    KEYS.put(SECRET_FILE, "");
    KEYS.put(IDLE_TIMEOUT_MS, Long.toString(DEFAULT_IDLE_TIMEOUT_MS));
    KEYS.put(MAX_FRAME_BYTES, Integer.toString(DEFAULT_MAX_FRAME_BYTES));
    KEYS.put(TLS_ENABLED, "false");
    KEYS.put(TLS_CERT_FILE, "");
    KEYS.put(TLS_KEY_FILE, "");
    KEYS.put(TLS_KEYSTORE_FILE, "");
    KEYS.put(TLS_KEYSTORE_PASSWORD_FILE, "");
    KEYS.put(TLS_CLIENT_CA_FILE, "");
    KEYS.put(TLS_PROTOCOLS, DEFAULT_TLS_PROTOCOLS);
    KEYS.put(BULK_DIR, BulkImports.DEFAULT_DIR);
    KEYS.put(KERBEROS_RENEW_SECONDS, "60");
  }

  /** TLS settings of the Thrift port; null fields are unset. */
  record Tls(Path certFile, Path keyFile, Path keystoreFile, Path keystorePasswordFile,
      Path clientCaFile, String[] protocols) {}

  final Path source;
  final Path clientProperties;
  final String host;
  final int port;
  final Path secretFile;
  final long idleTimeoutMs;
  final int maxFrameBytes;
  final Tls tls; // null: plain Thrift
  /** Where bulk imports stage their files: a path on the default file system or a URI. */
  final String bulkDir;
  /** How often a Kerberos login checks whether its ticket needs renewing (auth.type=kerberos). */
  final long kerberosRenewSeconds;

  private GatewayConfig(Path source, Map<String,String> p) {
    this.source = source;
    Path base = source.toAbsolutePath().getParent();
    this.clientProperties = path(base, require(p, CLIENT_PROPERTIES));
    this.host = get(p, HOST);
    this.port = (int) number(p, PORT, 0, 65535);
    this.secretFile = path(base, require(p, SECRET_FILE));
    this.idleTimeoutMs = number(p, IDLE_TIMEOUT_MS, 1, Long.MAX_VALUE);
    this.maxFrameBytes = (int) number(p, MAX_FRAME_BYTES, MIN_MAX_FRAME_BYTES, Integer.MAX_VALUE);
    this.bulkDir = bulkDir(get(p, BULK_DIR));
    this.kerberosRenewSeconds = number(p, KERBEROS_RENEW_SECONDS, 1, 86400);
    String enabled = get(p, TLS_ENABLED).trim().toLowerCase();
    if (!enabled.equals("true") && !enabled.equals("false")) {
      throw bad(TLS_ENABLED + " must be true or false, got '" + enabled + "'");
    }
    if (enabled.equals("true")) {
      Path cert = optionalPath(base, p, TLS_CERT_FILE);
      Path key = optionalPath(base, p, TLS_KEY_FILE);
      Path keystore = optionalPath(base, p, TLS_KEYSTORE_FILE);
      Path keystorePassword = optionalPath(base, p, TLS_KEYSTORE_PASSWORD_FILE);
      boolean pem = cert != null || key != null;
      if (pem && keystore != null) {
        throw bad("give either " + TLS_CERT_FILE + " + " + TLS_KEY_FILE + " (PEM) or "
            + TLS_KEYSTORE_FILE + " (PKCS12), not both");
      }
      if (pem && (cert == null || key == null)) {
        throw bad(TLS_CERT_FILE + " and " + TLS_KEY_FILE + " go together");
      }
      if (!pem && keystore == null) {
        throw bad(TLS_ENABLED + "=true needs " + TLS_CERT_FILE + " + " + TLS_KEY_FILE + " or "
            + TLS_KEYSTORE_FILE);
      }
      if (keystore != null && keystorePassword == null) {
        throw bad(TLS_KEYSTORE_FILE + " needs " + TLS_KEYSTORE_PASSWORD_FILE);
      }
      String[] protocols = get(p, TLS_PROTOCOLS).replace(" ", "").split(",");
      this.tls = new Tls(cert, key, keystore, keystorePassword,
          optionalPath(base, p, TLS_CLIENT_CA_FILE), protocols);
    } else {
      for (String k : new String[] {TLS_CERT_FILE, TLS_KEY_FILE, TLS_KEYSTORE_FILE,
          TLS_CLIENT_CA_FILE}) {
        if (!p.getOrDefault(k, "").isBlank()) {
          throw bad(k + " is set but " + TLS_ENABLED + " is not true");
        }
      }
      this.tls = null;
    }
  }

  /** Reads and checks a gateway.properties file. */
  static GatewayConfig load(Path file) {
    Properties props = new Properties();
    try (Reader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
      props.load(r);
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read the gateway config " + file + ": " + e);
    }
    Set<String> unknown = new TreeSet<>(props.stringPropertyNames());
    unknown.removeAll(KEYS.keySet());
    if (!unknown.isEmpty()) {
      throw new IllegalArgumentException(file + ": unknown setting(s) " + unknown
          + "; known: " + KEYS.keySet());
    }
    Map<String,String> p = new LinkedHashMap<>();
    for (String k : props.stringPropertyNames()) {
      p.put(k, props.getProperty(k).trim());
    }
    try {
      return new GatewayConfig(file, p);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(file + ": " + e.getMessage());
    }
  }

  /** The shared secret, from {@code gateway.secret.file} (never from the config file itself). */
  SharedSecret secret() {
    return new SharedSecret(Secrets.read("gateway shared secret", "ACCUMULO_GATEWAY_SECRET",
        secretFile.toString(), null));
  }

  /** The accumulo-client.properties content, as Accumulo's own client reads it. */
  Properties accumuloClientProperties() {
    Properties props = new Properties();
    try (Reader r = Files.newBufferedReader(clientProperties, StandardCharsets.UTF_8)) {
      props.load(r);
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read " + CLIENT_PROPERTIES + " file "
          + clientProperties + ": " + e);
    }
    return props;
  }

  /** A file system path, not resolved against this file's folder: absolute, with or without a scheme. */
  private static String bulkDir(String v) {
    org.apache.hadoop.fs.Path path;
    try {
      path = new org.apache.hadoop.fs.Path(v);
    } catch (IllegalArgumentException e) {
      throw bad(BULK_DIR + " is not a path: '" + v + "' (" + e.getMessage() + ")");
    }
    if (!path.isUriPathAbsolute()) {
      throw bad(BULK_DIR + " must be an absolute path (/data/bulk, on the default file system) or a URI"
          + " (hdfs://namenode:8020/data/bulk), got '" + v + "'");
    }
    return v;
  }

  private static String get(Map<String,String> p, String key) {
    String v = p.get(key);
    return v == null || v.isEmpty() ? KEYS.get(key) : v;
  }

  private static String require(Map<String,String> p, String key) {
    String v = p.get(key);
    if (v == null || v.isEmpty()) {
      throw bad(key + " is required");
    }
    return v;
  }

  private static long number(Map<String,String> p, String key, long min, long max) {
    String v = get(p, key);
    long n;
    try {
      n = Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw bad(key + " must be an integer, got '" + v + "'");
    }
    if (n < min || n > max) {
      throw bad(key + " must be between " + min + " and " + max + ", got " + n);
    }
    return n;
  }

  private static Path path(Path base, String value) {
    return base.resolve(value).normalize();
  }

  private static Path optionalPath(Path base, Map<String,String> p, String key) {
    String v = p.get(key);
    return v == null || v.isEmpty() ? null : path(base, v);
  }

  private static IllegalArgumentException bad(String message) {
    return new IllegalArgumentException(message);
  }
}
