package exportconnector.gateway;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collection;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.accumulo.core.client.BatchWriterConfig;
import org.apache.accumulo.core.client.ConditionalWriterConfig;
import org.apache.accumulo.core.client.Durability;
import org.apache.accumulo.core.client.IteratorSetting;
import org.apache.accumulo.core.data.ByteSequence;
import org.apache.accumulo.core.data.Condition;
import org.apache.accumulo.core.data.ConditionalMutation;
import org.apache.accumulo.core.data.Key;
import org.apache.accumulo.core.data.Mutation;
import org.apache.accumulo.core.data.Range;
import org.apache.accumulo.core.data.Value;
import org.apache.accumulo.core.iterators.IteratorUtil;
import org.apache.accumulo.core.security.Authorizations;
import org.apache.accumulo.core.security.ColumnVisibility;
import org.apache.accumulo.proxy.thrift.ColumnUpdate;
import org.apache.accumulo.proxy.thrift.ConditionalUpdates;
import org.apache.accumulo.proxy.thrift.ConditionalWriterOptions;
import org.apache.accumulo.proxy.thrift.KeyValue;
import org.apache.accumulo.proxy.thrift.WriterOptions;
import org.apache.hadoop.io.Text;

/** Pure conversions between the Thrift structs of the IDL and Accumulo's Java types. */
final class Conversions {
  private static final byte[] EMPTY = new byte[0];
  /** The empty expression, shared: Mutation only reads its bytes. */
  static final ColumnVisibility NO_VISIBILITY = new ColumnVisibility();

  private Conversions() {}

  // ---- bytes ----

  /** The readable bytes of a Thrift binary; Thrift may hand out a view into its frame buffer. */
  static byte[] bytes(ByteBuffer b) {
    if (b == null) {
      return EMPTY;
    }
    ByteBuffer d = b.duplicate();
    byte[] out = new byte[d.remaining()];
    d.get(out);
    return out;
  }

  static Text text(ByteBuffer b) {
    return new Text(bytes(b));
  }

  /** null for an absent or empty row, which Accumulo reads as "unbounded". */
  static Text rowOrNull(ByteBuffer b) {
    return b == null || !b.hasRemaining() ? null : text(b);
  }

