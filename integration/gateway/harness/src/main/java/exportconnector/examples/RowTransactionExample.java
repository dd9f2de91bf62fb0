package exportconnector.examples;

import exportconnector.gateway.Args;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import org.apache.accumulo.core.client.Accumulo;
import org.apache.accumulo.core.client.AccumuloClient;
import org.apache.accumulo.core.client.BatchWriter;
import org.apache.accumulo.core.client.BatchWriterConfig;
import org.apache.accumulo.core.client.ConditionalWriter;
import org.apache.accumulo.core.client.ConditionalWriterConfig;
import org.apache.accumulo.core.client.Scanner;
import org.apache.accumulo.core.client.TableExistsException;
import org.apache.accumulo.core.data.Condition;
import org.apache.accumulo.core.data.ConditionalMutation;
import org.apache.accumulo.core.data.Key;
import org.apache.accumulo.core.data.Mutation;
import org.apache.accumulo.core.data.Range;
import org.apache.accumulo.core.data.Value;
import org.apache.accumulo.core.security.Authorizations;
import org.apache.hadoop.io.Text;

import com.google.common.hash.Hashing;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

/**
 * A Java producer that commits <em>row transactions</em> with Accumulo's own {@link ConditionalWriter}:
 * the row's own cells and the exports they cause commit together in one conditional mutation, and a
 * relay then copies the exports into an export queue that {@code accumulo-export drain} replays on
 * cluster B. It follows the protocol written down in {@code connector/transactions/layout.py} (the
 * spec; this file is one implementation of it, the Python {@code connector.transactions} is another):
 *
 * <pre>
 * a row of the producer's table
 *   !tx:v                         version, "&lt;seq&gt; &lt;token&gt;", ts = seq: the condition of every commit
 *   !txo:e:&lt;queue table&gt;:&lt;entry row&gt;  outbox: one export, value = serialized export value, ts = seq
 *   c:n                           the row's own cells (here: a counter), ts = seq
 * the export queue's table
 *   &lt;qid&gt;#config  x:&lt;producer table&gt;  {"outbox":"!txo","version":["!tx","v"]}: where outboxes are
 *   &lt;qid&gt;:&lt;bucketHex&gt;:&lt;key&gt;&lt;seq, 8 bytes&gt;  e:v = serialized value (the relay writes it)
 *   &lt;qid&gt;#mark:&lt;bucketHex&gt;  m:t = a fresh token (the relay sets it: "this bucket has entries")
 * </pre>
 *
 * <p>One transaction: (1) read the row, version cell first (it sorts first, so a commit landing while
 * we read changes the version after we read it, and our condition fails); (2) seq = max(wall-clock
 * µs, previous seq + 1), so a row's seqs rise strictly and its exports replay on B in commit order;
 * (3) commit ONE conditional mutation: condition "the version still holds what we read" (or "is
 * absent"), the row's cells at ts = seq, the new version "&lt;seq&gt; &lt;token&gt;" and one outbox cell per
 * export, all at ts = seq. REJECTED: someone else committed first, so read again and redo the work
 * (bounded). UNKNOWN: the server may or may not have applied it (Accumulo guarantees it will not
 * apply later), so read the version back to find out; never blindly commit again. (4) Relay: write
 * each export into the queue, flush, set the bucket's mark, flush, then delete the outbox cell at
 * its own timestamp; outbox cells an earlier, crashed producer left in the row go along. A
 * producer that dies before (4) leaves the outbox; the row's next commit, a streaming drain or
 * {@code accumulo-export tx relay} relays it later. Relaying twice is harmless: the entry row holds
 * key and seq, so a repeat rewrites the same entry.
 *
 * <p>The workload is the project's inverted count index: each transaction increments the counter
 * {@code c:n} (ASCII decimal) of one word's row and exports key = the word, value = {@code {"new":
 * [cell], "old": [cell]}} for the {@code difference} translator, where a cell is the index cell
 * (row = count as %08d, family "w", qualifier = word) of the old and the new count ({@code old} is
 * empty when the old count was 0). See {@code examples/inverted_count_index.py}. The value is that
 * JSON, or the same update in the {@code packed} encoding ({@code connector/packed.py}) when the
 * queue was made with {@code --value-serializer packed}: see {@link #packedDifference}.
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

  // --- the protocol's names (defaults of connector.transactions.layout.TxLayout) ---------------------

  static final byte[] VERSION_FAMILY = bytes("!tx");
  static final byte[] VERSION_QUALIFIER = bytes("v");
  static final byte[] OUTBOX_FAMILY = bytes("!txo");
  /** The outbox family's locality group, so a relay's scan for leftovers reads only its files. */
  static final String OUTBOX_GROUP = "txoutbox";
  /** Recorded in the queue's config row: how this table keeps versions and outboxes. */
  static final String SOURCE_RECORD = "{\"outbox\":\"!txo\",\"version\":[\"!tx\",\"v\"]}";

  // --- the export queue's row layout (connector/queue/layout.py) --------------------------------------

  static final byte[] ENTRY_FAMILY = bytes("e");
  static final byte[] ENTRY_QUALIFIER = bytes("v");
  static final byte[] MARK_FAMILY = bytes("m");
  static final byte[] MARK_QUALIFIER = bytes("t");
  static final byte[] SOURCES_FAMILY = bytes("x");
  /** A combine queue's update cells (an outbox's {@code u:} cells are relayed to these). */
  static final byte[] UPDATE_FAMILY = bytes("u");
  static final byte[] CONFIG_FAMILY = bytes("c");
  static final byte[] CONFIG_QUALIFIER = bytes("queue");

  // --- the workload's own cells ------------------------------------------------------------------------

  static final byte[] COUNT_FAMILY = bytes("c");
  static final byte[] COUNT_QUALIFIER = bytes("n");

  private static final SecureRandom TOKENS = new SecureRandom();

  private RowTransactionExample() {}

  // =====================================================================================================
  // The export queue: buckets and rows
  // =====================================================================================================

  /** Rows of the export queue {@code qid} with {@code numBuckets} buckets. */
  static final class QueueLayout {
    final String qid;
    final int numBuckets;
    final int hexWidth;

    QueueLayout(String qid, int numBuckets) {
      if (qid.isEmpty() || qid.contains(":") || qid.contains("#")) {
        throw new IllegalArgumentException("queue id must be non-empty without ':' or '#': " + qid);
      }
      if (numBuckets < 1) {
        throw new IllegalArgumentException("the bucket count must be >= 1, got " + numBuckets);
      }
      this.qid = qid;
      this.numBuckets = numBuckets;
      // hex digits for the bit length of numBuckets: 5 or 15 -> 1, 16 -> 2, 1009 -> 3
      int bitLength = 32 - Integer.numberOfLeadingZeros(numBuckets);
      this.hexWidth = (bitLength + 3) / 4;
    }

    /** Guava's signed murmur3_32, seed 0 (murmur3_32_fixed: for bytes identical to murmur3_32). */
    static int murmur3(byte[] data) {
      return Hashing.murmur3_32_fixed().hashBytes(data).asInt();
    }

    /**
     * The bucket of a serialized key: abs(murmur3_32(key)) % numBuckets, with abs taken as a
     * mathematician would. In Java that is Math.abs(hash % n), as Fluo Recipes computes it:
     * Math.abs(hash) % n would be negative for hash = Integer.MIN_VALUE.
     */
    int bucketOf(byte[] keyBytes) {
      return Math.abs(murmur3(keyBytes) % numBuckets);
    }

    String bucketHex(int bucket) {
      StringBuilder hex = new StringBuilder(Integer.toHexString(bucket)); // lowercase
      while (hex.length() < hexWidth) {
        hex.insert(0, '0');
      }
      return hex.toString();
    }

    /** {@code <qid>:<bucketHex>:<key><seq as 8 bytes, big-endian>}. */
    byte[] entryRow(byte[] keyBytes, long seq) {
      byte[] prefix = bytes(qid + ":" + bucketHex(bucketOf(keyBytes)) + ":");
      return ByteBuffer.allocate(prefix.length + keyBytes.length + Long.BYTES).put(prefix)
          .put(keyBytes).putLong(seq).array();
    }

    byte[] markRow(int bucket) {
      return bytes(qid + "#mark:" + bucketHex(bucket));
    }

    byte[] configRow() {
      return bytes(qid + "#config");
    }
  }

  /**
   * The documented test vectors (DESIGN.md, "Queue layout"); false if this JVM's Guava disagrees. Also
   * the packed encoding: PACKED_VECTOR is Python's {@code pack(count_update("wö", 9, 10))} (the
   * inverted count index's update of the word "wö" from 9 to 10), and 300 is the varint AC 02.
   */
  static boolean checkTestVectors() {
    QueueLayout thirteen = new QueueLayout("q", 13);
    ByteArrayOutputStream varint = new ByteArrayOutputStream();
    varint(varint, 300);
    return Arrays.equals(packedCountUpdate("w\u00f6", 9, 10), hex(PACKED_VECTOR))
        && Arrays.equals(varint.toByteArray(), new byte[] {(byte) 0xAC, 0x02})
        && QueueLayout.murmur3(bytes("a")) == 1009084850
        && QueueLayout.murmur3(bytes("0001")) == -195267438
        && thirteen.bucketOf(bytes("0001")) == 2
        && new QueueLayout("q", 1009).bucketOf(bytes("0001")) == 713
        && QueueLayout.murmur3(bytes("k1")) == -37330902 && thirteen.bucketOf(bytes("k1")) == 11
        && new QueueLayout("q", 5).hexWidth == 1 && new QueueLayout("q", 15).hexWidth == 1
        && new QueueLayout("q", 16).hexWidth == 2 && new QueueLayout("q", 1009).hexWidth == 3;
  }

  // =====================================================================================================
  // The "json" serializer: sorted keys, no spaces, UTF-8 (Python: json.dumps(obj, sort_keys=True,
  // separators=(",", ":"), ensure_ascii=False)). Keys and values must serialize to exactly the bytes
  // a Python producer would write: the key's bytes choose the bucket and are part of the entry row.
  // =====================================================================================================

  /** A JSON string literal, escaped as Python's json.dumps(ensure_ascii=False) escapes it. */
  static String jsonString(String s) {
    StringBuilder out = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': out.append("\\\""); break;
        case '\\': out.append("\\\\"); break;
        case '\n': out.append("\\n"); break;
        case '\r': out.append("\\r"); break;
        case '\t': out.append("\\t"); break;
        case '\b': out.append("\\b"); break;
        case '\f': out.append("\\f"); break;
        default:
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    return out.append('"').toString();
  }

  /** The index cell of {@code word} at {@code count}, keys sorted: cf, cq, row, value. */
  static String indexCell(long count, String word) {
    return "{\"cf\":\"w\",\"cq\":" + jsonString(word) + ",\"row\":"
        + jsonString(String.format("%08d", count)) + ",\"value\":\"\"}";
  }

  /** The {@code difference} translator's export value: keys sorted, "new" before "old". */
  static String countUpdate(String word, long oldCount, long newCount) {
    String oldCells = oldCount > 0 ? indexCell(oldCount, word) : "";
    String newCells = newCount > 0 ? indexCell(newCount, word) : "";
    return "{\"new\":[" + newCells + "],\"old\":[" + oldCells + "]}";
  }

  // =====================================================================================================
  // The "packed" serializer (connector/packed.py, whose docstring has the layout): the same update
  // without field names, byte for byte what Python's connector.packed.pack writes.
  // =====================================================================================================

  /** Python's {@code pack(count_update("wö", 9, 10))}, in hex: the packed test vector. */
  static final String PACKED_VECTOR = "ff0101010608303030303030303901770377c3b600"
      + "010608303030303030313001770377c3b600";

  /** The same update as {@link #countUpdate}, packed. */
  static byte[] packedCountUpdate(String word, long oldCount, long newCount) {
    return packedDifference(indexCells(oldCount, word), indexCells(newCount, word));
  }

  /** The index cell of {@code word} at {@code count} as {row, cf, cq, value}; none for 0. */
  static List<String[]> indexCells(long count, String word) {
    String[] cell = {String.format("%08d", count), "w", word, ""};
    return count > 0 ? List.<String[]>of(cell) : List.of();
  }

  /**
   * A difference update {@code {"old": ..., "new": ...}} in the {@code packed} encoding of {@code
   * connector/packed.py} ({@code pack}), for cells {row, cf, cq, value} of text with a value and no
   * visibility: 0xFF 0x01, shape 0x01 (difference), then old and new, each a varint count and its
   * cells; a cell is its flags 0x06 (HAS_VALUE | TEXT), then row, cf, cq and value, each a varint
   * length and its UTF-8 bytes. Varints are unsigned LEB128. Rows must not be empty.
   */
  static byte[] packedDifference(List<String[]> oldCells, List<String[]> newCells) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.writeBytes(new byte[] {(byte) 0xFF, 0x01, 0x01});
    for (List<String[]> cells : List.of(oldCells, newCells)) {
      varint(out, cells.size());
      for (String[] cell : cells) {
        out.write(0x06);
        for (String field : cell) {
          byte[] data = bytes(field);
          varint(out, data.length);
          out.writeBytes(data);
        }
      }
    }
    return out.toByteArray();
  }

  /** {@code n} (>= 0) as an unsigned LEB128 varint: 7 bits a byte, low first, 0x80 = more follow. */
  static void varint(ByteArrayOutputStream out, int n) {
    while (n > 0x7F) {
      out.write((n & 0x7F) | 0x80);
      n >>>= 7;
    }
    out.write(n);
  }

  static byte[] hex(String hex) {
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  // =====================================================================================================
  // Row transactions
  // =====================================================================================================

  /** One export a transaction causes: into the queue {@code layout} of table {@code queueTable}. */
  record Export(String queueTable, QueueLayout layout, byte[] key, byte[] value) {}

  /** What a transaction's function sees and buffers; it may run more than once (after a conflict). */
  static final class Tx {
    final long seq;
    private final Map<String,byte[]> read;
    final List<byte[][]> puts = new ArrayList<>(); // {family, qualifier, value}
    final List<Export> exports = new ArrayList<>();

    Tx(long seq, Map<String,byte[]> read) {
      this.seq = seq;
      this.read = read;
    }

    /** The value of a cell of the row as read at the transaction's start, or {@code fallback}. */
    byte[] get(byte[] family, byte[] qualifier, byte[] fallback) {
      return read.getOrDefault(cellName(family, qualifier), fallback);
    }

    /** Buffers a cell of the row; written at ts = seq if the transaction commits. */
    void put(byte[] family, byte[] qualifier, byte[] value) {
      // unsigned, as Accumulo sorts keys
      if (Arrays.compareUnsigned(family, VERSION_FAMILY) <= 0
          || Arrays.equals(family, OUTBOX_FAMILY)) {
        // the version must be the first cell a read sees, and the reserved families are not ours
        throw new IllegalArgumentException("family " + str(family) + " must sort after "
            + str(VERSION_FAMILY) + " and not be " + str(OUTBOX_FAMILY));
      }
      puts.add(new byte[][] {family, qualifier, value});
    }

    /** Buffers an export (serialized key and value) into the outbox. */
    void export(String queueTable, QueueLayout layout, byte[] key, byte[] value) {
      exports.add(new Export(queueTable, layout, key, value));
    }
  }

  interface TxFunction {
    void apply(Tx tx);
  }

  /**
   * One outbox cell: the qualifier names where it goes ({@code e:<queue table>:<entry row>} or
   * {@code u:<combine table>:<update id>:<key row>}), the timestamp is its commit's seq.
   */
  record OutboxCell(byte[] qualifier, byte[] value, long ts) {}

  /**
   * The row as read: its version cell's value (null: none), its own cells, and the outbox cells a
   * producer that died before relaying left in it (the next commit on the row relays them too).
   */
  record RowRead(byte[] version, Map<String,byte[]> cells, List<OutboxCell> leftovers) {}

  /** Thrown when a row's transaction kept losing to other commits for {@code maxAttempts} tries. */
  static final class TransactionConflictException extends RuntimeException {
    TransactionConflictException(String table, String row, int attempts) {
      super("transaction on row '" + row + "' of table '" + table + "' lost to concurrent commits "
          + attempts + " times in a row");
    }
  }

  /** Runs row transactions on one table and relays their outboxes; not thread-safe. */
  static final class RowTransactions implements AutoCloseable {
    final AccumuloClient client;
    final String table;
    final int maxAttempts;
    final boolean relay;
    private final ConditionalWriter conditionalWriter;
    private final BatchWriter ownRows;
    private final Map<String,BatchWriter> queueWriters = new HashMap<>();
    private final Set<String> recorded = new HashSet<>();
    private final Random backoff = new Random();
    long commits;
    long conflicts;
    long unknown;
    long relayed;

    RowTransactions(AccumuloClient client, String table, int maxAttempts, boolean relay)
        throws Exception {
      this.client = client;
      this.table = table;
      this.maxAttempts = maxAttempts;
      this.relay = relay;
      this.conditionalWriter = client.createConditionalWriter(table, new ConditionalWriterConfig());
      this.ownRows = client.createBatchWriter(table, new BatchWriterConfig());
    }

    /** Commits {@code fn}'s changes to {@code row} (re-running it after a conflict), then relays. */
    long run(String row, TxFunction fn) throws Exception {
      byte[] rowBytes = bytes(row);
      for (int attempt = 1; attempt <= maxAttempts; attempt++) {
        RowRead read = readRow(rowBytes);
        long previous = parseVersion(read.version());
        long seq = Math.max(nowMicros(), previous + 1);
        Tx tx = new Tx(seq, read.cells());
        fn.apply(tx);
        if (tx.puts.isEmpty() && tx.exports.isEmpty()) {
          return previous; // nothing buffered: nothing to commit, no new version
        }
        for (Export e : tx.exports) {
          recordSource(e); // before the first commit into a queue, so a crash's outbox is findable
        }
        byte[] version = bytes(seq + " " + token(8));
        ConditionalMutation m = commitMutation(rowBytes, read.version(), seq, version, tx);
        ConditionalWriter.Status status = conditionalWriter.write(m).getStatus();
        if (status == ConditionalWriter.Status.UNKNOWN) {
          unknown++;
          status = applied(rowBytes, seq, version, tx) ? ConditionalWriter.Status.ACCEPTED
              : ConditionalWriter.Status.REJECTED;
        }
        switch (status) {
          case ACCEPTED:
            commits++;
            if (relay) {
              List<OutboxCell> cells = outboxCells(tx);
              cells.addAll(read.leftovers()); // older seqs than ours: never one of our own cells
              relay(rowBytes, cells);
            }
            return seq;
          case REJECTED:
            conflicts++; // another commit won: read again and redo the work, after a short pause
            Thread.sleep(backoff.nextInt(Math.min(attempt, 20) + 1));
            break;
          default: // VIOLATED (a constraint) or INVISIBLE_VISIBILITY: retrying will not help
            throw new IllegalStateException("commit to row '" + row + "' of '" + table + "': " + status);
        }
      }
      throw new TransactionConflictException(table, row, maxAttempts);
    }

    /** Reads the row in key order: the version cell (family "!tx" sorts first), then the rest. */
    RowRead readRow(byte[] row) throws Exception {
      byte[] version = null;
      Map<String,byte[]> cells = new HashMap<>();
      List<OutboxCell> leftovers = new ArrayList<>();
      try (Scanner scanner = client.createScanner(table, Authorizations.EMPTY)) {
        scanner.setRange(new Range(new Text(row)));
        for (Map.Entry<Key,Value> e : scanner) {
          byte[] family = e.getKey().getColumnFamilyData().toArray();
          byte[] qualifier = e.getKey().getColumnQualifierData().toArray();
          if (Arrays.equals(family, VERSION_FAMILY) && Arrays.equals(qualifier, VERSION_QUALIFIER)) {
            version = e.getValue().get();
          } else if (Arrays.equals(family, OUTBOX_FAMILY)) {
            leftovers.add(new OutboxCell(qualifier, e.getValue().get(), e.getKey().getTimestamp()));
          } else {
            cells.put(cellName(family, qualifier), e.getValue().get());
          }
        }
      }
      return new RowRead(version, cells, leftovers);
    }

    /** The one conditional mutation of a commit: condition, row cells, new version, outbox. */
    ConditionalMutation commitMutation(byte[] row, byte[] readVersion, long seq, byte[] version,
        Tx tx) {
      Condition condition = new Condition(VERSION_FAMILY, VERSION_QUALIFIER);
      if (readVersion != null) {
        condition.setValue(readVersion); // no value set: the condition is "the cell is absent"
      }
      ConditionalMutation m = new ConditionalMutation(row, condition);
      for (byte[][] cell : tx.puts) {
        m.put(cell[0], cell[1], seq, cell[2]);
      }
      m.put(VERSION_FAMILY, VERSION_QUALIFIER, seq, version);
      for (OutboxCell cell : outboxCells(tx)) {
        m.put(OUTBOX_FAMILY, cell.qualifier(), cell.ts(), cell.value());
      }
      return m;
    }

    /**
     * After an UNKNOWN status: did our commit apply? Yes if the version holds our "seq token". If a
     * later commit already replaced it, our outbox cell (ts = seq) still tells, unless a relay took
     * it meanwhile: the later commit relays the row's leftovers at once, so then this answers "no"
     * and the work is done again. That case needs UNKNOWN (a tablet server lost mid-write) and a
     * commit by another producer on the same row before we re-read; the protocol's version cell
     * keeps no history that could settle it (the Python producer has the same limit).
     */
    boolean applied(byte[] row, long seq, byte[] version, Tx tx) throws Exception {
      if (Arrays.equals(readRow(row).version(), version)) {
        return true;
      }
      if (tx.exports.isEmpty()) {
        return false;
      }
      byte[] qualifier = outboxCells(tx).get(0).qualifier();
      try (Scanner scanner = client.createScanner(table, Authorizations.EMPTY)) {
        scanner.setRange(new Range(new Text(row)));
        scanner.fetchColumn(new Text(OUTBOX_FAMILY), new Text(qualifier));
        for (Map.Entry<Key,Value> e : scanner) {
          if (e.getKey().getTimestamp() == seq) {
            return true;
          }
        }
      }
      return false;
    }

    /**
     * Copies outbox cells into their queues, then marks the export queues' buckets, then deletes the
     * cells, each at its own timestamp (a newer cell of the same name would survive). Each step is
     * flushed before the next, so a crash at any point loses nothing; a repeat writes the same again.
     */
    void relay(byte[] row, List<OutboxCell> cells) throws Exception {
      Map<String,Map<String,byte[]>> marks = new LinkedHashMap<>(); // queue table -> mark rows
      Mutation done = new Mutation(row);
      int copied = 0;
      for (OutboxCell cell : cells) {
        // qualifier: <kind>:<table>:<rest>; table names hold no ':', the rest is any bytes
        byte[] q = cell.qualifier();
        int first = indexOf(q, (byte) ':', 0);
        int second = first < 0 ? -1 : indexOf(q, (byte) ':', first + 1);
        String kind = first < 0 ? "" : str(Arrays.copyOfRange(q, 0, first));
        if (second <= first + 1 || !(kind.equals("e") || kind.equals("u"))) {
          System.err.println("row-transaction-example: malformed outbox cell left in place: " + str(q));
          continue;
        }
        String target = str(Arrays.copyOfRange(q, first + 1, second));
        byte[] rest = Arrays.copyOfRange(q, second + 1, q.length);
        if (kind.equals("e")) {
          // an export queue entry; no timestamp: the drain deletes it at the one the server gives
          Mutation entry = new Mutation(rest);
          entry.put(ENTRY_FAMILY, ENTRY_QUALIFIER, cell.value());
          queueWriter(target).addMutation(entry);
          byte[] markRow = markRowOf(rest);
          if (markRow != null) {
            marks.computeIfAbsent(target, t -> new LinkedHashMap<>()).put(str(markRow), markRow);
          }
        } else {
          // a combine queue update <update id>:<key row>, at the outbox cell's own timestamp
          int colon = indexOf(rest, (byte) ':', 0);
          if (colon <= 0) {
            System.err.println("row-transaction-example: malformed outbox cell left in place: " + str(q));
            continue;
          }
          Mutation update = new Mutation(Arrays.copyOfRange(rest, colon + 1, rest.length));
          update.put(UPDATE_FAMILY, Arrays.copyOfRange(rest, 0, colon), cell.ts(), cell.value());
          queueWriter(target).addMutation(update);
        }
        done.putDelete(OUTBOX_FAMILY, q, cell.ts());
        copied++;
      }
      if (copied == 0) {
        return;
      }
      for (BatchWriter w : queueWriters.values()) {
        w.flush(); // the copies are durable before any mark says so, and before the outbox goes
      }
      for (Map.Entry<String,Map<String,byte[]>> q : marks.entrySet()) {
        for (byte[] markRow : q.getValue().values()) {
          Mutation mark = new Mutation(markRow);
          mark.put(MARK_FAMILY, MARK_QUALIFIER, bytes(token(16)));
          queueWriter(q.getKey()).addMutation(mark);
        }
        queueWriter(q.getKey()).flush();
      }
      ownRows.addMutation(done);
      ownRows.flush();
      relayed += copied;
    }

    /** Records once per process, in the queue's config row, that this table's outboxes feed it. */
    void recordSource(Export e) throws Exception {
      String key = e.queueTable() + "\0" + e.layout().qid;
      if (recorded.contains(key)) {
        return;
      }
      Mutation m = new Mutation(e.layout().configRow());
      m.put(SOURCES_FAMILY, bytes(table), bytes(SOURCE_RECORD));
      queueWriter(e.queueTable()).addMutation(m);
      queueWriter(e.queueTable()).flush();
      recorded.add(key);
    }

    /** Puts the outbox family in a locality group of its own (once; keeps the table's others). */
    void ensureOutboxLocalityGroup() throws Exception {
      Map<String,Set<Text>> groups = new HashMap<>(client.tableOperations().getLocalityGroups(table));
      Text outbox = new Text(OUTBOX_FAMILY);
      if (groups.values().stream().noneMatch(families -> families.contains(outbox))) {
        groups.put(OUTBOX_GROUP, Set.of(outbox));
        client.tableOperations().setLocalityGroups(table, groups);
      }
    }

    private BatchWriter queueWriter(String queueTable) throws Exception {
      BatchWriter w = queueWriters.get(queueTable);
      if (w == null) {
        w = client.createBatchWriter(queueTable, new BatchWriterConfig());
        queueWriters.put(queueTable, w);
      }
      return w;
    }

    @Override
    public void close() throws Exception {
      conditionalWriter.close();
      ownRows.close();
      for (BatchWriter w : queueWriters.values()) {
        w.close();
      }
    }
  }

  /** A transaction's exports as outbox cells {@code e:<queue table>:<entry row>}, ts = seq. */
  static List<OutboxCell> outboxCells(Tx tx) {
    List<OutboxCell> cells = new ArrayList<>();
    for (Export e : tx.exports) {
      byte[] head = bytes("e:" + e.queueTable() + ":");
      byte[] entryRow = e.layout().entryRow(e.key(), tx.seq);
      byte[] qualifier =
          ByteBuffer.allocate(head.length + entryRow.length).put(head).put(entryRow).array();
      cells.add(new OutboxCell(qualifier, e.value(), tx.seq));
    }
    return cells;
  }

  /** {@code <qid>#mark:<bucketHex>} for the entry row {@code <qid>:<bucketHex>:...}, else null. */
  static byte[] markRowOf(byte[] entryRow) {
    int first = indexOf(entryRow, (byte) ':', 0);
    int second = first < 0 ? -1 : indexOf(entryRow, (byte) ':', first + 1);
    if (first <= 0 || second <= first + 1) {
      return null;
    }
    String hex = str(Arrays.copyOfRange(entryRow, first + 1, second));
    if (!hex.chars().allMatch(c -> (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return null;
    }
    return bytes(str(Arrays.copyOfRange(entryRow, 0, first)) + "#mark:" + hex);
  }

  static int indexOf(byte[] data, byte b, int from) {
    for (int i = from; i < data.length; i++) {
      if (data[i] == b) {
        return i;
      }
    }
    return -1;
  }

  /** The seq a version cell holds: its decimal digits up to the first space (0 for no cell). */
  static long parseVersion(byte[] version) {
    if (version == null) {
      return 0;
    }
    String text = new String(version, StandardCharsets.US_ASCII);
    int space = text.indexOf(' ');
    String digits = space < 0 ? text : text.substring(0, space);
    if (digits.isEmpty() || !digits.chars().allMatch(Character::isDigit)) {
      throw new IllegalStateException("version cell '" + text + "' does not start with a seq");
    }
    return Long.parseLong(digits);
  }

  /** Wall-clock microseconds (Instant.now() has µs resolution on Linux with Java 17). */
  static long nowMicros() {
    Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
  }

  /** {@code n} random bytes as lowercase hex. */
  static String token(int n) {
    byte[] b = new byte[n];
    TOKENS.nextBytes(b);
    StringBuilder hex = new StringBuilder(2 * n);
    for (byte x : b) {
      hex.append(String.format("%02x", x));
    }
    return hex.toString();
  }

  static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static String str(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }

  static String cellName(byte[] family, byte[] qualifier) {
    return str(family) + "\0" + str(qualifier);
  }

  // =====================================================================================================
  // The command
  // =====================================================================================================

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
    if (!checkTestVectors()) {
      System.err.println("row-transaction-example: this Guava's murmur3_32 or the packed encoder "
          + "disagrees with the test vectors: refusing to write rows no drain could read");
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
          byte[] key = bytes(jsonString(word)); // the key "w1" serializes to the 4 bytes "w1" with quotes
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
      scanner.fetchColumn(new Text(CONFIG_FAMILY), new Text(CONFIG_QUALIFIER));
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
