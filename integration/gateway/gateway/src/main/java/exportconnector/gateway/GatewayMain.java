package exportconnector.gateway;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import org.apache.accumulo.core.client.Accumulo;
import org.apache.accumulo.core.client.AccumuloClient;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The deployable gateway: {@code java -jar accumulo-gateway.jar --config gateway.properties}
 * ({@code --help} or {@code -h}: {@link Usage}).
 *
 * The config ({@link GatewayConfig}, documented in integration/gateway/README.md) names an
 * {@code accumulo-client.properties} file, read by Accumulo's own client, so every authentication
 * and SSL setting it supports (password, Kerberos/SASL, ...) works unchanged, plus the gateway's
 * bind address and port, shared secret file, TLS, idle timeout and frame limit. No secret is ever
 * taken from the command line. Once listening it prints one line to stdout,
 * {@code READY {"host": ..., "port": ..., "tls": ..., "accumulo_client": "2.1.6"}}.
 */
public final class GatewayMain {
  private static final Logger LOG = LoggerFactory.getLogger(GatewayMain.class);
  /** How long the first Accumulo call of a Kerberos gateway may take (see proveCredentials). */
  static final long KERBEROS_PROVE_SECONDS = 60;

  private GatewayMain() {}

  public static void main(String[] argv) {
    try {
      run(argv);
    } catch (IllegalArgumentException e) {
      System.err.println("gateway: " + e.getMessage());
      System.exit(2);
    } catch (KerberosLogin.LoginFailed e) {
      System.err.println("gateway: start-up failed: " + e.getMessage());
      System.exit(1);
    } catch (ServerLine.Mismatch e) {
      System.err.println("gateway: refused: " + e.getMessage());
      System.exit(1);
    } catch (Exception e) {
      System.err.println("gateway: start-up failed: " + Errors.describe(e));
      System.exit(1);
    }
  }

  private static void run(String[] argv) throws Exception {
    if (Arrays.asList(argv).contains("--help") || Arrays.asList(argv).contains("-h")) {
      System.out.print(Usage.text());
      System.out.flush();
      return;
    }
    Args a;
    try {
      a = new Args(argv, Set.of("config"), Set.of());
      a.require("config");
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(e.getMessage() + " (--help prints the usage)");
    }
    GatewayConfig config = GatewayConfig.load(Path.of(a.require("config")));
    Running running = Running.start(config, "main");
    Runnable stop = new Runnable() {
      private boolean done;

      @Override
      public synchronized void run() {
        if (!done) {
          done = true;
          running.close();
          LOG.info("gateway stopped");
        }
      }
    };
    Runtime.getRuntime().addShutdownHook(new Thread(stop, "gateway-shutdown"));
    Signals.onTermination(stop);

    System.out.println("READY " + Json.write(running.describe()));
    System.out.flush();
    new CountDownLatch(1).await(); // serve until the process is told to stop
  }

  /**
   * A serving gateway: its Accumulo client, the handler and the Thrift server. Public for programs
   * that run a gateway in their own JVM (the harness's launcher): {@link #start(Path, String)}.
   */
  public static final class Running implements AutoCloseable {
    final AccumuloClient client;
    final Gateway gateway;
    final GatewayServer server;
    final KerberosLogin kerberos; // null: not a Kerberos login
    private boolean closed;

    private Running(AccumuloClient client, Gateway gateway, GatewayServer server,
        KerberosLogin kerberos) {
      this.client = client;
      this.gateway = gateway;
      this.server = server;
      this.kerberos = kerberos;
    }

    /**
     * Starts a gateway from a {@code gateway.properties} file, as {@code java -jar} does; {@code name}
     * goes into its thread names and log lines.
     */
    public static Running start(Path configFile, String name) throws Exception {
      return start(GatewayConfig.load(configFile), name);
    }

