package exportconnector.harness;

import exportconnector.gateway.GatewayConfig;
import exportconnector.gateway.GatewayMain;

import java.io.File;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.accumulo.core.client.Accumulo;
import org.apache.accumulo.core.client.AccumuloClient;
import org.apache.accumulo.core.client.Scanner;
import org.apache.accumulo.core.security.Authorizations;
import org.apache.accumulo.minicluster.MemoryUnit;
import org.apache.accumulo.minicluster.ServerType;
import org.apache.accumulo.miniclusterImpl.MiniAccumuloClusterImpl;
import org.apache.accumulo.miniclusterImpl.MiniAccumuloConfigImpl;
import org.apache.accumulo.miniclusterImpl.ProcessReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One MiniAccumuloCluster on loopback with an in-process gateway in front of it. The gateway is
 * started the way users start theirs: from a generated {@code gateway.properties} that names a
 * generated {@code accumulo-client.properties} (both mode 0600, in {@code <dir>-gateway/}). Uses the
 * MAC implementation class (not the public wrapper) for its process list, see {@link #close()}.
 */
final class EmbeddedCluster implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(EmbeddedCluster.class);
  static final String ROOT = "root";
  static final String HOST = "127.0.0.1";
  private static final long ZOOKEEPER_STARTUP_MS = 120_000;
  /** The generated client settings of the gateway (0600: it holds the root password). */
  private static final String CLIENT_FILE = "accumulo-client.properties";

  final String name;
  final File dir;
  private final int tabletServers;
  private final File nativeLib; // null: Java in-memory maps
  private final TestKdc kdc; // null: password authentication
  private volatile boolean closed;
  private volatile MiniAccumuloClusterImpl mac;
  private volatile AccumuloClient client;
  private volatile GatewayMain.Running gateway;
  private volatile Path gatewayConfig;

  /**
   * {@code nativeLib}: libaccumulo.so for native in-memory maps (see {@link NativeMaps}), or null.
   * {@code kdc}: Kerberize the cluster against it (SASL RPC, Kerberos authenticator, authorizor
   * and permission handler, root user = its root principal; the launcher's JVM is logged in as
   * that principal), or null for a root password.
   */
  EmbeddedCluster(String name, File dir, int tabletServers, File nativeLib, TestKdc kdc) {
    this.name = name;
    this.dir = dir;
    this.tabletServers = tabletServers;
    this.nativeLib = nativeLib;
    this.kdc = kdc;
  }

  /**
   * Site settings of a Kerberized cluster, as Accumulo's own Kerberos ITs set them: SASL on every
   * RPC, the servers' principal and keytab, and the Kerberos security handlers (users are Kerberos
   * principals, created on their first authenticated call).
   */
  static Map<String,String> kerberosSiteConfig(TestKdc kdc) {
    Map<String,String> site = new HashMap<>();
    site.put("instance.rpc.sasl.enabled", "true");
    site.put("general.kerberos.keytab", kdc.keytab("accumulo").getAbsolutePath());
    site.put("general.kerberos.principal", TestKdc.serverPrincipal());
    String handlers = "org.apache.accumulo.server.security.handler.";
    site.put("instance.security.authenticator", handlers + "KerberosAuthenticator");
    site.put("instance.security.authorizor", handlers + "KerberosAuthorizor");
    site.put("instance.security.permissionHandler", handlers + "KerberosPermissionHandler");
    return site;
  }

  /** accumulo-client.properties authentication for this cluster: root's password or root's keytab. */
  private Properties authProperties(String rootPassword) {
    Properties p = new Properties();
    if (kdc == null) {
      p.setProperty("auth.type", "password");
      p.setProperty("auth.principal", ROOT);
      p.setProperty("auth.token", rootPassword);
    } else {
      p.setProperty("auth.type", "kerberos");
      p.setProperty("auth.principal", TestKdc.rootPrincipal());
      p.setProperty("auth.token", kdc.keytab("root").getAbsolutePath());
      p.setProperty("sasl.enabled", "true");
      p.setProperty("sasl.kerberos.server.primary", TestKdc.SERVER_PRIMARY);
    }
    return p;
  }

  private String rootUser() {
    return kdc == null ? ROOT : TestKdc.rootPrincipal();
  }

  /** Call once, on one thread, before starting or stopping clusters side by side (HarnessLine says why). */
  static void prepareJvm() throws Exception {
    HarnessLine.prepareJvm();
  }

  /** Settings for a quick, steady start on a small machine (2 cores), everything on loopback. */
  static Map<String,String> siteConfig(boolean nativeMaps) {
    Map<String,String> site = new HashMap<>();
    site.put("rpc.bind.addr", HOST); // Accumulo 2.1.4's bind address for every server process
    // native maps (off the heap, as in production) insert and scan at a fraction of Java's map's CPU
    site.put("tserver.memory.maps.native.enabled", Boolean.toString(nativeMaps));
    site.put("tserver.memory.maps.max", "256M"); // MAC's 40M minor-compacts constantly under load
    site.put("general.micrometer.enabled", "false"); // MAC turns metrics on; nobody reads them
    site.put("gc.cycle.delay", "60s"); // MAC collects every 4s, which costs CPU for nothing here
    // after a tablet server is lost, wait this long before recovering its logs (default 10s, per level:
    // root, metadata, user tablets); the delay lets HDFS recover leases, which a local file system has not
    site.put("manager.recovery.delay", "1s");
    // a SIGKILLed tablet server keeps its ZooKeeper lock until its session times out, and its tablets wait
    // for that (default 30s); Accumulo's own recovery tests shorten it the same way
    site.put("instance.zookeeper.timeout", "15s");
    HarnessLine.adjustSite(site);
    return site;
  }

  /**
   * Starts the cluster, then its gateway from a generated gateway.properties: {@code gatewaySettings}
   * (bind address, secret file, TLS, ...) plus the accumulo-client.properties for this cluster.
   */
  void start(String rootPassword, Properties gatewaySettings) throws Exception {
    long t0 = System.nanoTime();
    MiniAccumuloConfigImpl config = new MiniAccumuloConfigImpl(dir, rootPassword)
        .setInstanceName(name)
        .setNumTservers(tabletServers)
        .setMemory(ServerType.TABLET_SERVER, 768, MemoryUnit.MEGABYTE)
        .setSiteConfig(siteConfig(nativeLib != null));
    if (kdc != null) {
      kerberosSiteConfig(kdc).forEach(config::setProperty);
      config.setRootUserName(TestKdc.rootPrincipal()); // Initialize makes it the root user
      config.setClientProps(Map.of("sasl.enabled", "true"));
    }
    // MAC gives ZooKeeper 20 s to answer; a machine shared by several test sessions can need longer
    config.setZooKeeperStartupTime(ZOOKEEPER_STARTUP_MS);
    // the server processes' temporary files (Accumulo's VFS cache) go beside the cluster's folder, with it
    Map<String,String> sysProps = new HashMap<>(Map.of("java.io.tmpdir", tmpDir().getPath()));
    if (nativeLib != null) {
      // the exact file: the tablet server logs "Loaded native map shared library <file>" (tests check it)
      sysProps.put("accumulo.native.lib.path", nativeLib.getPath());
      config.setNativeLibPaths(nativeLib.getParent());
    }
    if (kdc != null) {
      sysProps.put("java.security.krb5.conf", kdc.krb5Conf.getAbsolutePath());
    }
    config.setSystemProperties(sysProps);
    mac = new QuickStartCluster(config);
    writeCoreSite(mac.getConfig().getConfDir(), kdc != null);
    mac.start();
    checkOpen();
    Properties props = authProperties(rootPassword);
    props.setProperty("instance.name", mac.getInstanceName());
    props.setProperty("instance.zookeepers", mac.getZooKeepers());
    client = Accumulo.newClient().from(props).build();
    waitUntilServing(client);
    checkOpen();
    gatewayConfig = writeGatewayConfig(rootPassword, gatewaySettings);
    gateway = GatewayMain.Running.start(gatewayConfig, name);
    LOG.info("cluster {} up in {} s: zookeepers {}, gateway {}:{}", name,
        String.format("%.1f", (System.nanoTime() - t0) / 1e9), mac.getZooKeepers(),
        gateway.host(), gateway.port());
  }

  /**
   * Hadoop's default local file system keeps in the JVM what Accumulo hsyncs (its checksummed streams
   * are not Syncable): a killed tablet server lost the write-ahead log entries of writes it had
   * acknowledged, and its tablets could not be recovered. The raw local file system hands every hsync
   * to the OS, where it survives the kill (Accumulo's own crash tests configure it the same way). The
   * server processes find core-site.xml in MAC's conf folder, which is on their classpath.
   */
  private static void writeCoreSite(File confDir, boolean kerberos) throws IOException {
    String xml = "<?xml version=\"1.0\"?>\n<configuration>\n"
        + "  <property><name>fs.file.impl</name>"
        + "<value>org.apache.hadoop.fs.RawLocalFileSystem</value></property>\n"
        // the servers' UserGroupInformation logs in from general.kerberos.keytab only with this
        + (kerberos ? "  <property><name>hadoop.security.authentication</name>"
            + "<value>kerberos</value></property>\n" : "")
        + "</configuration>\n";
    Files.createDirectories(confDir.toPath());
    Files.writeString(confDir.toPath().resolve("core-site.xml"), xml, StandardCharsets.UTF_8);
  }

  private Path writeGatewayConfig(String rootPassword, Properties gatewaySettings)
      throws IOException {
    Path confDir = new File(dir.getAbsoluteFile().getParentFile(), dir.getName() + "-gateway")
        .toPath();
    Files.createDirectories(confDir);
    Properties client = new Properties();
    client.setProperty("instance.name", mac.getInstanceName());
    client.setProperty("instance.zookeepers", mac.getZooKeepers());
    client.putAll(authProperties(rootPassword));
    Path clientFile = confDir.resolve(CLIENT_FILE);
    writePrivate(clientFile, client, "generated by the launcher for cluster " + name);
    Properties gw = new Properties();
    gw.putAll(gatewaySettings);
    gw.setProperty(GatewayConfig.CLIENT_PROPERTIES, clientFile.toString());
    gw.putIfAbsent(GatewayConfig.HOST, HOST);
    gw.putIfAbsent(GatewayConfig.PORT, "0");
    Path gwFile = confDir.resolve("gateway.properties");
    writePrivate(gwFile, gw, "generated by the launcher for cluster " + name);
    return gwFile;
  }

  private static void writePrivate(Path file, Properties props, String comment)
      throws IOException {
    Files.deleteIfExists(file);
    Files.createFile(file, PosixFilePermissions.asFileAttribute(
        PosixFilePermissions.fromString("rw-------")));
    try (Writer w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
      props.store(w, comment);
    }
  }

  private File tmpDir() throws java.io.IOException {
    File tmp = new File(dir.getAbsoluteFile().getParentFile(), dir.getName() + "-tmp"); // MAC wants dir empty
    if (!tmp.isDirectory() && !tmp.mkdirs()) {
      throw new java.io.IOException("cannot create " + tmp);
    }
    return tmp;
  }

  /** MAC returns once the processes registered; tables are usable once metadata is hosted. */
  private static void waitUntilServing(AccumuloClient client) throws Exception {
    try (Scanner s = client.createScanner("accumulo.metadata", Authorizations.EMPTY)) {
      s.setTimeout(180, TimeUnit.SECONDS);
      s.setBatchSize(1);
      s.iterator().hasNext();
    }
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("cluster " + name + " was stopped while starting");
    }
  }

  /**
   * Kills the cluster's tablet servers with SIGKILL, as a crash would: no goodbye to the manager,
   * no flush of in-memory data (it is recovered from the write-ahead logs at the next start).
   * Returns how many were killed.
   */
  synchronized int killTabletServers() throws Exception {
    MiniAccumuloClusterImpl m = running();
    int killed = 0;
    for (ProcessReference r : m.getProcesses().getOrDefault(ServerType.TABLET_SERVER, List.of())) {
      Process p = r.getProcess();
      if (p.isAlive()) {
        p.destroyForcibly();
        killed++;
      }
      if (!p.waitFor(30, TimeUnit.SECONDS)) {
        throw new IllegalStateException("a tablet server of " + name + " outlived SIGKILL for 30 s");
      }
    }
    m.getClusterControl().stop(ServerType.TABLET_SERVER); // forgets the dead processes
    LOG.info("cluster {}: killed {} tablet server(s)", name, killed);
    return killed;
  }

  /**
   * Kills one tablet server with SIGKILL (the first MAC started that still runs): the manager notices
   * when its ZooKeeper lock expires, then recovers its logs and assigns its tablets to the others.
   * Returns how many tablet servers still run.
   */
  synchronized int killOneTabletServer() throws Exception {
    MiniAccumuloClusterImpl m = running();
    List<ProcessReference> refs =
        new ArrayList<>(m.getProcesses().getOrDefault(ServerType.TABLET_SERVER, List.of()));
    ProcessReference victim = refs.stream().filter(r -> r.getProcess().isAlive()).findFirst()
        .orElseThrow(() -> new IllegalStateException("cluster " + name + " has no tablet server running"));
    victim.getProcess().destroyForcibly();
    if (!victim.getProcess().waitFor(30, TimeUnit.SECONDS)) {
      throw new IllegalStateException("a tablet server of " + name + " outlived SIGKILL for 30 s");
    }
    m.killProcess(ServerType.TABLET_SERVER, victim); // forgets it, so "tserver start" starts a new one
    int left = refs.size() - 1;
    LOG.info("cluster {}: killed one tablet server, {} left", name, left);
    return left;
  }

  /**
   * Starts tablet servers up to the configured number and waits (bounded) until the metadata table
   * is served again, which needs the write-ahead log recovery after a kill. Returns how many run.
   */
  synchronized int startTabletServers() throws Exception {
    MiniAccumuloClusterImpl m = running();
    long t0 = System.nanoTime();
    m.getClusterControl().start(ServerType.TABLET_SERVER);
    waitUntilServing(client);
    int n = m.getProcesses().getOrDefault(ServerType.TABLET_SERVER, List.of()).size();
    LOG.info("cluster {}: {} tablet server(s) serving again after {} s", name, n,
        String.format("%.1f", (System.nanoTime() - t0) / 1e9));
    return n;
  }

  private MiniAccumuloClusterImpl running() {
    MiniAccumuloClusterImpl m = mac;
    if (m == null || client == null || closed) {
      throw new IllegalStateException("cluster " + name + " is not running");
    }
    return m;
  }

  Map<String,Object> describe() {
    Map<String,Object> m = new LinkedHashMap<>();
    m.put("name", name);
    m.put("instance", mac.getInstanceName());
    m.put("zookeepers", mac.getZooKeepers());
    m.put("user", rootUser());
    m.put("kerberos", kdc != null);
    m.put("gateway_host", gateway.host());
    m.put("gateway_port", gateway.port());
    m.put("gateway_tls", gateway.tls());
    m.put("gateway_client_properties", gatewayConfig.resolveSibling(CLIENT_FILE).toString());
    // the release of every Accumulo class in this JVM: the servers' (MAC starts them with this
    // classpath) and the in-process gateway's client
    m.put("accumulo_server", GatewayMain.accumuloClientVersion());
    m.put("gateway_config", gatewayConfig.toString());
    m.put("dir", dir.getAbsolutePath());
    m.put("tablet_servers", tabletServers);
    m.put("native_maps", nativeLib != null);
    m.put("log_dir", mac.getConfig().getLogDir().getAbsolutePath());
    return m;
  }

  /**
   * Stops whatever has started, gateway first so no call reaches a stopping cluster. The MAC
   * processes are ended directly rather than through MAC's stop(): that one clears locks in the
   * cluster's ZooKeeper (useful only to restart on the same directory, which MAC refuses anyway)
   * and retries for minutes when ZooKeeper is already gone, as after a Ctrl-C in a terminal,
   * which signals the child processes too.
   */
  @Override
  public void close() {
    closed = true;
    if (gateway != null) {
      gateway.close();
    }
    if (client != null) {
      client.close();
    }
    MiniAccumuloClusterImpl m = mac;
    if (m != null) {
      endProcesses(m);
    }
  }

  /** SIGTERM to the Accumulo servers, then to ZooKeeper; SIGKILL for any that linger. */
  private static void endProcesses(MiniAccumuloClusterImpl m) {
    Map<ServerType,Collection<ProcessReference>> procs;
    try {
      procs = m.getProcesses();
    } catch (RuntimeException e) {
      return; // start-up failed half way; the launcher ends all its child processes anyway
    }
    List<Process> servers = new ArrayList<>();
    for (ServerType t : new ServerType[] {ServerType.GARBAGE_COLLECTOR, ServerType.MANAGER,
        ServerType.TABLET_SERVER}) {
      procs.getOrDefault(t, List.of()).forEach(r -> servers.add(r.getProcess()));
    }
    List<Process> zooKeeper = new ArrayList<>();
    procs.getOrDefault(ServerType.ZOOKEEPER, List.of()).forEach(r -> zooKeeper.add(r.getProcess()));
    end(servers);
    end(zooKeeper);
  }

  private static void end(List<Process> processes) {
    processes.forEach(Process::destroy);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    for (Process p : processes) {
      try {
        if (!p.waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
          p.destroyForcibly();
        }
      } catch (InterruptedException e) {
        p.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
  }
}
