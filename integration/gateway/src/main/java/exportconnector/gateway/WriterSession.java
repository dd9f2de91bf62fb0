package exportconnector.gateway;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

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
 */
final class WriterSession extends Session {
  private static final Logger LOG = LoggerFactory.getLogger(WriterSession.class);
  /** Rows named in a rejection message; the rest are counted. */
  private static final int ROWS_SHOWN = 3;

  /** Opens a BatchWriter with the session's table and options. */
  interface Opener {
    BatchWriter open() throws Exception;
  }

  private final Opener opener;
  private BatchWriter writer;
  private final Rejections rejections = new Rejections();
  // the mutations handed to the BatchWriter since the last flush, which a rejection may concern
  private final List<byte[]> pendingRows = new ArrayList<>();
  private long pendingCount;

  WriterSession(Opener opener) throws Exception {
    this.opener = opener;
    this.writer = opener.open(); // fails now (e.g. unknown table) rather than on the first update
  }

  /** Applies one update call: all of its mutations, or none if any cell does not convert. */
  void update(Map<ByteBuffer,List<ColumnUpdate>> cells) {
    List<Mutation> mutations;
    try {
      mutations = Conversions.toMutations(cells);
    } catch (RuntimeException e) {
      rejections.record("an update of " + cells.size() + " row(s) was refused, none of it applied: "
          + e.getMessage());
      return;
    }
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
  void flush() throws org.apache.accumulo.proxy.thrift.MutationsRejectedException {
    if (writer == null) {
      reopen();
    }
    if (writer != null) {
      try {
        writer.flush();
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
  void closeAndReport() throws org.apache.accumulo.proxy.thrift.MutationsRejectedException {
    if (writer != null) {
      try {
        writer.close();
      } catch (MutationsRejectedException e) {
        rejections.record(Rejections.describe(e) + pendingNote());
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
    rejections.record(Rejections.describe(e) + pendingNote());
    discardWriter();
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

  /** A BatchWriter that failed keeps failing; close it for its threads and drop it. */
  private void discardWriter() {
    if (writer != null) {
      try {
        writer.close();
      } catch (Exception e) {
        // it already failed; the failure has been recorded
      }
      writer = null;
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
