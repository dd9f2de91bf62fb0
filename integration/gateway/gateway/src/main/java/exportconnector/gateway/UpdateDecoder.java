package exportconnector.gateway;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.accumulo.core.data.Mutation;
import org.apache.accumulo.core.data.Value;
import org.apache.accumulo.core.security.ColumnVisibility;
import org.apache.hadoop.io.Text;

/**
 * Reads the arguments of a oneway {@code update(1:string writer, 2:map<binary, list<ColumnUpdate>>
 * cells)} call straight from the bytes of its frame (Thrift compact protocol) into Accumulo
 * Mutations: no ColumnUpdate, ByteBuffer or map entry per cell, and each family, qualifier and
 * value is copied once, into the Mutation.
 *
 * <p>It reads only the plain shape that clients send (the fields of the IDL, each with its type, in
 * any order). Anything else (an unknown field, a field of another type, a length past the frame's
 * end) makes {@link #decode} return null without having consumed anything, and the caller reads the
 * call with the generated code, which knows every shape and reports malformed input as before.
 */
final class UpdateDecoder {
  // compact protocol types
  private static final int BOOL_TRUE = 1;
  private static final int BOOL_FALSE = 2;
  private static final int I64 = 6;
  private static final int BINARY = 8;
  private static final int LIST = 9;
  private static final int MAP = 11;
  private static final int STRUCT = 12;
  private static final byte[] EMPTY = new byte[0];

  /** Not the plain shape: the generated code takes over. */
  private static final class NotPlain extends Exception {
    private static final long serialVersionUID = 1L;
    static final NotPlain INSTANCE = new NotPlain();

    private NotPlain() {
      super(null, null, false, false);
    }
  }

  /** One decoded update call. */
  static final class Decoded {
    String writer;
    final List<Mutation> mutations = new ArrayList<>();
    /** Map entries in the call, for messages. */
    int rows;
    /** The first cell that does not convert (as Conversions words it); then nothing is applied. */
    String error;
    /** Bytes of the frame that the arguments took. */
    int consumed;
  }

  private final byte[] buf;
  private final int end;
  private int pos;
  private final Decoded out = new Decoded();
  // the ColumnUpdate just read: offsets into buf, -1 for an absent field
  private int cf;
  private int cfLen;
  private int cq;
  private int cqLen;
  private int cv;
  private int cvLen;
  private int value;
  private int valueLen;
  private boolean hasTs;
  private long ts;
  private boolean delete;
  private final Text family = new Text();
  private final Text qualifier = new Text();
  private byte[] lastVisibility; // the expression of lastParsed, the last visibility seen
  private ColumnVisibility lastParsed;

  private UpdateDecoder(byte[] buf, int pos, int end) {
    this.buf = buf;
    this.pos = pos;
    this.end = end;
  }

  /**
   * The call's arguments from {@code buf[pos, pos + length)} (the rest of the frame after the
   * message header), or null when they are not in the plain shape.
   */
  static Decoded decode(byte[] buf, int pos, int length) {
    if (pos < 0 || length < 0 || pos + length > buf.length) {
      return null;
    }
    UpdateDecoder d = new UpdateDecoder(buf, pos, pos + length);
    try {
      d.args();
    } catch (NotPlain e) {
      return null;
    }
    d.out.consumed = d.pos - pos;
    return d.out;
  }

  private void args() throws NotPlain {
    int lastId = 0;
    while (true) {
      int header = readByte();
      if (header == 0) {
        return; // stop
      }
      int type = header & 0x0F;
      int id = fieldId(header, lastId);
      lastId = id;
      if (id == 1 && type == BINARY) {
        int len = readLength();
        out.writer = new String(buf, pos, len, StandardCharsets.UTF_8);
        pos += len;
      } else if (id == 2 && type == MAP) {
        cells();
      } else {
        throw NotPlain.INSTANCE;
      }
    }
  }

  private void cells() throws NotPlain {
    int n = readLength();
    if (n == 0) {
      return; // an empty map has no type byte
    }
    if (readByte() != ((BINARY << 4) | LIST)) {
      throw NotPlain.INSTANCE;
    }
    for (int i = 0; i < n; i++) {
      int rowLen = readLength();
      int row = pos;
      pos += rowLen;
      int header = readByte();
      if ((header & 0x0F) != STRUCT) {
        throw NotPlain.INSTANCE;
      }
      int count = header >>> 4;
      if (count == 15) {
        count = readLength();
      }
      out.rows++;
      // two passes over the row's updates: the first checks their shape and sizes the Mutation's
      // buffer (growing it copied it over and over, measured), the second fills it
      int first = pos;
      long bytes = 0;
      for (int c = 0; c < count; c++) {
        columnUpdate();
        bytes += 24 + Math.max(0, cfLen) + Math.max(0, cqLen) + Math.max(0, cvLen)
            + Math.max(0, valueLen);
      }
      if (out.error != null || count == 0) {
        continue; // nothing is applied after a bad cell; Accumulo refuses empty mutations
      }
      int after = pos;
      pos = first;
      Mutation m = new Mutation(buf, row, rowLen, (int) Math.min(bytes, 1 << 20));
      boolean ok = true;
      for (int c = 0; c < count && ok; c++) {
        columnUpdate();
        ok = put(m, row, rowLen);
      }
      pos = after;
      if (ok) {
        out.mutations.add(m);
      }
    }
  }

