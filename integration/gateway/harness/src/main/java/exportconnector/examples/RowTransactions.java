package exportconnector.examples;

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
import java.util.Map;
import java.util.Random;
import java.util.Set;

import org.apache.accumulo.core.client.AccumuloClient;
import org.apache.accumulo.core.client.BatchWriter;
import org.apache.accumulo.core.client.BatchWriterConfig;
import org.apache.accumulo.core.client.ConditionalWriter;
import org.apache.accumulo.core.client.ConditionalWriterConfig;
import org.apache.accumulo.core.client.Scanner;
import org.apache.accumulo.core.data.Condition;
import org.apache.accumulo.core.data.ConditionalMutation;
import org.apache.accumulo.core.data.Key;
import org.apache.accumulo.core.data.Mutation;
import org.apache.accumulo.core.data.Range;
import org.apache.accumulo.core.data.Value;
import org.apache.accumulo.core.security.Authorizations;
import org.apache.hadoop.io.Text;

/**
 * Row transactions with Accumulo's own {@link ConditionalWriter}: the row's own cells and the
 * exports they cause commit together in one conditional mutation, and a relay then copies the
 * exports into an export queue that {@code accumulo-export drain} replays on cluster B. This class
 * follows the protocol written down in {@code connector/transactions/layout.py} (the spec; this is
 * one implementation of it, the Python {@code connector.transactions} is another):
 *
 * <pre>
 * a row of the producer's table
 *   !tx:v                         version, "&lt;seq&gt; &lt;token&gt;", ts = seq: the condition of every commit
 *   !txo:e:&lt;queue table&gt;:&lt;entry row&gt;  outbox: one export, value = serialized export value, ts = seq
 *   c:n                           the row's own cells (in the example: a counter), ts = seq
 * the export queue's table ({@link QueueLayout})
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
 * <p>Runs row transactions on one table and relays their outboxes; not thread-safe.
 */
final class RowTransactions implements AutoCloseable {

  // --- the protocol's names (defaults of connector.transactions.layout.TxLayout) ---------------------

  static final byte[] VERSION_FAMILY = bytes("!tx");
  static final byte[] VERSION_QUALIFIER = bytes("v");
  static final byte[] OUTBOX_FAMILY = bytes("!txo");
  /** The outbox family's locality group, so a relay's scan for leftovers reads only its files. */
  static final String OUTBOX_GROUP = "txoutbox";
  /** Recorded in the queue's config row: how this table keeps versions and outboxes. */
  static final String SOURCE_RECORD = "{\"outbox\":\"!txo\",\"version\":[\"!tx\",\"v\"]}";

  private static final SecureRandom TOKENS = new SecureRandom();

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
      int first = QueueLayout.indexOf(q, (byte) ':', 0);
      int second = first < 0 ? -1 : QueueLayout.indexOf(q, (byte) ':', first + 1);
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
        entry.put(QueueLayout.ENTRY_FAMILY, QueueLayout.ENTRY_QUALIFIER, cell.value());
        queueWriter(target).addMutation(entry);
        byte[] markRow = QueueLayout.markRowOf(rest);
        if (markRow != null) {
          marks.computeIfAbsent(target, t -> new LinkedHashMap<>()).put(str(markRow), markRow);
        }
      } else {
        // a combine queue update <update id>:<key row>, at the outbox cell's own timestamp
        int colon = QueueLayout.indexOf(rest, (byte) ':', 0);
        if (colon <= 0) {
          System.err.println("row-transaction-example: malformed outbox cell left in place: " + str(q));
          continue;
        }
        Mutation update = new Mutation(Arrays.copyOfRange(rest, colon + 1, rest.length));
        update.put(QueueLayout.UPDATE_FAMILY, Arrays.copyOfRange(rest, 0, colon), cell.ts(), cell.value());
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
        mark.put(QueueLayout.MARK_FAMILY, QueueLayout.MARK_QUALIFIER, bytes(token(16)));
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
    m.put(QueueLayout.SOURCES_FAMILY, bytes(table), bytes(SOURCE_RECORD));
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
}
