package exportconnector.examples;

import static exportconnector.examples.RowTransactions.bytes;
import static exportconnector.examples.RowTransactions.str;

import exportconnector.gateway.Args;
import exportconnector.examples.Encoders.TextCell;

import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import org.apache.accumulo.core.client.Accumulo;
import org.apache.accumulo.core.client.AccumuloClient;
import org.apache.accumulo.core.client.Scanner;
import org.apache.accumulo.core.client.TableExistsException;
import org.apache.accumulo.core.data.Key;
import org.apache.accumulo.core.data.Range;
import org.apache.accumulo.core.data.Value;
import org.apache.accumulo.core.security.Authorizations;
import org.apache.hadoop.io.Text;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

/**
 * A Java producer of row transactions: the command around {@link RowTransactions} (the protocol),
 * {@link QueueLayout} (the queue's rows) and {@link Encoders} (the json and packed values).
 *
 * <p>The workload is the project's inverted count index: each transaction increments the counter
 * {@code c:n} (ASCII decimal) of one word's row and exports key = the word, value = {@code {"new":
 * [cell], "old": [cell]}} for the {@code difference} translator, where a cell is the index cell
 * (row = count as %08d, family "w", qualifier = word) of the old and the new count ({@code old} is
 * empty when the old count was 0). See {@code examples/inverted_count_index.py}. The value is that
 * JSON, or the same update in the {@code packed} encoding ({@code connector/packed.py}) when the
 * queue was made with {@code --value-serializer packed}.
 *
 * <pre>
 * RowTransactionExample --instance NAME --zookeepers HOST:PORT --user USER --table T
 *     --queue-table Q --qid ID [--buckets N] [--words 5] [--transactions 100] [--seed 0]
 *     [--max-attempts 100] [--no-relay]
 * RowTransactionExample --check      (hash and packed test vectors only; no cluster)
 * RowTransactionExample --help       (or -h: the usage, exit status 0)
 * </pre>
 *
 * The password comes from $ACCUMULO_PASSWORD, never from a flag. The queue must exist
 * ({@code accumulo-export queue init}): its stored configuration gives the bucket count ({@code
 * --buckets}, when given, must agree) and the serializers: key_serializer json, value_serializer json
 * or packed. Prints one JSON line:
 * {@code {"commits": ..., "conflicts_retried": ..., "unknown": ..., "relayed": ..., "seconds": ...}}.
 */
public final class RowTransactionExample {

  // the workload's own cells
  static final byte[] COUNT_FAMILY = bytes("c");
  static final byte[] COUNT_QUALIFIER = bytes("n");

  /** The shared packed test vectors (tests/vectors/packed.json, a resource of the harness jar). */
  static final String PACKED_VECTORS = "packed.json";

  private RowTransactionExample() {}

  // --- the workload's export value ----------------------------------------------------------------------

  /** The index cell of {@code word} at {@code count}, keys sorted: cf, cq, row, value. */
  static String indexCell(long count, String word) {
    return "{\"cf\":\"w\",\"cq\":" + Encoders.jsonString(word) + ",\"row\":"
        + Encoders.jsonString(String.format("%08d", count)) + ",\"value\":\"\"}";
  }

  /** The {@code difference} translator's export value: keys sorted, "new" before "old". */
  static String countUpdate(String word, long oldCount, long newCount) {
    String oldCells = oldCount > 0 ? indexCell(oldCount, word) : "";
    String newCells = newCount > 0 ? indexCell(newCount, word) : "";
    return "{\"new\":[" + newCells + "],\"old\":[" + oldCells + "]}";
  }

  /** The same update as {@link #countUpdate}, packed. */
  static byte[] packedCountUpdate(String word, long oldCount, long newCount) {
    return Encoders.packedDifference(indexCells(oldCount, word), indexCells(newCount, word));
  }

  /** The index cell of {@code word} at {@code count}; none for 0. */
  static List<TextCell> indexCells(long count, String word) {
    return count > 0 ? List.of(new TextCell(String.format("%08d", count), "w", word, "", ""))
        : List.of();
  }

  // --- checks ---------------------------------------------------------------------------------------------