  /** Reads one ColumnUpdate into the fields above. */
  private void columnUpdate() throws NotPlain {
    cf = cq = cv = value = -1;
    cfLen = cqLen = cvLen = valueLen = -1;
    hasTs = false;
    delete = false;
    int lastId = 0;
    while (true) {
      int header = readByte();
      if (header == 0) {
        return;
      }
      int type = header & 0x0F;
      int id = fieldId(header, lastId);
      lastId = id;
      if (type == BINARY && id >= 1 && id <= 5 && id != 4) {
        int len = readLength();
        switch (id) {
          case 1 -> {
            cf = pos;
            cfLen = len;
          }
          case 2 -> {
            cq = pos;
            cqLen = len;
          }
          case 3 -> {
            cv = pos;
            cvLen = len;
          }
          default -> {
            value = pos;
            valueLen = len;
          }
        }
        pos += len;
      } else if (id == 4 && type == I64) {
        ts = zigzag(readVarint64());
        hasTs = true;
      } else if (id == 6 && (type == BOOL_TRUE || type == BOOL_FALSE)) {
        delete = type == BOOL_TRUE;
      } else {
        throw NotPlain.INSTANCE;
      }
    }
  }

  /** Adds the ColumnUpdate just read to m; false (and out.error set) if it does not convert. */
  private boolean put(Mutation m, int row, int rowLen) {
    if (cf < 0 || cq < 0) {
      out.error = "row " + printable(row, rowLen) + ": column update without "
          + (cf < 0 ? "a column family" : "a column qualifier");
      return false;
    }
    family.set(buf, cf, cfLen);
    qualifier.set(buf, cq, cqLen);
    ColumnVisibility vis = visibility(row, rowLen);
    if (vis == null) {
      return false;
    }
    if (delete) {
      if (hasTs) {
        m.putDelete(family, qualifier, vis, ts);
      } else {
        m.putDelete(family, qualifier, vis);
      }
    } else {
      // an absent value is an empty one, as in Conversions
      Value v = new Value(value < 0 ? EMPTY : Arrays.copyOfRange(buf, value, value + valueLen), false);
      if (hasTs) {
        m.put(family, qualifier, vis, ts, v);
      } else {
        m.put(family, qualifier, vis, v);
      }
    }
    return true;
  }

  /** The parsed visibility (the last one is reused: a batch mostly repeats one); null on error. */
  private ColumnVisibility visibility(int row, int rowLen) {
    int off = cv;
    int len = cvLen;
    if (off < 0 || len == 0) {
      return Conversions.NO_VISIBILITY;
    }
    if (lastVisibility != null && Arrays.equals(buf, off, off + len, lastVisibility, 0,
        lastVisibility.length)) {
      return lastParsed;
    }
    byte[] expr = Arrays.copyOfRange(buf, off, off + len);
    try {
      lastParsed = new ColumnVisibility(expr); // parses, so a bad expression fails here
      lastVisibility = expr;
      return lastParsed;
    } catch (RuntimeException e) {
      out.error = "row " + printable(row, rowLen) + " column " + printable(family) + ":"
          + printable(qualifier) + ": bad visibility " + Conversions.printable(expr) + ": "
          + Conversions.firstLine(e.getMessage());
      return null;
    }
  }

  private String printable(int off, int len) {
    return Conversions.printable(Arrays.copyOfRange(buf, off, off + len));
  }

  private static String printable(Text t) {
    return Conversions.printable(Arrays.copyOf(t.getBytes(), t.getLength()));
  }

  // ---- compact protocol primitives, bounded by the frame ----

  private int fieldId(int header, int lastId) throws NotPlain {
    int delta = header >>> 4;
    if (delta != 0) {
      return lastId + delta;
    }
    long id = zigzag(readVarint64()); // long form: a zigzag i16
    if (id < Short.MIN_VALUE || id > Short.MAX_VALUE) {
      throw NotPlain.INSTANCE;
    }
    return (int) id;
  }

  private int readByte() throws NotPlain {
    if (pos >= end) {
      throw NotPlain.INSTANCE;
    }
    return buf[pos++] & 0xFF;
  }

  /** A size or length: a varint that fits what is left of the frame. */
  private int readLength() throws NotPlain {
    long n = readVarint64();
    if (n < 0 || n > end - pos) {
      throw NotPlain.INSTANCE;
    }
    return (int) n;
  }

  private long readVarint64() throws NotPlain {
    long result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      int b = readByte();
      result |= (long) (b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        return result;
      }
    }
    throw NotPlain.INSTANCE;
  }

  private static long zigzag(long n) {
    return (n >>> 1) ^ -(n & 1);
  }
}
