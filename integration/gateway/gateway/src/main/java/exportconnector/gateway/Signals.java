package exportconnector.gateway;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Turns SIGTERM and SIGINT into an orderly stop and exit status 0 instead of 143 / 130. */
public final class Signals {
  private static final Logger LOG = LoggerFactory.getLogger(Signals.class);

  private Signals() {}

  /**
   * On SIGTERM / SIGINT: run {@code stop} on an ordinary thread, then exit 0 (unless stop ended the
   * JVM itself). Stopping before the JVM's shutdown starts matters: Accumulo code run while
   * stopping a MiniAccumuloCluster may register shutdown hooks, which fails during shutdown.
   */
  public static void onTermination(Runnable stop) {
    for (String name : new String[] {"TERM", "INT"}) {
      try {
        sun.misc.Signal.handle(new sun.misc.Signal(name), sig -> {
          // a fresh thread: the signal dispatcher must not block on stopping or on exit
          new Thread(() -> {
            LOG.info("SIG{}: stopping", name);
            stop.run();
            System.exit(0);
          }, "stop-on-SIG" + name).start();
        });
      } catch (RuntimeException | LinkageError e) {
        // no signal support here: the JVM's default handling still runs the shutdown hooks
      }
    }
  }
}
