package exportconnector.harness;

import exportconnector.gateway.Args;
import exportconnector.gateway.GatewayConfig;
import exportconnector.gateway.KerberosLogin;
import exportconnector.gateway.Json;
import exportconnector.gateway.Secrets;
import exportconnector.gateway.Signals;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Starts N MiniAccumuloClusters, each with an in-process gateway, for tests and benchmarks.
 *
 * <pre>
 * Launcher --clusters a,b --secret-file PATH [--dir DIR] [--idle-timeout-ms N] [--ignore-stdin]
 *          [--max-frame-bytes N] [--gateway-properties PATH] [--tservers N] [--native-maps DIR]
 *          [--kerberos]
 * </pre>
 *
 * --kerberos: start a KDC ({@link TestKdc}) and Kerberize every cluster against it; each gateway
 * logs in from root's keytab, and the READY line gets a "kdc" object (realm, krb5.conf, keytabs).
 *
 * The root password comes from $ACCUMULO_ROOT_PASSWORD, the gateways' shared secret from the file
 * --secret-file names. Each gateway starts from a generated gateway.properties (see
 * {@link EmbeddedCluster}); --gateway-properties adds settings to each (e.g. TLS; absolute paths).
 * --tservers: tablet servers per cluster (default 1). --native-maps: the folder holding
 * libaccumulo.so, for native in-memory maps in the tablet servers (without it, or when it does not
 * load, Java's in-memory map, said in one log line; see {@link NativeMaps}).
 * Data lives in DIR/NAME (default: a temporary
 * directory, deleted at exit). When every cluster serves, one line goes to stdout:
 * {@code READY {"clusters": [...]}}. Everything stops when stdin reaches EOF (unless
 * --ignore-stdin) or on SIGTERM / SIGINT.
 *
 * <p>After READY, stdin takes line commands, one at a time, each answered by one stdout line
 * ({@code OK <command> <detail>} or {@code ERR <command>: <reason>}), for fault tests:
 * <ul>
 * <li>{@code tserver stop NAME}: SIGKILL the tablet servers of cluster NAME (a crash);</li>
 * <li>{@code tserver kill-one NAME}: SIGKILL one of them (the others take over its tablets);</li>
 * <li>{@code tserver start NAME}: start them again; answered once the metadata table is served.</li>
 * </ul>
 */
public final class Launcher {
  private static final Logger LOG = LoggerFactory.getLogger(Launcher.class);

  private static final long STOP_TIMEOUT_S = 90;

  private final List<EmbeddedCluster> clusters = new ArrayList<>();
  private final Path tempDir; // null when the caller chose the directory
  private boolean stopped;
  private boolean clean;

  private final TestKdc kdc; // null: clusters with a root password
  private KerberosLogin login; // the launcher JVM's own Kerberos identity (root), when kdc is set

  private Launcher(List<String> names, Path base, boolean temporary, int tabletServers,
      File nativeLib, boolean kerberos) throws Exception {
    this.tempDir = temporary ? base : null;
    this.kdc = kerberos ? startKdc(base.resolve("kdc").toFile()) : null;
    for (String n : names) {
      clusters.add(new EmbeddedCluster(n, base.resolve(n).toFile(), tabletServers, nativeLib, kdc));
    }
  }

  /**
   * One KDC for all clusters; this JVM (its clients and in-process gateways) logs in as root from
   * root's keytab, through the gateway's own login code. krb5.conf must be named before any
   * Kerberos class reads it.
   */
  private TestKdc startKdc(File dir) throws Exception {
    TestKdc k = TestKdc.start(dir);
    System.setProperty("java.security.krb5.conf", k.krb5Conf.getAbsolutePath());
    Properties p = new Properties();
    p.setProperty("auth.type", "kerberos");
    p.setProperty("auth.principal", TestKdc.rootPrincipal());
    p.setProperty("auth.token", k.keytab("root").getAbsolutePath());
    p.setProperty("sasl.enabled", "true");
    login = KerberosLogin.acquire(p, dir.toPath(), 60);
    LOG.info("KDC for realm {} at {}; the launcher is logged in as {}", TestKdc.REALM,
        k.describe().get("kdc"), login.principal());
    return k;
  }

  public static void main(String[] argv) {
    try {
      EmbeddedCluster.prepareJvm();
    } catch (Exception e) {
      System.err.println("launcher: start-up failed: " + describe(e));
      System.exit(1);
    }
    Launcher launcher;
    String rootPassword;
    Properties settings = new Properties();
    boolean ignoreStdin;
    try {
      Args a = new Args(argv, Set.of("clusters", "dir", "idle-timeout-ms", "secret-file",
          "max-frame-bytes", "gateway-properties", "tservers", "native-maps"),
          Set.of("ignore-stdin", "kerberos"));
      List<String> names = clusterNames(a.require("clusters"));
      String extra = a.get("gateway-properties", null);
      if (extra != null) {
        try (java.io.Reader r = Files.newBufferedReader(Path.of(extra))) {
          settings.load(r);
        }
      }
      settings.setProperty(GatewayConfig.SECRET_FILE,
          Path.of(a.require("secret-file")).toAbsolutePath().toString());
      long idle = a.getLong("idle-timeout-ms", GatewayConfig.DEFAULT_IDLE_TIMEOUT_MS);
      if (idle <= 0) {
        throw new IllegalArgumentException("--idle-timeout-ms must be positive");
      }
      settings.setProperty(GatewayConfig.IDLE_TIMEOUT_MS, Long.toString(idle));
      int maxFrame = a.getInt("max-frame-bytes", GatewayConfig.DEFAULT_MAX_FRAME_BYTES);
      if (maxFrame < GatewayConfig.MIN_MAX_FRAME_BYTES) {
        throw new IllegalArgumentException("--max-frame-bytes must be at least "
            + GatewayConfig.MIN_MAX_FRAME_BYTES + ", got " + maxFrame);
      }
      settings.setProperty(GatewayConfig.MAX_FRAME_BYTES, Integer.toString(maxFrame));
      ignoreStdin = a.flag("ignore-stdin");
      int tservers = a.getInt("tservers", 1);
      if (tservers < 1 || tservers > 16) {
        throw new IllegalArgumentException("--tservers must be 1-16, got " + tservers);
      }
      rootPassword = Secrets.read("root password", "ACCUMULO_ROOT_PASSWORD", null, null);
      File nativeLib = NativeMaps.find(a.get("native-maps", null));
      String dir = a.get("dir", null);
      boolean kerberos = a.flag("kerberos");
      try {
        if (dir == null) {
          launcher = new Launcher(names, Files.createTempDirectory("accumulo-clusters-"), true,
              tservers, nativeLib, kerberos);
        } else {
          Path base = Path.of(dir).toAbsolutePath();
          Files.createDirectories(base);
          launcher = new Launcher(names, base, false, tservers, nativeLib, kerberos);
        }
      } catch (IllegalArgumentException | IOException e) {
        throw e;
      } catch (Exception e) {
        System.err.println("launcher: start-up failed: the KDC: " + describe(e));
        System.exit(1);
        return;
      }
    } catch (IllegalArgumentException | IOException e) {
      System.err.println("launcher: " + e.getMessage());
      System.exit(2);
      return;
    }

    // Normally stop() runs before exit (signal or stdin EOF); the hook is the fallback.
    // It halts when done: MAC's own hook (running alongside) would retry for minutes against a
    // stopped ZooKeeper.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      boolean clean = launcher.stop();
      System.err.flush();
      Runtime.getRuntime().halt(clean ? 0 : 1);
    }, "launcher-shutdown"));
    Signals.onTermination(() -> launcher.exit(0));
    try {
      launcher.start(rootPassword, settings);
    } catch (Exception e) {
      System.err.println("launcher: start-up failed: " + e.getMessage());
      launcher.exit(1); // stops whatever did start
    }
    System.out.println("READY " + Json.write(launcher.describe()));
    System.out.flush();

    if (ignoreStdin) {
      waitForever(); // until a signal
    }
    launcher.serveCommands(System.in, System.out);
    LOG.info("stdin closed: stopping");
    launcher.exit(0);
  }

  /**
   * Stops everything, then ends the JVM without running shutdown hooks: all that needed doing is
   * done, and MAC's own hooks would retry for minutes against a cluster whose ZooKeeper is gone.
   */
  private void exit(int status) {
    stop();
    System.out.flush();
    System.err.flush();
    Runtime.getRuntime().halt(status);
  }

  private static List<String> clusterNames(String list) {
    Set<String> names = new LinkedHashSet<>();
    for (String n : list.split(",")) {
      n = n.trim();
      if (!n.matches("[A-Za-z0-9][A-Za-z0-9_-]*")) {
        throw new IllegalArgumentException("bad cluster name '" + n + "' (letters, digits, _ and -)");
      }
      if (!names.add(n)) {
        throw new IllegalArgumentException("cluster name '" + n + "' given twice");
      }
    }
    return new ArrayList<>(names);
  }

  /** Starts all clusters side by side: most of a start is waiting on child JVMs. */
  private void start(String rootPassword, Properties settings) throws Exception {
    long t0 = System.nanoTime();
    ExecutorService pool = Executors.newFixedThreadPool(clusters.size(), r -> {
      Thread t = new Thread(r, "cluster-start");
      t.setDaemon(true);
      return t;
    });
    try {
      List<Future<?>> started = new ArrayList<>();
      for (EmbeddedCluster c : clusters) {
        started.add(pool.submit(() -> {
          c.start(rootPassword, settings);
          return null;
        }));
      }
      for (int i = 0; i < clusters.size(); i++) {
        try {
          started.get(i).get();
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          throw new Exception("cluster " + clusters.get(i).name + ": " + describe(cause)
              + " (logs in " + new File(clusters.get(i).dir, "logs") + ")", cause);
        }
      }
    } finally {
      pool.shutdown();
    }
    LOG.info("{} cluster(s) ready in {} s", clusters.size(),
        String.format("%.1f", (System.nanoTime() - t0) / 1e9));
  }

  private Map<String,Object> describe() {
    List<Object> list = new ArrayList<>();
    for (EmbeddedCluster c : clusters) {
      list.add(c.describe());
    }
    Map<String,Object> m = new LinkedHashMap<>();
    m.put("clusters", list);
    if (kdc != null) {
      m.put("kdc", kdc.describe());
    }
    return m;
  }

  /**
   * Stops every cluster (side by side), ends leftover child processes, then removes a temporary
   * data directory. True if every cluster stopped in time.
   */
  private synchronized boolean stop() {
    if (stopped) {
      return clean;
    }
    stopped = true;
    clean = true;
    long t0 = System.nanoTime();
    List<Thread> stopping = new ArrayList<>();
    for (EmbeddedCluster c : clusters) {
      Thread t = new Thread(c::close, "stop-" + c.name);
      t.setDaemon(true);
      t.start();
      stopping.add(t);
    }
    // bounded: a stop that hangs must not keep the processes (or this JVM) around
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STOP_TIMEOUT_S);
    for (Thread t : stopping) {
      try {
        t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (t.isAlive()) {
        LOG.warn("{} did not finish within {} s", t.getName(), STOP_TIMEOUT_S);
        clean = false;
      }
    }
    reapChildren();
    if (login != null) {
      login.release();
    }
    if (kdc != null) {
      kdc.close();
    }
    if (tempDir != null) {
      deleteTree(tempDir);
    }
    LOG.info("stopped in {} s", String.format("%.1f", (System.nanoTime() - t0) / 1e9));
    return clean;
  }

  /**
   * Whatever MiniAccumuloCluster failed to stop (it can fail, e.g. inside a shutdown hook) is a
   * child process of ours: end those, politely first.
   */
  private static void reapChildren() {
    // twice: a cluster still starting (stop during start-up) may spawn one more process
    for (int round = 0; round < 2; round++) {
      List<ProcessHandle> left = ProcessHandle.current().descendants()
          .filter(ProcessHandle::isAlive).collect(Collectors.toList());
      if (!left.isEmpty()) {
        LOG.warn("ending {} leftover child process(es)", left.size());
        left.forEach(ProcessHandle::destroy);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (ProcessHandle p : left) {
          try {
            p.onExit().get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
          } catch (Exception e) {
            p.destroyForcibly();
          }
        }
      }
      try {
        Thread.sleep(200);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  private static void deleteTree(Path root) {
    try (Stream<Path> paths = Files.walk(root)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      LOG.warn("could not delete {}: {}", root, e.getMessage());
    }
  }

  private static void waitForever() {
    try {
      new CountDownLatch(1).await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Answers line commands until stdin reaches EOF (the harness holds stdin open for as long as it
   * wants the clusters; a broken stdin means the parent is gone: stop as for EOF).
   */
  private void serveCommands(InputStream in, PrintStream out) {
    BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
    try {
      String line;
      while ((line = reader.readLine()) != null) {
        String command = line.trim();
        if (command.isEmpty()) {
          continue;
        }
        String reply;
        try {
          reply = "OK " + command + " " + run(command.split("\\s+"));
        } catch (Exception e) {
          LOG.warn("command '{}' failed", command, e);
          reply = "ERR " + command + ": " + describe(e).replace('\n', ' ');
        }
        out.println(reply);
        out.flush();
      }
    } catch (IOException e) {
      // as for EOF
    }
  }

  /** One command; returns the detail of its OK reply. */
  private String run(String[] words) throws Exception {
    if (words.length == 3 && words[0].equals("tserver")) {
      EmbeddedCluster c = cluster(words[2]);
      switch (words[1]) {
        case "stop":
          return "killed=" + c.killTabletServers();
        case "start":
          return "running=" + c.startTabletServers();
        case "kill-one":
          return "running=" + c.killOneTabletServer();
        default:
          break;
      }
    }
    throw new IllegalArgumentException("unknown command (known: tserver stop NAME, tserver start NAME, tserver kill-one NAME)");
  }

  static String describe(Throwable e) {
    return e.getClass().getName() + ": " + e.getMessage();
  }

  private EmbeddedCluster cluster(String name) {
    for (EmbeddedCluster c : clusters) {
      if (c.name.equals(name)) {
        return c;
      }
    }
    throw new IllegalArgumentException("no cluster named '" + name + "'");
  }
}
