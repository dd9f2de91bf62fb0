package exportconnector.gateway;

import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

/**
 * The Accumulo line of a cluster's servers, read from what its tablet servers advertise in
 * ZooKeeper, so that a gateway of another line is refused at connect in one line: a client talks
 * only to servers of its own major version (2.1 servers advertise {@code CLIENT=host:port;...},
 * 3.0 servers a JSON list of services among which writes moved to {@code TABLET_INGEST}), and
 * across lines Accumulo's own client fails with an obscure parse error, or not at all until a
 * write. This build's line is {@link AccumuloLine#NAME}.
 */
final class ServerLine {
  /** How long the look-up may take; past it (or on any ZooKeeper failure) nothing is checked. */
  static final long LOOKUP_MILLIS = 15_000;

  /** A gateway of one line pointed at servers of another. */
  static final class Mismatch extends Exception {
    private static final long serialVersionUID = 1L;

    Mismatch(String message) {
      super(message);
    }
  }

  private ServerLine() {}

  /**
   * Refuses servers of another line than this build's. Unknown (no tablet server registered yet,
   * ZooKeeper unreadable) passes: Accumulo's own client then says what is wrong.
   */
  static void check(Properties clientProps) throws Mismatch {
    String instance = clientProps.getProperty("instance.name", "").trim();
    String servers = detect(clientProps.getProperty("instance.zookeepers", "").trim(), instance);
    if (servers != null && !AccumuloLine.serves(servers)) {
      throw new Mismatch("this gateway is built for Accumulo " + AccumuloLine.NAME + " (client "
          + GatewayMain.accumuloClientVersion() + "), but the tablet servers of instance "
          + instance + " run Accumulo " + servers + ": deploy the Accumulo " + servers
          + " gateway (accumulo-gateway-" + servers + "-<version>-all.jar)");
    }
  }

  /**
   * "2.1" or "3.0" (JSON service descriptors with a TABLET_INGEST service: 3.0's format; a later
   * line that keeps it reads as 3.0 here and is refused by its own RPC header check), or null.
   */
  static String detect(String zookeepers, String instance) {
    if (zookeepers.isEmpty() || instance.isEmpty()) {
      return null;
    }
    ZooKeeper zk = null;
    try {
      CountDownLatch connected = new CountDownLatch(1);
      zk = new ZooKeeper(zookeepers, (int) LOOKUP_MILLIS, event -> {
        if (event.getState() == Watcher.Event.KeeperState.SyncConnected) {
          connected.countDown();
        }
      });
      if (!connected.await(LOOKUP_MILLIS, TimeUnit.MILLISECONDS)) {
        return null;
      }
      String id = new String(zk.getData("/accumulo/instances/" + instance, false, null),
          StandardCharsets.UTF_8).trim();
      String tservers = "/accumulo/" + id + "/tservers";
      for (String server : zk.getChildren(tservers, false)) {
        List<String> locks = zk.getChildren(tservers + "/" + server, false);
        Collections.sort(locks);
        for (String lock : locks) {
          byte[] data = zk.getData(tservers + "/" + server + "/" + lock, false, null);
          String line = lineOf(new String(data == null ? new byte[0] : data,
              StandardCharsets.UTF_8));
          if (line != null) {
            return line;
          }
        }
      }
      return null;
    } catch (Exception e) {
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      return null;
    } finally {
      if (zk != null) {
        try {
          zk.close();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    }
  }

  /** The line a tablet server's lock data says, or null when it is neither format. */
  static String lineOf(String lockData) {
    String data = lockData.trim();
    if (data.startsWith("{") && data.contains("\"descriptors\"")) {
      return data.contains("\"TABLET_INGEST\"") ? "3.0" : null;
    }
    if (data.matches("([A-Z_]+=[^;=]+;?)+")) { // 2.1's ServerServices: SERVICE=host:port;...
      return "2.1";
    }
    return null;
  }
}