  /**
   * Null when this JVM writes what the drain reads: the bucket hash agrees with the documented
   * check values (DESIGN.md, "Queue layout"), and the packed encoder writes every difference update
   * of text cells among the shared vectors byte for byte (the workload's count update is one).
   * Otherwise what disagrees.
   */
  static String checkTestVectors() throws IOException {
    if (!QueueLayout.checkTestVectors()) {
      return "this Guava's murmur3_32 disagrees with the test vectors";
    }
    JsonObject vectors;
    try (InputStream in = RowTransactionExample.class.getResourceAsStream(PACKED_VECTORS)) {
      if (in == null) {
        return "the packed test vectors (" + PACKED_VECTORS + ") are not on the classpath";
      }
      vectors = JsonParser.parseReader(new InputStreamReader(in, StandardCharsets.UTF_8))
          .getAsJsonObject();
    }
    Set<String> checked = new HashSet<>();
    for (JsonElement element : vectors.getAsJsonArray("vectors")) {
      JsonObject vector = element.getAsJsonObject();
      List<List<TextCell>> lists = differenceOfText(vector.get("canonical"));
      if (lists == null) {
        continue; // cells, operations or bytes: not what this example writes
      }
      String packed = HexFormat.of().formatHex(Encoders.packedDifference(lists.get(0), lists.get(1)));
      if (!packed.equals(vector.get("packed").getAsString())) {
        return "the packed encoder disagrees with the test vector '"
            + vector.get("name").getAsString() + "'";
      }
      checked.add(packed);
    }
    String countUpdate = HexFormat.of().formatHex(packedCountUpdate("w\u00f6", 9, 10));
    return checked.contains(countUpdate) ? null
        : "the packed test vectors lack the count update of \"w\u00f6\" from 9 to 10";
  }

  /** A vector's difference update of text cells as (old, new), else null. */
  static List<List<TextCell>> differenceOfText(JsonElement canonical) {
    if (!canonical.isJsonObject()) {
      return null;
    }
    List<List<TextCell>> out = new ArrayList<>();
    for (String side : List.of("old", "new")) {
      List<TextCell> cells = new ArrayList<>();
      for (JsonElement c : canonical.getAsJsonObject().getAsJsonArray(side)) {
        JsonObject cell = c.getAsJsonObject();
        String[] fields = new String[5];
        int i = 0;
        for (String name : List.of("row", "cf", "cq", "cv", "value")) {
          JsonElement f = cell.get(name);
          if (f != null && !(f.isJsonPrimitive() && f.getAsJsonPrimitive().isString())) {
            return null; // a field of bytes
          }
          fields[i++] = f == null ? "" : f.getAsString();
        }
        cells.add(new TextCell(fields[0], fields[1], fields[2], fields[3], fields[4]));
      }
      out.add(cells);
    }
    return out;
  }

  // --- the command --------------------------------------------------------------------------------------


  /** What --help prints. */
  static final String USAGE = String.join("\n",
      "usage: RowTransactionExample --instance NAME --zookeepers HOST:PORT --user USER --table T",
      "           --queue-table Q --qid ID [--buckets N] [--words 5] [--transactions 100] [--seed 0]",
      "           [--max-attempts 100] [--no-relay]",
      "       RowTransactionExample --check",
      "       RowTransactionExample --help | -h",
      "",
      "Commits row transactions (a word's counter and its export, in one conditional mutation) into",
      "table T, then relays each transaction's exports into the export queue ID in table Q.",
      "",
      "  --instance, --zookeepers, --user  the Accumulo instance and user; the password comes from",
      "                                    $ACCUMULO_PASSWORD, never from a flag",
      "  --table T          the producer table (created when missing)",
      "  --queue-table Q    the export queue's table, made by 'accumulo-export queue init'",
      "  --qid ID           the queue's id in it",
      "  --buckets N        the queue's bucket count; read from its stored configuration, and when",
      "                     given it must agree",
      "  --words N          transactions pick among N words w0..w<N-1> (default 5)",
      "  --transactions N   how many transactions to commit (default 100)",
      "  --seed N           seed of the word picks (default 0)",
      "  --max-attempts N   commits of one transaction before giving up on conflicts (default 100)",
      "  --no-relay         commit, but leave every outbox for a later relay",
      "  --check            only check the bucket hash and the packed encoding against test vectors",
      "",
      "Prints one JSON line: {\"commits\": ..., \"conflicts_retried\": ..., \"unknown\": ..., "
          + "\"relayed\": ..., \"seconds\": ...}.",
      "");

  public static void main(String[] argv) {
    try {
      System.exit(run(argv));
    } catch (IllegalArgumentException e) {
      System.err.println("row-transaction-example: " + e.getMessage());
      System.exit(2);
    } catch (Exception e) {
      System.err.println("row-transaction-example: failed: " + e);
      System.exit(1);
    }
  }

