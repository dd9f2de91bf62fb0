package exportconnector.gateway;

import java.io.File;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.security.auth.Subject;
import javax.security.auth.kerberos.KerberosPrincipal;
import javax.security.auth.kerberos.KerberosTicket;
import javax.security.auth.kerberos.KeyTab;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.security.UserGroupInformation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The gateway's Kerberos identity, when its {@code accumulo-client.properties} says
 * {@code auth.type=kerberos}: a login from the keytab that {@code auth.token} names, as the
 * principal {@code auth.principal}, renewed for as long as the gateway runs.
 *
 * <p>Accumulo 2.1's client does not log in itself (its {@code KerberosToken(principal, keytab)} has
 * no side effects): every SASL connection it opens runs as Hadoop's current
 * {@code UserGroupInformation} user. So the gateway logs that user in, and a scheduled
 * {@code checkTGTAndReloginFromKeytab()} keeps its ticket-granting ticket fresh (the call does
 * nothing until 80% of the ticket's life has passed). The login is JVM-wide (Hadoop keeps one login
 * user per JVM), so gateways sharing a JVM (the harness's launcher) share one login, and asking for
 * a second, different identity in the same JVM is refused.
 *
 * <p>Failures become one line naming the cause ({@link #cause(Throwable)}): a principal the keytab
 * or the KDC does not know, a missing or unreadable keytab, a stale key, clock skew, an unreachable
 * KDC. The keytab's content is never logged; its path is.
 */
public final class KerberosLogin {
  private static final Logger LOG = LoggerFactory.getLogger(KerberosLogin.class);

  /** accumulo-client.properties keys, as Accumulo 2.1's {@code ClientProperty} names them. */
  static final String AUTH_TYPE = "auth.type";
  static final String AUTH_PRINCIPAL = "auth.principal";
  static final String AUTH_TOKEN = "auth.token";
  static final String SASL_ENABLED = "sasl.enabled";
  static final String SASL_SERVER_PRIMARY = "sasl.kerberos.server.primary";

  /** A Kerberos login that failed: its message is the whole one-line explanation. */
  public static final class LoginFailed extends Exception {
    private static final long serialVersionUID = 1L;

    LoginFailed(String message) {
      super(message);
    }
  }

  private static KerberosLogin current; // guarded by KerberosLogin.class
  private static int holders; // gateways of this JVM using `current`

  final String principal;
  final Path keytab;
  private final UserGroupInformation ugi;
  private final ScheduledExecutorService renewer;
  private volatile long ticketEnd; // ms since the epoch; 0 unknown

  private KerberosLogin(String principal, Path keytab, UserGroupInformation ugi, long renewSeconds) {
    this.principal = principal;
    this.keytab = keytab;
    this.ugi = ugi;
    this.ticketEnd = ticketEnd(ugi);
    this.renewer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "kerberos-renewal");
      t.setDaemon(true);
      return t;
    });
    renewer.scheduleWithFixedDelay(this::renew, renewSeconds, renewSeconds, TimeUnit.SECONDS);
  }

  /** Whether these client properties ask for a Kerberos login. */
  static boolean wanted(Properties clientProps) {
    return "kerberos".equalsIgnoreCase(clientProps.getProperty(AUTH_TYPE, "").trim());
  }

  /**
   * Logs this JVM in as the client properties' principal from their keytab (or joins the login
   * another gateway of this JVM made with the same ones) and starts its renewal. {@code keytabBase}:
   * the folder a relative keytab path is resolved against (the properties file's); the properties
   * are updated to the absolute path, so Accumulo's client sees the same file.
   *
   * @throws IllegalArgumentException a configuration error (names the setting)
   * @throws LoginFailed the login itself failed (the message says why, in one line)
   */
  public static KerberosLogin acquire(Properties clientProps, Path keytabBase, long renewSeconds)
      throws LoginFailed {
    if (!"true".equalsIgnoreCase(clientProps.getProperty(SASL_ENABLED, "").trim())) {
      throw new IllegalArgumentException(AUTH_TYPE + "=kerberos needs " + SASL_ENABLED
          + "=true (Accumulo takes Kerberos only over SASL RPC)");
    }
    String principal = clientProps.getProperty(AUTH_PRINCIPAL, "").trim();
    if (principal.isEmpty()) {
      throw new IllegalArgumentException(AUTH_TYPE + "=kerberos needs " + AUTH_PRINCIPAL
          + " (the gateway's Kerberos principal, e.g. exporter@EXAMPLE.COM)");
    }
    String token = clientProps.getProperty(AUTH_TOKEN, "").trim();
    if (token.isEmpty()) {
      throw new IllegalArgumentException(AUTH_TYPE + "=kerberos needs " + AUTH_TOKEN
          + " = the path of the principal's keytab file");
    }
    Path keytab = keytabBase.resolve(token).toAbsolutePath().normalize();
    clientProps.setProperty(AUTH_TOKEN, keytab.toString());
    synchronized (KerberosLogin.class) {
      if (current != null) {
        boolean same = current.principal.equals(principal)
            || (!principal.contains("@") && current.principal.startsWith(principal + "@"));
        if (!same || !current.keytab.equals(keytab)) {
          throw new LoginFailed("this JVM is already logged in to Kerberos as " + current.principal
              + " (keytab " + current.keytab + "); one JVM holds one Kerberos identity, so run a"
              + " gateway for " + principal + " in a JVM of its own");
        }
        clientProps.setProperty(AUTH_PRINCIPAL, current.principal);
        holders++;
        return current;
      }
      checkKeytab(principal, keytab);
      UserGroupInformation ugi;
      try {
        Configuration conf = new Configuration(); // core-site.xml on the classpath, if any
        conf.set("hadoop.security.authentication", "kerberos");
        UserGroupInformation.setConfiguration(conf);
        UserGroupInformation.loginUserFromKeytab(principal, keytab.toString());
        ugi = UserGroupInformation.getLoginUser();
      } catch (Exception | LinkageError e) {
        throw new LoginFailed(failure(principal, keytab, e));
      }
      if (!principal.equals(ugi.getUserName()) && !principal.contains("@")) {
        // a principal without a realm logs in under the default realm: Accumulo must see the full name
        clientProps.setProperty(AUTH_PRINCIPAL, ugi.getUserName());
      }
      current = new KerberosLogin(ugi.getUserName(), keytab, ugi, renewSeconds);
      holders = 1;
      return current;
    }
  }

  /** The one-line message of a failed login. */
  static String failure(String principal, Path keytab, Throwable e) {
    return "Kerberos login as " + principal + " from keytab " + keytab + " failed: " + cause(e, true);
  }

  /**
   * What is wrong with the keytab file, before asking the KDC anything: missing, not a file,
   * unreadable, empty, or holding no key for the principal (a wrong {@code auth.principal}).
   */
  private static void checkKeytab(String principal, Path keytab) throws LoginFailed {
    String where = "Kerberos login as " + principal + " failed: keytab " + keytab;
    if (!Files.exists(keytab)) {
      throw new LoginFailed(where + " does not exist (" + AUTH_TOKEN + " names the keytab file)");
    }
    if (!Files.isRegularFile(keytab)) {
      throw new LoginFailed(where + " is not a file");
    }
    if (!Files.isReadable(keytab)) {
      throw new LoginFailed(where + " is not readable by this user");
    }
    File file = keytab.toFile();
    if (file.length() == 0) {
      throw new LoginFailed(where + " is empty");
    }
    KerberosPrincipal kp;
    try {
      kp = new KerberosPrincipal(principal);
    } catch (IllegalArgumentException e) {
      throw new LoginFailed("Kerberos login as " + principal + " failed: " + cause(e, true));
    }
    KeyTab kt = KeyTab.getInstance(file);
    if (kt.getKeys(kp).length == 0) {
      throw new LoginFailed(where + " holds no key for " + kp.getName() + " (wrong "
          + AUTH_PRINCIPAL + ", or not a keytab file)");
    }
  }

  /** Renews the ticket-granting ticket when it is near its end; one log line per renewal or failure. */
  private void renew() {
    try {
      ugi.checkTGTAndReloginFromKeytab();
      long end = ticketEnd(ugi);
      if (end != ticketEnd) {
        ticketEnd = end;
        LOG.info("renewed the Kerberos login of {}: ticket valid until {}", principal, until(end));
      }
    } catch (Exception e) {
      LOG.warn("renewing the Kerberos login of {} failed (tried again later): {}", principal,
          cause(e, true));
    }
  }

  /** "principal (keytab PATH, ticket valid until T)": what the start-up line says. */
  public String describe() {
    return principal + " (keytab " + keytab + ", ticket valid until " + until(ticketEnd) + ")";
  }

  public String principal() {
    return principal;
  }

  /**
   * Asks the KDC for a service ticket to one tablet server ({@code primary/host}, the host as Accumulo's
   * client names it: the canonical name of the address in ZooKeeper), as the first SASL connection
   * would. Accumulo's client retries a failed SASL handshake without end and logs a stack trace each
   * time; this fails at once with the cause (an unknown service principal: a wrong
   * {@code sasl.kerberos.server.primary}). Nothing to check while no tablet server is registered.
   */
  @SuppressWarnings("deprecation")
  void checkServiceTicket(org.apache.accumulo.core.client.AccumuloClient client, String primary)
      throws LoginFailed {
    List<String> servers = client.instanceOperations().getTabletServers();
    if (servers.isEmpty()) {
      return;
    }
    String address = servers.get(0);
    String host = address.substring(0, address.lastIndexOf(':') < 0 ? address.length()
        : address.lastIndexOf(':'));
    String service = primary + "/" + host;
    try {
      service = primary + "/" + java.net.InetAddress.getByName(host).getCanonicalHostName();
      final String name = service.replace('/', '@');
      ugi.doAs((java.security.PrivilegedExceptionAction<Void>) () -> {
        org.ietf.jgss.GSSManager gss = org.ietf.jgss.GSSManager.getInstance();
        org.ietf.jgss.GSSContext ctx = gss.createContext(
            gss.createName(name, org.ietf.jgss.GSSName.NT_HOSTBASED_SERVICE),
            new org.ietf.jgss.Oid("1.2.840.113554.1.2.2"), null,
            org.ietf.jgss.GSSContext.DEFAULT_LIFETIME);
        try {
          ctx.initSecContext(new byte[0], 0, 0); // gets the service ticket from the KDC
        } finally {
          ctx.dispose();
        }
        return null;
      });
    } catch (Exception e) {
      throw new LoginFailed("logged in to Kerberos as " + principal + ", but got no service ticket"
          + " for Accumulo's tablet server " + service + principal.substring(
              Math.max(0, principal.indexOf('@'))) + " (" + SASL_SERVER_PRIMARY + "="
          + primary + "): " + cause(e, true));
    }
  }

  /** A gateway of this JVM is done with the login; the renewal stops with the last one. */
  public void release() {
    synchronized (KerberosLogin.class) {
      if (current == this && --holders <= 0) {
        renewer.shutdownNow();
        current = null;
      }
    }
  }

  private static String until(long end) {
    return end == 0 ? "unknown" : Instant.ofEpochMilli(end).toString();
  }

  /** The end time of the login's ticket-granting ticket (0 when it cannot be read). */
  private static long ticketEnd(UserGroupInformation ugi) {
    try {
      // UGI keeps its Subject to itself (getSubject() is not public); reading it beats guessing
      Method m = UserGroupInformation.class.getDeclaredMethod("getSubject");
      m.setAccessible(true);
      Subject s = (Subject) m.invoke(ugi);
      long end = 0;
      for (KerberosTicket t : s.getPrivateCredentials(KerberosTicket.class)) {
        if (t.getServer().getName().startsWith("krbtgt/")) {
          Date d = t.getEndTime();
          end = Math.max(end, d == null ? 0 : d.getTime());
        }
      }
      return end;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return 0;
    }
  }

  // --- the one-line cause of a Kerberos / GSS failure -------------------------------------------

  /** "... (6)" at the end of a KrbException's message: the Kerberos error code. */
  private static final Pattern CODE = Pattern.compile("\\((\\d{1,2})\\)");

  /**
   * Maps Kerberos, GSS and login exceptions (anywhere in the cause chain) to one line naming the
   * cause and what to check. The JDK's KrbException is internal, so its code is read from the
   * message ("Clock skew too great (37)", also inside a GSSException's "Mechanism level: ..."); the
   * original text is kept after the explanation, in brackets.
   */
  public static String cause(Throwable e) {
    return cause(e, false);
  }

  /**
   * As {@link #cause(Throwable)}; {@code talkingToKdc}: the failure came from an exchange with the KDC
   * (a login, a renewal, a service ticket), so a refused or timed-out connection is the KDC's.
   */
  static String cause(Throwable e, boolean talkingToKdc) {
    List<Throwable> chain = new ArrayList<>();
    for (Throwable c = e; c != null && !chain.contains(c); c = c.getCause()) {
      chain.add(c);
    }
    for (Throwable c : chain) {
      String msg = String.valueOf(c.getMessage());
      Matcher m = CODE.matcher(msg);
      // KrbException's own text, or a GSSException's "(Mechanism level: ... (7) ...)"
      while (m.find()) {
        String known = byCode(Integer.parseInt(m.group(1)));
        if (known != null) {
          return known + " [" + msg.trim().replace('\n', ' ') + "]";
        }
      }
    }
    for (Throwable c : chain) {
      String msg = String.valueOf(c.getMessage());
      String lower = msg.toLowerCase(Locale.ROOT);
      String known = null;
      if (lower.contains("clock skew")) {
        known = byCode(37);
      } else if (lower.contains("cannot locate default realm")
          || lower.contains("cannot locate kdc")) {
        known = "no Kerberos configuration for the realm: krb5.conf is missing or names no"
            + " default_realm / KDC (default /etc/krb5.conf; -Djava.security.krb5.conf=FILE names"
            + " another)";
      } else if (lower.contains("cannot contact any kdc") || (talkingToKdc
          && (c instanceof java.net.ConnectException || c instanceof java.net.SocketTimeoutException
              || lower.contains("receive timed out")))) {
        known = "cannot reach the KDC (check the kdc entries of krb5.conf and the network)";
      } else if (lower.contains("unable to obtain password from user")) {
        known = "the keytab holds no key for this principal (wrong auth.principal, or the wrong"
            + " keytab)";
      } else if (lower.contains("checksum failed") || lower.contains("integrity check")
          || lower.contains("message stream modified")) {
        known = STALE;
      } else if (lower.contains("no valid credentials provided")
          || lower.contains("failed to find any kerberos tgt")) {
        known = "no valid Kerberos ticket (the login expired or never happened)";
      }
      if (known != null) {
        return known + " [" + msg.trim().replace('\n', ' ') + "]";
      }
    }
    Throwable root = chain.get(chain.size() - 1);
    return (root.getClass().getSimpleName() + ": " + root.getMessage()).replace('\n', ' ');
  }

  private static final String STALE = "the keytab's key does not match the KDC's (a stale keytab:"
      + " the principal's key was changed after the keytab was exported; export a new one)";

  private static String byCode(int code) {
    switch (code) {
      case 6:
        return "the KDC does not know this principal (wrong auth.principal, or it was deleted)";
      case 7:
        return "the KDC does not know the Accumulo service principal (check "
            + SASL_SERVER_PRIMARY + " and that the servers' host names resolve to their"
            + " principals' hosts)";
      case 18:
        return "the principal is disabled or locked in the KDC";
      case 23:
        return "the principal's key has expired in the KDC (renew it and export a new keytab)";
      case 24:
        return STALE + "; some KDCs also answer a clock skew this way, so compare this host's clock"
            + " with the KDC's";
      case 31:
      case 41:
        return STALE;
      case 32:
        return "the ticket has expired";
      case 37:
        return "clock skew too great between this host and the KDC (sync the clocks, e.g. NTP)";
      case 68:
        return "wrong realm (the principal's realm is not the KDC's)";
      default:
        return null;
    }
  }
}
