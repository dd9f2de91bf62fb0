package exportconnector.gateway;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

import org.apache.accumulo.core.client.rfile.RFile;
import org.apache.accumulo.core.client.rfile.RFileWriter;
import org.apache.accumulo.core.data.Key;
import org.apache.accumulo.core.data.Mutation;
import org.apache.accumulo.core.data.Value;
import org.apache.accumulo.proxy.thrift.ColumnUpdate;
import org.apache.accumulo.proxy.thrift.MutationsRejectedException;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One RFile of a bulk import, written by {@code update} calls (the same calls, and the same direct
 * decoding, as a table writer's). Each call's cells are sorted by Accumulo's Key order and appended
 * with Accumulo's RFile writer; across calls keys must keep rising (the client sends sorted chunks).
 *
 * <p>The file is written under the staging directory's work folder and moved beside the other
 * completed files only by {@code closeWriter}, so a bulk import never loads a partial file. A key
 * lower than the last one written, a cell without a timestamp or a cell that does not convert fails
 * the file: it is deleted at once, later updates are dropped, and every flush and closeWriter throws
 * MutationsRejectedException with the reason (naming the key). Idle expiry, shutdown, a replacing
 * writer of the same name or the bulk import's deletion discard the file ({@link #release}).
 */
final class BulkFileSession extends UpdateSession {
  private static final Logger LOG = LoggerFactory.getLogger(BulkFileSession.class);
  /** Key order, then first come first kept: List.sort is stable. */
  private static final Comparator<Cell> ORDER = (a, b) -> a.key.compareTo(b.key);

  private record Cell(Key key, Value value) {}

  final String bulkId;
  final String name;
  private final BulkImports imports;
  private final Path partial;
  private final Path finished;
  private RFileWriter writer;
  private Key last;
  private long written;
  private long duplicates;
  private String failure; // set once: the file is gone and stays failed

  BulkFileSession(BulkImports imports, BulkImports.Staging staging, String name,
      Map<String,String> tableProperties) throws IOException {
    this.imports = imports;
    this.bulkId = staging.id();
    this.name = name;
    this.partial = new Path(staging.workDir(), name + BulkImports.EXTENSION);
    this.finished = new Path(staging.dir(), name + BulkImports.EXTENSION);
    var fs = imports.fs();
    fs.delete(partial, false); // left by a writer of this name that never finished
    this.writer = RFile.newWriter().to(partial.toString()).withFileSystem(fs)
        .withTableProperties(tableProperties).build();
  }

  @Override
  void update(Map<ByteBuffer,List<ColumnUpdate>> cells) {
    if (failure != null) {
      return;
    }
    List<Mutation> mutations;
    try {
      mutations = Conversions.toMutations(cells);
    } catch (RuntimeException e) {
      fail("an update of " + cells.size() + " row(s) was refused: " + e.getMessage());
      return;
    }
    append(mutations);
  }

  @Override
  void update(UpdateDecoder.Decoded call) {
    if (failure != null) {
      return;
    }
    if (call.error != null) {
      fail("an update of " + call.rows + " row(s) was refused: " + call.error);
      return;
    }
    append(call.mutations);
  }

  private void append(List<Mutation> mutations) {
    List<Cell> cells = new ArrayList<>();
    for (Mutation m : mutations) {
      byte[] row = m.getRow();
      for (org.apache.accumulo.core.data.ColumnUpdate u : m.getUpdates()) {
        if (!u.hasTimestamp()) {
          fail("row " + Conversions.printable(row) + " column "
              + Conversions.printable(u.getColumnFamily()) + ":"
              + Conversions.printable(u.getColumnQualifier()) + " has no timestamp: a bulk file keeps"
              + " each cell's timestamp, so every cell needs one");
          return;
        }
        cells.add(new Cell(new Key(row, u.getColumnFamily(), u.getColumnQualifier(),
            u.getColumnVisibility(), u.getTimestamp(), u.isDeleted(), false),
            new Value(u.getValue(), false)));
      }
    }
    cells.sort(ORDER);
    for (Cell c : cells) {
      if (last != null) {
        int order = c.key.compareTo(last);
        if (order < 0) {
          fail("key " + describe(c.key) + " came after key " + describe(last) + ", which sorts"
              + " after it: a bulk file's keys must keep rising across update calls (send the cells"
              + " sorted, each batch after the one before)");
          return;
        }
        if (order == 0) {
          duplicates++;
          continue; // an exact duplicate of the key just written
        }
      }
      try {
        writer.append(c.key, c.value);
      } catch (IOException | RuntimeException e) {
        fail("writing key " + describe(c.key) + " failed: " + Errors.describe(e));
        return;
      }
      last = c.key;
      written++;
    }
  }

  /** A key for messages: row family:qualifier [visibility] timestamp, and "delete" for a delete. */
  static String describe(Key k) {
    byte[] cv = k.getColumnVisibilityData().toArray();
    return Conversions.printable(k.getRowData().toArray()) + " "
        + Conversions.printable(k.getColumnFamilyData().toArray()) + ":"
        + Conversions.printable(k.getColumnQualifierData().toArray())
        + (cv.length > 0 ? " [" + Conversions.printable(cv) + "]" : "") + " ts " + k.getTimestamp()
        + (k.isDeleted() ? " delete" : "");
  }

  private void fail(String why) {
    failure = "bulk file " + name + " of bulk import " + bulkId + " failed after " + written
        + " cell(s) and was deleted, nothing of it will be loaded (write it again): " + why;
    LOG.info("{}", failure);
    imports.forget(this); // no longer being written: it does not hold up importBulk
    discardFile();
  }

  /** Closes and deletes the partial file; never throws. */
  private void discardFile() {
    RFileWriter w = writer;
    writer = null;
    if (w != null) {
      try {
        w.close();
      } catch (IOException | RuntimeException e) {
        // deleted below anyway
      }
    }
    try {
      imports.fs().delete(partial, false);
    } catch (IOException e) {
      LOG.warn("could not delete the partial bulk file {}: {}", partial, Errors.describe(e));
    }
  }

  /** Nothing to make durable before the file is complete: reports a failure, if any. */
  @Override
  void flush() throws MutationsRejectedException {
    if (failure != null) {
      throw new MutationsRejectedException(failure);
    }
  }

  /** Completes the file (a file without cells is not kept), or reports its failure. */
  @Override
  void closeAndReport() throws MutationsRejectedException {
    imports.forget(this);
    if (failure == null && writer != null) {
      RFileWriter w = writer;
      writer = null;
      try {
        w.close();
        if (written == 0) {
          imports.fs().delete(partial, false);
        } else {
          imports.complete(partial, finished);
        }
        LOG.debug("bulk file {} of bulk import {}: {} cell(s), {} duplicate(s) dropped", name, bulkId,
            written, duplicates);
      } catch (IOException | RuntimeException e) {
        fail("completing the file failed: " + Errors.describe(e));
      }
    }
    flush();
  }

  /** Idle expiry, shutdown, replaced or its bulk import deleted: discarded, never completed. */
  @Override
  void release() {
    imports.forget(this);
    if (failure == null && writer != null) {
      LOG.warn("bulk file {} of bulk import {} discarded unfinished after {} cell(s) (never closed)",
          name, bulkId, written);
      discardFile();
    }
  }
}