  /** Bytes for messages: printable ASCII as is, anything else as \xNN, cut after 60 characters. */
  static String printable(byte[] b) {
    StringBuilder sb = new StringBuilder("'");
    for (int i = 0; i < b.length; i++) {
      if (sb.length() > 60) {
        sb.append("...");
        break;
      }
      int c = b[i] & 0xff;
      if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
        sb.append((char) c);
      } else {
        sb.append(String.format("\\x%02x", c));
      }
    }
    return sb.append('\'').toString();
  }

  /** Parse errors come with the expression and a caret on further lines; keep messages one line. */
  static String firstLine(String s) {
    if (s == null) {
      return "";
    }
    int nl = s.indexOf('\n');
    return nl < 0 ? s : s.substring(0, nl);
  }

  // ---- writes ----

  /**
   * Converts a whole update call. Throws IllegalArgumentException naming the first bad cell, so
   * the caller can apply all of the call's mutations or none. Rows with no updates are skipped.
   */
  static List<Mutation> toMutations(Map<ByteBuffer,List<ColumnUpdate>> cells) {
    List<Mutation> out = new ArrayList<>(cells == null ? 0 : cells.size());
    if (cells == null) {
      return out;
    }
    for (Map.Entry<ByteBuffer,List<ColumnUpdate>> e : cells.entrySet()) {
      byte[] row = bytes(e.getKey());
      List<ColumnUpdate> updates = e.getValue();
      if (updates == null || updates.isEmpty()) {
        continue; // Accumulo refuses empty mutations; there is nothing to write anyway
      }
      // sized for its updates up front: growing the buffer copied it over and over (measured)
      Mutation m = new Mutation(row, 0, row.length, estimatedBytes(updates));
      for (ColumnUpdate u : updates) {
        addUpdate(m, row, u);
      }
      out.add(m);
    }
    return out;
  }

  /** About the bytes a mutation's serialized updates take (lengths and fields plus a little per update). */
  private static int estimatedBytes(List<ColumnUpdate> updates) {
    long n = 0;
    for (ColumnUpdate u : updates) {
      if (u != null) {
        n += 24 + remaining(u.colFamily) + remaining(u.colQualifier) + remaining(u.colVisibility)
            + remaining(u.value);
      }
    }
    return (int) Math.min(n, 1 << 20);
  }

  private static int remaining(ByteBuffer b) {
    return b == null ? 0 : b.remaining();
  }

  private static void addUpdate(Mutation m, byte[] row, ColumnUpdate u) {
    if (u == null) {
      throw new IllegalArgumentException("row " + printable(row) + ": null column update");
    }
    if (u.colFamily == null || u.colQualifier == null) {
      throw new IllegalArgumentException("row " + printable(row) + ": column update without "
          + (u.colFamily == null ? "a column family" : "a column qualifier"));
    }
    byte[] cf = bytes(u.colFamily);
    byte[] cq = bytes(u.colQualifier);
    ColumnVisibility cv = visibility(u.colVisibility, row, cf, cq);
    if (u.isSetDeleteCell() && u.isDeleteCell()) {
      if (u.isSetTimestamp()) {
        m.putDelete(cf, cq, cv, u.getTimestamp());
      } else {
        m.putDelete(cf, cq, cv);
      }
    } else {
      byte[] value = bytes(u.value);
      if (u.isSetTimestamp()) {
        m.put(cf, cq, cv, u.getTimestamp(), value);
      } else {
        m.put(cf, cq, cv, value);
      }
    }
  }

  private static ColumnVisibility visibility(ByteBuffer cv, byte[] row, byte[] cf, byte[] cq) {
    if (cv == null || !cv.hasRemaining()) {
      return NO_VISIBILITY;
    }
    byte[] expr = bytes(cv);
    try {
      return new ColumnVisibility(expr); // parses, so a bad expression fails here, not on a server
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("row " + printable(row) + " column " + printable(cf) + ":"
          + printable(cq) + ": bad visibility " + printable(expr) + ": " + firstLine(e.getMessage()),
          e);
    }
  }

  static List<ConditionalMutation> toConditionalMutations(Map<ByteBuffer,ConditionalUpdates> updates) {
    List<ConditionalMutation> out = new ArrayList<>(updates == null ? 0 : updates.size());
    if (updates == null) {
      return out;
    }
    for (Map.Entry<ByteBuffer,ConditionalUpdates> e : updates.entrySet()) {
      byte[] row = bytes(e.getKey());
      ConditionalUpdates cu = e.getValue();
      if (cu == null || cu.conditions == null || cu.conditions.isEmpty()) {
        throw new IllegalArgumentException("row " + printable(row) + ": no conditions");
      }
      ConditionalMutation cm = new ConditionalMutation(row);
      for (org.apache.accumulo.proxy.thrift.Condition c : cu.conditions) {
        cm.addCondition(toCondition(row, c));
      }
      if (cu.updates != null) {
        for (ColumnUpdate u : cu.updates) {
          addUpdate(cm, row, u);
        }
      }
      out.add(cm);
    }
    return out;
  }

  private static Condition toCondition(byte[] row, org.apache.accumulo.proxy.thrift.Condition c) {
    if (c == null || c.column == null || c.column.colFamily == null || c.column.colQualifier == null) {
      throw new IllegalArgumentException("row " + printable(row) + ": condition without a column");
    }
    byte[] cf = bytes(c.column.colFamily);
    byte[] cq = bytes(c.column.colQualifier);
    Condition out = new Condition(cf, cq);
    if (c.column.colVisibility != null && c.column.colVisibility.hasRemaining()) {
      out.setVisibility(visibility(c.column.colVisibility, row, cf, cq));
    }
    if (c.isSetTimestamp()) {
      out.setTimestamp(c.getTimestamp());
    }
    if (c.value != null) {
      out.setValue(bytes(c.value));
    }
    if (c.iterators != null && !c.iterators.isEmpty()) {
      out.setIterators(iterators(c.iterators).toArray(new IteratorSetting[0]));
    }
    return out;
  }

  // ---- writer options ----

  /** 0 or unset means "Accumulo's default" for every field. */
  static BatchWriterConfig writerConfig(WriterOptions o) {
    BatchWriterConfig c = new BatchWriterConfig();
    if (o == null) {
      return c;
    }
    if (o.getMaxMemory() > 0) {
      c.setMaxMemory(o.getMaxMemory());
    }
    if (o.getLatencyMs() > 0) {
      c.setMaxLatency(o.getLatencyMs(), TimeUnit.MILLISECONDS);
    }
    if (o.getTimeoutMs() > 0) {
      c.setTimeout(o.getTimeoutMs(), TimeUnit.MILLISECONDS);
    }
    if (o.getThreads() > 0) {
      c.setMaxWriteThreads(o.getThreads());
    }
    if (o.isSetDurability() && o.getDurability() != null) {
      c.setDurability(durability(o.getDurability()));
    }
    return c;
  }

  /**
   * Unset authorizations mean none, as in Accumulo's ConditionalWriterConfig and upstream's proxy
   * (scans differ: there unset means the user's own, on both servers).
   */
  static ConditionalWriterConfig conditionalWriterConfig(ConditionalWriterOptions o) {
    ConditionalWriterConfig c = new ConditionalWriterConfig();
    if (o == null) {
      return c;
    }
    if (o.isSetTimeoutMs() && o.getTimeoutMs() > 0) {
      c.setTimeout(o.getTimeoutMs(), TimeUnit.MILLISECONDS);
    }
    if (o.isSetThreads() && o.getThreads() > 0) {
      c.setMaxWriteThreads(o.getThreads());
    }
    if (o.isSetAuthorizations() && o.authorizations != null) {
      c.setAuthorizations(authorizations(o.authorizations));
    }
    if (o.isSetDurability() && o.getDurability() != null) {
      c.setDurability(durability(o.getDurability()));
    }
    return c;
  }

  static Durability durability(org.apache.accumulo.proxy.thrift.Durability d) {
    return switch (d) {
      case DEFAULT -> Durability.DEFAULT;
      case NONE -> Durability.NONE;
      case LOG -> Durability.LOG;
      case FLUSH -> Durability.FLUSH;
      case SYNC -> Durability.SYNC;
    };
  }

  // ---- reads ----

  static Authorizations authorizations(Collection<ByteBuffer> auths) {
    List<byte[]> list = new ArrayList<>(auths.size());
    for (ByteBuffer b : auths) {
      list.add(bytes(b));
    }
    return new Authorizations(list);
  }

  /** As upstream's proxy: absent parts of a Key are empty, an absent timestamp is the latest. */
  static Key toKey(org.apache.accumulo.proxy.thrift.Key k) {
    long ts = k.isSetTimestamp() ? k.getTimestamp() : Long.MAX_VALUE;
    return new Key(bytes(k.row), bytes(k.colFamily), bytes(k.colQualifier), bytes(k.colVisibility), ts);
  }

  static Range toRange(org.apache.accumulo.proxy.thrift.Range r) {
    if (r == null) {
      return new Range();
    }
    return new Range(r.start == null ? null : toKey(r.start), r.startInclusive,
        r.stop == null ? null : toKey(r.stop), r.stopInclusive);
  }

  static List<Range> toRanges(List<org.apache.accumulo.proxy.thrift.Range> ranges) {
    List<Range> out = new ArrayList<>();
    if (ranges != null) {
      for (org.apache.accumulo.proxy.thrift.Range r : ranges) {
        out.add(toRange(r));
      }
    }
    if (out.isEmpty()) {
      out.add(new Range()); // a batch scanner needs at least one range; none means "everything"
    }
    return out;
  }

  static List<IteratorSetting> iterators(List<org.apache.accumulo.proxy.thrift.IteratorSetting> its) {
    List<IteratorSetting> out = new ArrayList<>();
    if (its != null) {
      for (org.apache.accumulo.proxy.thrift.IteratorSetting it : its) {
        out.add(iterator(it));
      }
    }
    return out;
  }

  static IteratorSetting iterator(org.apache.accumulo.proxy.thrift.IteratorSetting it) {
    if (it == null || it.name == null || it.iteratorClass == null) {
      throw new IllegalArgumentException("iterator setting needs a name and a class");
    }
    IteratorSetting s = new IteratorSetting(it.priority, it.name, it.iteratorClass);
    if (it.properties != null) {
      s.addOptions(it.properties);
    }
    return s;
  }

  static EnumSet<IteratorUtil.IteratorScope> scopes(Set<org.apache.accumulo.proxy.thrift.IteratorScope> s) {
    if (s == null || s.isEmpty()) {
      return EnumSet.allOf(IteratorUtil.IteratorScope.class);
    }
    EnumSet<IteratorUtil.IteratorScope> out = EnumSet.noneOf(IteratorUtil.IteratorScope.class);
    for (org.apache.accumulo.proxy.thrift.IteratorScope x : s) {
      out.add(switch (x) {
        case MINC -> IteratorUtil.IteratorScope.minc;
        case MAJC -> IteratorUtil.IteratorScope.majc;
        case SCAN -> IteratorUtil.IteratorScope.scan;
      });
    }
    return out;
  }

  /** A scanned entry for the wire, timestamp included. Fields are set directly to skip copies. */
  static KeyValue toThrift(Key k, Value v) {
    org.apache.accumulo.proxy.thrift.Key tk = new org.apache.accumulo.proxy.thrift.Key();
    // views, not copies: a scanner hands out a fresh Key per entry, nothing writes to its arrays
    tk.row = view(k.getRowData());
    tk.colFamily = view(k.getColumnFamilyData());
    tk.colQualifier = view(k.getColumnQualifierData());
    tk.colVisibility = view(k.getColumnVisibilityData());
    tk.setTimestamp(k.getTimestamp());
    KeyValue kv = new KeyValue();
    kv.key = tk;
    kv.value = ByteBuffer.wrap(v.get());
    return kv;
  }

  private static ByteBuffer view(ByteSequence b) {
    return b.isBackedByArray() ? ByteBuffer.wrap(b.getBackingArray(), b.offset(), b.length())
        : ByteBuffer.wrap(b.toArray());
  }
}
