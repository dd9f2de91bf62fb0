package exportconnector.harness;

import exportconnector.gateway.Args;
import exportconnector.gateway.Json;
import exportconnector.gateway.Secrets;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

import org.apache.accumulo.core.client.Accumulo;
import org.apache.accumulo.core.client.AccumuloClient;
import org.apache.accumulo.core.client.BatchWriter;
import org.apache.accumulo.core.client.BatchWriterConfig;
import org.apache.accumulo.core.client.TableExistsException;
import org.apache.accumulo.core.data.Mutation;

/**
 * The Java side of the write benchmark: the same cells as the Python benchmark, straight into a
 * Java BatchWriter.
 *
 * <pre>
 * BenchWriter --instance NAME --zookeepers HOST:PORT --user USER --table T --cells N
 *             [--cells-per-row 10] [--value-bytes 32] [--threads 2]
 * </pre>
 *
 * Password from $ACCUMULO_PASSWORD. Cell c (0..N-1) is row "r%08d" of c / cellsPerRow, family
 * "f", qualifier "q" + (c % cellsPerRow), value "v" followed by c zero-padded to valueBytes - 1
 * digits. Prints {@code {"cells": N, "seconds": S, "cells_per_s": R}}; the clock runs from the
 * first addMutation until close() returns.
 */
public final class BenchWriter {
  private static final long MAX_MEMORY = 64L * 1024 * 1024;

  private BenchWriter() {}

  public static void main(String[] argv) {
    try {
      run(argv);
    } catch (IllegalArgumentException e) {
      System.err.println("bench: " + e.getMessage());
      System.exit(2);
    } catch (Exception e) {
      System.err.println("bench: failed: " + Launcher.describe(e));
      System.exit(1);
    }
  }

  private static void run(String[] argv) throws Exception {
    Args a = new Args(argv, Set.of("instance", "zookeepers", "user", "table", "cells",
        "cells-per-row", "value-bytes", "threads"), Set.of());
    String table = a.require("table");
    long cells = a.getLong("cells", -1);
    int perRow = a.getInt("cells-per-row", 10);
    int valueBytes = a.getInt("value-bytes", 32);
    int threads = a.getInt("threads", 2);
    if (cells < 0 || perRow <= 0 || valueBytes < 1 || threads <= 0) {
      throw new IllegalArgumentException("need --cells >= 0, --cells-per-row > 0, "
          + "--value-bytes >= 1 and --threads > 0");
    }
    String password = Secrets.read("password", "ACCUMULO_PASSWORD", null, null);

    try (AccumuloClient client = Accumulo.newClient()
        .to(a.require("instance"), a.require("zookeepers")).as(a.require("user"), password)
        .build()) {
      try {
        client.tableOperations().create(table);
      } catch (TableExistsException e) {
        // writing into an existing table is fine
      }
      BatchWriterConfig config =
          new BatchWriterConfig().setMaxMemory(MAX_MEMORY).setMaxWriteThreads(threads);
      byte[] family = {'f'};
      byte[][] qualifiers = new byte[perRow][];
      for (int i = 0; i < perRow; i++) {
        qualifiers[i] = ("q" + i).getBytes(StandardCharsets.UTF_8);
      }

      long start;
      BatchWriter writer = client.createBatchWriter(table, config);
      try {
        start = System.nanoTime();
        long c = 0;
        while (c < cells) {
          long row = c / perRow;
          Mutation m = new Mutation(padded('r', row, 8));
          long rowEnd = Math.min(cells, (row + 1) * perRow);
          for (; c < rowEnd; c++) {
            m.put(family, qualifiers[(int) (c % perRow)], padded('v', c, valueBytes - 1));
          }
          writer.addMutation(m);
        }
      } finally {
        writer.close();
      }
      double seconds = (System.nanoTime() - start) / 1e9;

      Map<String,Object> result = new LinkedHashMap<>();
      result.put("cells", cells);
      result.put("seconds", Math.round(seconds * 1000) / 1000.0);
      result.put("cells_per_s", seconds > 0 ? Math.round(cells / seconds * 10) / 10.0 : 0.0);
      System.out.println(Json.write(result));
      System.out.flush();
    }
  }

  /** prefix + n in decimal, zero-padded to at least {@code digits} (String.format is too slow). */
  static byte[] padded(char prefix, long n, int digits) {
    String s = Long.toString(n);
    int width = Math.max(digits, s.length());
    byte[] out = new byte[1 + width];
    out[0] = (byte) prefix;
    int zeros = width - s.length();
    for (int i = 0; i < zeros; i++) {
      out[1 + i] = '0';
    }
    for (int i = 0; i < s.length(); i++) {
      out[1 + zeros + i] = (byte) s.charAt(i);
    }
    return out;
  }
}