    /**
     * Connects to Accumulo as {@code accumulo.client.properties} says, proves the credentials
     * once (so a wrong password fails at start-up, not on the first call) and starts serving.
     */
    static Running start(GatewayConfig config, String name) throws Exception {
      SharedSecret secret = config.secret();
      Properties props = config.accumuloClientProperties();
      ServerLine.check(props); // servers of another Accumulo line: one line, before Accumulo's obscure errors
      KerberosLogin kerberos = null;
      if (KerberosLogin.wanted(props)) {
        try {
          kerberos = KerberosLogin.acquire(props, config.clientProperties.getParent(),
              config.kerberosRenewSeconds);
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException(config.clientProperties + ": " + e.getMessage());
        }
      }
      AccumuloClient client;
      try {
        client = Accumulo.newClient().from(props).build();
      } catch (RuntimeException e) {
        if (kerberos != null) {
          kerberos.release();
        }
        throw e;
      }
      GatewayServer server = null;
      try {
        // authenticates; every user may read their own authorizations
        proveCredentials(client, kerberos, props);
        if (kerberos != null) {
          // the one line that says who this gateway is to Accumulo
          LOG.info("gateway {} authenticated to Accumulo by Kerberos as {}", name,
              kerberos.describe());
        }
        Gateway gateway = new Gateway(client, secret, config.idleTimeoutMs, config.bulkDir);
        server = GatewayServer.start(DeclaredExceptionsGuard.wrap(gateway), gateway, config.host,
            config.port, name, config.maxFrameBytes, config.tls);
        LOG.info("gateway {} for Accumulo user {} listening on {}:{} ({})", name, client.whoami(),
            server.host(), server.port(), server.tls() ? "TLS" : "plain, no TLS");
        return new Running(client, gateway, server, kerberos);
      } catch (Exception e) {
        if (server != null) {
          server.close();
        }
        client.close();
        if (kerberos != null) {
          kerberos.release();
        }
        throw e;
      }
    }

    /**
     * One call that needs valid credentials. With Kerberos, Accumulo's client retries a failed SASL
     * handshake without end, so the call gets a deadline and a failure names its Kerberos cause.
     */
    private static void proveCredentials(AccumuloClient client, KerberosLogin kerberos,
        Properties props) throws Exception {
      if (kerberos == null) {
        client.securityOperations().getUserAuthorizations(client.whoami());
        return;
      }
      kerberos.checkServiceTicket(client, props.getProperty(KerberosLogin.SASL_SERVER_PRIMARY,
          "accumulo").trim());
      java.util.concurrent.FutureTask<Object> call = new java.util.concurrent.FutureTask<>(() ->
          client.securityOperations().getUserAuthorizations(client.whoami()));
      Thread t = new Thread(call, "gateway-prove-credentials");
      t.setDaemon(true);
      t.start();
      try {
        call.get(KERBEROS_PROVE_SECONDS, java.util.concurrent.TimeUnit.SECONDS);
      } catch (java.util.concurrent.TimeoutException e) {
        t.interrupt();
        throw new KerberosLogin.LoginFailed("logged in to Kerberos as " + kerberos.principal()
            + ", but Accumulo did not accept the SASL connection within " + KERBEROS_PROVE_SECONDS
            + " s (check " + KerberosLogin.SASL_SERVER_PRIMARY
            + " against the servers' principals, and that the servers run with"
            + " instance.rpc.sasl.enabled=true)");
      } catch (java.util.concurrent.ExecutionException e) {
        Throwable c = e.getCause();
        if (c instanceof org.apache.accumulo.core.client.AccumuloSecurityException) {
          throw new KerberosLogin.LoginFailed("logged in to Kerberos as " + kerberos.principal()
              + ", but Accumulo refused it: " + c.getMessage());
        }
        throw new KerberosLogin.LoginFailed("logged in to Kerberos as " + kerberos.principal()
            + ", but the first Accumulo call failed: " + KerberosLogin.cause(c));
      }
    }

    public String host() {
      return server.host();
    }

    public int port() {
      return server.port();
    }

    public boolean tls() {
      return server.tls();
    }

    /** What the READY line says: where it listens, and the release of the Accumulo client it runs. */
    public Map<String,Object> describe() {
      Map<String,Object> m = new LinkedHashMap<>();
      m.put("host", server.host());
      m.put("port", server.port());
      m.put("tls", server.tls());
      m.put("accumulo_client", accumuloClientVersion());
      if (kerberos != null) {
        m.put("kerberos_principal", kerberos.principal());
      }
      return m;
    }

    /** Stops accepting calls, flushes open writers, closes the Accumulo client. */
    @Override
    public synchronized void close() {
      if (closed) {
        return;
      }
      closed = true;
      server.close();
      gateway.close();
      client.close();
      if (kerberos != null) {
        kerberos.release();
      }
    }
  }

  /**
   * The release of the Accumulo client classes this JVM loaded (the deployable jar's: 2.1.6). Read
   * from the loaded class, not compiled in: {@code Constants.VERSION} is a constant that javac would
   * copy from the release this was compiled against.
   */
  public static String accumuloClientVersion() {
    try {
      return String.valueOf(Class.forName("org.apache.accumulo.core.Constants").getField("VERSION")
          .get(null));
    } catch (ReflectiveOperationException e) {
      return "unknown";
    }
  }
}
