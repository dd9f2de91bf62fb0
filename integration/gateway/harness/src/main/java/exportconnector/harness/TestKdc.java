package exportconnector.harness;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.kerby.kerberos.kerb.server.KdcConfigKey;
import org.apache.kerby.kerberos.kerb.server.SimpleKdcServer;

/**
 * A KDC for Kerberized test clusters: Apache Kerby's SimpleKdcServer on 127.0.0.1 (TCP only), one
 * realm, and the principals and keytabs the harness and the tests need, all in one folder:
 *
 * <ul>
 * <li>{@code accumulo/localhost} ({@code accumulo.keytab}): every Accumulo server of every cluster.
 * Servers bound to 127.0.0.1 name themselves by its canonical host name, localhost, and clients
 * ask for a ticket to {@code <sasl.kerberos.server.primary>/localhost}.</li>
 * <li>{@code root} ({@code root.keytab}): the root user of every cluster, and the identity the
 * gateways log in as.</li>
 * <li>{@code stale} ({@code stale.keytab}): a keytab exported before the principal's key changed,
 * so its key is wrong (a stale keytab).</li>
 * </ul>
 *
 * {@code krb5.conf} there points at the KDC; every JVM that uses it (the launcher, the cluster's
 * servers, standalone gateways) gets {@code -Djava.security.krb5.conf}.
 */
final class TestKdc implements AutoCloseable {
  static final String REALM = "EXAMPLE.COM";
  static final String SERVER_PRIMARY = "accumulo";
  static final String SERVER_HOST = "localhost";

  final File dir;
  final File krb5Conf;
  private final SimpleKdcServer kdc;
  private final int port;
  private final Map<String,File> keytabs = new LinkedHashMap<>();

  private TestKdc(File dir, SimpleKdcServer kdc, int port, File krb5Conf) {
    this.dir = dir;
    this.kdc = kdc;
    this.port = port;
    this.krb5Conf = krb5Conf;
  }

  /** Starts the KDC in {@code dir} and creates the principals above. */
  static TestKdc start(File dir) throws Exception {
    Files.createDirectories(dir.toPath());
    int port = freePort();
    SimpleKdcServer kdc = new SimpleKdcServer();
    kdc.setWorkDir(dir);
    kdc.setKdcRealm(REALM);
    kdc.setKdcHost("127.0.0.1");
    kdc.setAllowUdp(false);
    kdc.setAllowTcp(true);
    kdc.setKdcTcpPort(port);
    // No pre-authentication: Kerby answers a pre-authentication timestamp outside its clock skew with
    // PREAUTH_FAILED (24), the same error as a wrong key, where MIT's KDC says KRB_AP_ERR_SKEW (37).
    // Without it the JDK's client checks the reply's time itself and reports a skewed clock as 37, and a
    // stale keytab still fails (it cannot decrypt the reply: 31).
    kdc.getKdcConfig().setBoolean(KdcConfigKey.PREAUTH_REQUIRED, false);
    kdc.init();
    kdc.start();
    File conf = new File(dir, "krb5.conf");
    // TCP only (udp_preference_limit = 1), no DNS: everything is on loopback
    Files.writeString(conf.toPath(), "[libdefaults]\n"
        + "  default_realm = " + REALM + "\n"
        + "  udp_preference_limit = 1\n"
        + "  dns_lookup_kdc = false\n"
        + "  dns_lookup_realm = false\n"
        + "  forwardable = true\n"
        + "\n[realms]\n"
        + "  " + REALM + " = {\n"
        + "    kdc = 127.0.0.1:" + port + "\n"
        + "  }\n", StandardCharsets.UTF_8);
    TestKdc k = new TestKdc(dir, kdc, port, conf);
    try {
      k.create("accumulo", SERVER_PRIMARY + "/" + SERVER_HOST);
      k.create("root", "root");
      k.create("stale", "stale");
      // a new random key after the export: the keytab's key no longer matches the KDC's
      kdc.deletePrincipal(qualify("stale"));
      kdc.createPrincipal(qualify("stale"));
    } catch (Exception e) {
      k.close();
      throw e;
    }
    return k;
  }

  private void create(String name, String principal) throws Exception {
    File keytab = new File(dir, name + ".keytab");
    kdc.createPrincipal(qualify(principal)); // a random key
    kdc.exportPrincipal(qualify(principal), keytab);
    keytabs.put(name, keytab);
  }

  static String qualify(String principal) {
    return principal + "@" + REALM;
  }

  static String serverPrincipal() {
    return qualify(SERVER_PRIMARY + "/" + SERVER_HOST);
  }

  static String rootPrincipal() {
    return qualify("root");
  }

  File keytab(String name) {
    return keytabs.get(name);
  }

  /** What the launcher's READY line says about the KDC. */
  Map<String,Object> describe() {
    Map<String,Object> m = new LinkedHashMap<>();
    m.put("realm", REALM);
    m.put("kdc", "127.0.0.1:" + port);
    m.put("krb5_conf", krb5Conf.getAbsolutePath());
    m.put("server_principal", serverPrincipal());
    m.put("server_primary", SERVER_PRIMARY);
    m.put("principal", rootPrincipal());
    Map<String,Object> files = new LinkedHashMap<>();
    keytabs.forEach((k, v) -> files.put(k, v.getAbsolutePath()));
    m.put("keytabs", files);
    return m;
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getByName("127.0.0.1"))) {
      return s.getLocalPort();
    }
  }

  @Override
  public void close() {
    try {
      kdc.stop();
    } catch (Exception e) {
      // stopping: nothing to do about it
    }
  }
}