  static int run(String[] argv) throws Exception {
    if (Arrays.asList(argv).contains("--help") || Arrays.asList(argv).contains("-h")) {
      System.out.print(USAGE);
      return 0;
    }
    Args a;
    try {
      a = new Args(argv,
          Set.of("instance", "zookeepers", "user", "table", "queue-table", "qid", "buckets", "words",
              "transactions", "seed", "max-attempts"),
          Set.of("no-relay", "check"));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(e.getMessage() + " (--help prints the usage)");
    }
    String disagreement = checkTestVectors();
    if (disagreement != null) {
      System.err.println("row-transaction-example: " + disagreement
          + ": refusing to write rows no drain could read");
      return 1;
    }
    if (a.flag("check")) {
      System.out.println("{\"test_vectors\": \"ok\"}");
      return 0;
    }
    String table = a.require("table");
    String queueTable = a.require("queue-table");
    String qid = a.require("qid");
    int words = a.getInt("words", 5);
    int transactions = a.getInt("transactions", 100);
    int maxAttempts = a.getInt("max-attempts", 100);
    long seed = a.getLong("seed", 0);
    if (words < 1 || transactions < 0 || maxAttempts < 1) {
      throw new IllegalArgumentException("need --words >= 1, --transactions >= 0, --max-attempts >= 1");
    }
    String password = System.getenv("ACCUMULO_PASSWORD");
    if (password == null || password.isEmpty()) {
      throw new IllegalArgumentException("set ACCUMULO_PASSWORD (the password is never a flag)");
    }

    try (AccumuloClient client = Accumulo.newClient()
        .to(a.require("instance"), a.require("zookeepers")).as(a.require("user"), password)
        .build()) {
      StoredQueue stored = storedQueue(client, queueTable, qid,
          a.get("buckets", null) != null ? a.getInt("buckets", 0) : null);
      QueueLayout queue = new QueueLayout(qid, stored.numBuckets());
      boolean packed = stored.packed();
      try {
        client.tableOperations().create(table);
      } catch (TableExistsException e) {
        // another producer (or the operator) made it: fine
      }
      long started = System.nanoTime();
      try (RowTransactions txs = new RowTransactions(client, table, maxAttempts, !a.flag("no-relay"))) {
        txs.ensureOutboxLocalityGroup();
        Random rng = new Random(seed);
        for (int i = 0; i < transactions; i++) {
          String word = "w" + rng.nextInt(words);
          // the key "w1" serializes to the 4 bytes "w1" with quotes
          byte[] key = bytes(Encoders.jsonString(word));
          txs.run(word, tx -> {
            long old = Long.parseLong(str(tx.get(COUNT_FAMILY, COUNT_QUALIFIER, bytes("0"))));
            long updated = old + 1;
            tx.put(COUNT_FAMILY, COUNT_QUALIFIER, bytes(Long.toString(updated)));
            tx.export(queueTable, queue, key, packed ? packedCountUpdate(word, old, updated)
                : bytes(countUpdate(word, old, updated)));
          });
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        System.out.printf(Locale.ROOT, "{\"commits\": %d, \"conflicts_retried\": %d, \"unknown\": %d, "
            + "\"relayed\": %d, \"seconds\": %.3f}%n", txs.commits, txs.conflicts, txs.unknown,
            txs.relayed, seconds);
      }
    }
    return 0;
  }

  /** What the example takes from a queue's stored configuration. */
  record StoredQueue(int numBuckets, boolean packed) {}

  /**
   * The queue's bucket count and value encoding from its stored configuration ({@code <qid>#config
   * c:queue}, written by {@code accumulo-export queue init}); a producer with the wrong count writes
   * rows no drain finds, one with the wrong serializers values no drain reads.
   */
  static StoredQueue storedQueue(AccumuloClient client, String queueTable, String qid, Integer given)
      throws Exception {
    JsonObject stored = null;
    try (Scanner scanner = client.createScanner(queueTable, Authorizations.EMPTY)) {
      scanner.setRange(new Range(new Text(bytes(qid + "#config"))));
      scanner.fetchColumn(new Text(QueueLayout.CONFIG_FAMILY), new Text(QueueLayout.CONFIG_QUALIFIER));
      for (Map.Entry<Key,Value> e : scanner) {
        stored = JsonParser.parseString(str(e.getValue().get())).getAsJsonObject();
      }
    }
    if (stored == null) {
      throw new IllegalArgumentException("queue '" + qid + "' in table '" + queueTable
          + "' has no stored configuration: run 'accumulo-export queue init' first");
    }
    String keySerializer = serializer(stored, "key_serializer");
    String valueSerializer = serializer(stored, "value_serializer");
    if (!keySerializer.equals("json")) {
      throw new IllegalArgumentException("queue '" + qid + "' uses key_serializer '" + keySerializer
          + "'; this example writes key_serializer json only");
    }
    if (!valueSerializer.equals("json") && !valueSerializer.equals("packed")) {
      throw new IllegalArgumentException("queue '" + qid + "' uses value_serializer '"
          + valueSerializer + "'; this example writes value_serializer json or packed");
    }
    int buckets = stored.get("num_buckets").getAsInt();
    if (given != null && given != buckets) {
      throw new IllegalArgumentException("queue '" + qid + "' was initialised with " + buckets
          + " buckets, not " + given);
    }
    return new StoredQueue(buckets, valueSerializer.equals("packed"));
  }

  /** A serializer name of the stored configuration, trimmed as Python reads it ("json" when absent). */
  static String serializer(JsonObject stored, String field) {
    JsonElement name = stored.get(field);
    if (name == null) {
      return "json"; // QueueConfig's default
    }
    return name.isJsonPrimitive() ? name.getAsString().trim() : name.toString();
  }
}
