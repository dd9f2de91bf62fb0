package exportconnector.gateway;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.accumulo.core.client.BatchWriter;
import org.apache.accumulo.core.client.MutationsRejectedException;
import org.apache.accumulo.core.data.Mutation;
import org.apache.accumulo.proxy.thrift.ColumnUpdate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One client writer: a Java BatchWriter plus the failures that the oneway {@code update} calls
 * could not report. Nothing is dropped silently: every failure is recorded and thrown by the next
 * flush or close. A BatchWriter that threw is unusable, so it is replaced by a fresh one with the
 * same options and the session carries on.
 *
 * <p>With a timeout (the writer options' {@code timeoutMs}), a flush or close never waits longer
 * than that (plus {@link #GRACE_MS}) for tablet servers: Accumulo's BatchWriter enforces the timeout
 * for servers that do not answer, and this session enforces it as well for the case where no server
 * hosts the tablets at all (a crashed, only tablet server). Either way the failure is reported as a
 * rejection whose text starts with {@link ErrorNames#TIMED_OUT}, and the BatchWriter is abandoned: it is
 * closed in the background, where it may still write what it holds once a server is back (harmless
 * for versioned cells and for deletes of exported entries; the client resends what it needs).
 */
final class WriterSession extends UpdateSession {
  private static final Logger LOG = LoggerFactory.getLogger(WriterSession.class);
  /** Rows named in a rejection message; the rest are counted. */
  private static final int ROWS_SHOWN = 3;

  /** Opens a BatchWriter with the session's table and options. */
  interface Opener {
    BatchWriter open() throws Exception;
  }

  /** How much longer than the timeout a flush may take before the session gives up on it. */
  static final long GRACE_MS = 5_000;
  private static final ExecutorService WAITERS = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "writer-deadline");
    t.setDaemon(true);
    return t;
  });

  /** A flush or close that did not finish within the timeout. */
  private static final class Late extends Exception {
    private static final long serialVersionUID = 1L;
  }

  /** One step on the BatchWriter. */
  private interface Step {
    void run() throws MutationsRejectedException;
  }

  private final Opener opener;
  private final String table;
  private final long timeoutMs; // 0: none
  private BatchWriter writer;
  private final Rejections rejections = new Rejections();
  // the mutations handed to the BatchWriter since the last flush, which a rejection may concern
  private final List<byte[]> pendingRows = new ArrayList<>();
  private long pendingCount;

  WriterSession(Opener opener, String table, long timeoutMs) throws Exception {
    this.opener = opener;
    this.table = table;
    this.timeoutMs = Math.max(0, timeoutMs);
    this.writer = opener.open(); // fails now (e.g. unknown table) rather than on the first update
  }

  /** Applies one update call: all of its mutations, or none if any cell does not convert. */
  @Override
  void update(Map<ByteBuffer,List<ColumnUpdate>> cells) {
    List<Mutation> mutations;
    try {
      mutations = Conversions.toMutations(cells);
    } catch (RuntimeException e) {
      refused(cells.size(), e.getMessage());
      return;
    }
    apply(mutations);
  }

  /** The same for a call that {@link UpdateDecoder} read straight from its frame. */
  @Override
  void update(UpdateDecoder.Decoded call) {
    if (call.error != null) {
      refused(call.rows, call.error);
      return;
    }
    apply(call.mutations);
  }

  private void refused(int rows, String why) {
    rejections.record("an update of " + rows + " row(s) was refused, none of it applied: " + why);
  }

  private void apply(List<Mutation> mutations) {
    for (int i = 0; i < mutations.size(); i++) {
      if (!add(mutations.get(i))) {
        rejections.record((mutations.size() - i) + " row(s) of an update not written: no BatchWriter");
        return;
      }
    }
  }

  /** False only if no BatchWriter can be had (e.g. the table was deleted). */
  private boolean add(Mutation m) {
    if (pendingRows.size() < ROWS_SHOWN) {
      pendingRows.add(m.getRow());
    }
    pendingCount++;
    // A rejection surfacing here usually concerns earlier mutations; this one then goes to the
    // fresh writer. Writing it twice is harmless (same cell, same value), losing it is not.
    for (int attempt = 0; attempt < 2; attempt++) {
      if (writer == null && !reopen()) {
        return false;
      }
      try {
        writer.addMutation(m);
        return true;
      } catch (MutationsRejectedException e) {
        rejected(e);
      } catch (IllegalArgumentException e) {
        rejections.record("row " + Conversions.printable(m.getRow()) + " refused: " + e.getMessage());
        return true;
      } catch (RuntimeException e) {
        rejections.record("row " + Conversions.printable(m.getRow()) + " not written: "
            + Errors.describe(e));
        discardWriter();
      }
    }
    return true;
  }

  /** Makes everything written so far durable, then reports any recorded failure. */
  @Override
  void flush() throws org.apache.accumulo.proxy.thrift.MutationsRejectedException {
    if (writer == null) {
      reopen();
    }
    if (writer != null) {
      BatchWriter w = writer;
      try {
        within(w::flush);
      } catch (Late e) {
        late("flush");
        reopen();
      } catch (MutationsRejectedException e) {
        rejected(e);
        reopen();
      } catch (RuntimeException e) {
        rejections.record("flush failed: " + Errors.describe(e));
        discardWriter();
        reopen();
      }
    }
    clearPending();
    throwIfRejected();
  }

  /** For closeWriter: flushes and closes, then reports any recorded failure. */
  @Override
  void closeAndReport() throws org.apache.accumulo.proxy.thrift.MutationsRejectedException {
    if (writer != null) {
      BatchWriter w = writer;
      try {
        within(w::close);
      } catch (Late e) {
        late("close");
      } catch (MutationsRejectedException e) {
        rejections.record(timeoutNote(e) + Rejections.describe(e) + pendingNote());
      } catch (RuntimeException e) {
        rejections.record("close failed: " + Errors.describe(e));
      }
      writer = null;
    }
    clearPending();
    throwIfRejected();
  }

  /** Idle expiry or shutdown: close, and log what nobody is left to hear. */
  @Override
  void release() {
    try {
      closeAndReport();
    } catch (org.apache.accumulo.proxy.thrift.MutationsRejectedException e) {
      LOG.warn("writer {} closed with unreported failures: {}", id, e.getMsg());
    }
  }

  private void rejected(MutationsRejectedException e) {
    rejections.record(timeoutNote(e) + Rejections.describe(e) + pendingNote());
    discardWriter();
  }

  /** Runs a flush or close, giving up after the timeout (plus grace) when there is one. */
  private void within(Step step) throws MutationsRejectedException, Late {
    if (timeoutMs == 0) {
      step.run();
      return;
    }
    Future<?> done = WAITERS.submit(() -> {
      step.run();
      return null;
    });
    try {
      done.get(timeoutMs + GRACE_MS, TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      throw new Late();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while waiting for the BatchWriter", e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof MutationsRejectedException mre) {
        throw mre;
      }
      if (cause instanceof RuntimeException re) {
        throw re;
      }
      throw new IllegalStateException(cause);
    }
  }

  /** The BatchWriter is stuck waiting for tablet servers: report it, and let it go in the background. */
  private void late(String what) {
    rejections.record(ErrorNames.message(ErrorNames.TIMED_OUT, noServerWithin()) + " (" + what
        + " gave up)" + pendingNote());
    discardWriter();
  }

  private String timeoutNote(MutationsRejectedException e) {
    return Errors.isTimeout(e) ? ErrorNames.message(ErrorNames.TIMED_OUT, noServerWithin()) + "; " : "";
  }

  private String noServerWithin() {
    return "no tablet server took the writes to table " + table + " within the writer's timeout of "
        + timeoutMs + " ms";
  }

  private String pendingNote() {
    List<String> rows = new ArrayList<>();
    for (byte[] r : pendingRows) {
      rows.add(Conversions.printable(r));
    }
    return "; of the " + pendingCount + " mutation(s) sent since the last flush (rows "
        + String.join(", ", rows) + (pendingCount > rows.size() ? ", ..." : "")
        + ") some may not be applied";
  }

  private boolean reopen() {
    try {
      writer = opener.open();
      return true;
    } catch (Exception e) {
      rejections.record("could not open a new BatchWriter: " + Errors.describe(e));
      writer = null;
      return false;
    }
  }

  /**
   * A BatchWriter that failed keeps failing; close it for its threads and drop it. With a timeout the
   * close happens in the background: a writer that timed out may wait for tablet servers once more
   * while it closes, and the caller has been waiting long enough.
   */
  private void discardWriter() {
    BatchWriter failed = writer;
    writer = null;
    if (failed == null) {
      return;
    }
    Runnable close = () -> {
      try {
        failed.close();
      } catch (Exception e) {
        // it already failed; the failure has been recorded
      }
    };
    if (timeoutMs > 0) {
      WAITERS.submit(close);
    } else {
      close.run();
    }
  }

  private void clearPending() {
    pendingRows.clear();
    pendingCount = 0;
  }

  private void throwIfRejected() throws org.apache.accumulo.proxy.thrift.MutationsRejectedException {
    if (!rejections.isEmpty()) {
      throw new org.apache.accumulo.proxy.thrift.MutationsRejectedException(rejections.drain(id));
    }
  }
}
