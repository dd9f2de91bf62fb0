package exportconnector.gateway;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import org.apache.accumulo.core.client.Accumulo;
import org.apache.accumulo.core.client.AccumuloClient;
import org.apache.accumulo.core.client.security.tokens.PasswordToken;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A standalone gateway in front of any Accumulo instance.
 *
 * <pre>
 * GatewayMain --instance NAME --zookeepers HOST:PORT --user USER
 *             [--host 127.0.0.1] [--port 0] [--idle-timeout-ms 600000]
 *             [--password-file PATH] [--secret-file PATH] [--max-frame-bytes 67108864]
 * </pre>
 *
 * The password comes from $ACCUMULO_PASSWORD or --password-file, the shared secret from
 * $ACCUMULO_GATEWAY_SECRET or --secret-file; neither is ever taken as a flag value. Once
 * listening it prints one line, {@code READY {"host": ..., "port": ...}}, to stdout.
 */
public final class GatewayMain {
  private static final Logger LOG = LoggerFactory.getLogger(GatewayMain.class);
  static final long DEFAULT_IDLE_TIMEOUT_MS = 10 * 60 * 1000L;

  private GatewayMain() {}

  public static void main(String[] argv) {
    try {
      run(argv);
    } catch (IllegalArgumentException e) {
      System.err.println("gateway: " + e.getMessage());
      System.exit(2);
    } catch (Exception e) {
      System.err.println("gateway: start-up failed: " + Errors.describe(e));
      System.exit(1);
    }
  }

  private static void run(String[] argv) throws Exception {
    Args a = new Args(argv, Set.of("instance", "zookeepers", "user", "host", "port",
        "idle-timeout-ms", "password-file", "secret-file", "max-frame-bytes"), Set.of());
    String instance = a.require("instance");
    String zookeepers = a.require("zookeepers");
    String user = a.require("user");
    String host = a.get("host", "127.0.0.1");
    int port = a.getInt("port", 0);
    long idle = a.getLong("idle-timeout-ms", DEFAULT_IDLE_TIMEOUT_MS);
    if (idle <= 0) {
      throw new IllegalArgumentException("--idle-timeout-ms must be positive");
    }
    int maxFrame = GatewayServer.checkMaxFrameBytes(
          a.getInt("max-frame-bytes", GatewayServer.DEFAULT_MAX_FRAME_BYTES));
    String password = Secrets.read("password", "ACCUMULO_PASSWORD", a.get("password-file", null),
        "password-file");
    SharedSecret secret = new SharedSecret(Secrets.read("gateway shared secret",
        "ACCUMULO_GATEWAY_SECRET", a.get("secret-file", null), "secret-file"));

    AccumuloClient client = Accumulo.newClient().to(instance, zookeepers).as(user, password).build();
    try {
      // fail at start-up, not on the first call, when the credentials are wrong
      if (!client.securityOperations().authenticateUser(user, new PasswordToken(password))) {
        throw new IllegalStateException("Accumulo refused the password of user " + user);
      }
    } catch (Exception e) {
      client.close();
      throw e;
    }
    Gateway gateway = new Gateway(client, secret, idle);
    GatewayServer server =
        GatewayServer.start(DeclaredExceptionsGuard.wrap(gateway), host, port, instance, maxFrame);
    Runnable stop = new Runnable() {
      private boolean done;

      @Override
      public synchronized void run() {
        if (!done) {
          done = true;
          server.close();
          gateway.close(); // flushes open writers
          client.close();
          LOG.info("gateway stopped");
        }
      }
    };
    Runtime.getRuntime().addShutdownHook(new Thread(stop, "gateway-shutdown"));
    Signals.onTermination(stop);

    Map<String,Object> ready = new LinkedHashMap<>();
    ready.put("host", server.host());
    ready.put("port", server.port());
    System.out.println("READY " + Json.write(ready));
    System.out.flush();
    LOG.info("gateway for {} listening on {}:{}", instance, server.host(), server.port());

    new CountDownLatch(1).await(); // serve until the process is told to stop
  }
}
