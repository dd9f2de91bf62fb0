package exportconnector.examples;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The value encodings a queue may be made with ({@code queue init --value-serializer}), for what
 * this example exports: keys and values must be exactly the bytes a Python producer would write (a
 * key's bytes choose its bucket and are part of its entry row).
 *
 * <ul>
 *   <li>{@code json}: sorted keys, no spaces, UTF-8 (Python: {@code json.dumps(obj,
 *       sort_keys=True, separators=(",", ":"), ensure_ascii=False)}): {@link #jsonString}.
 *   <li>{@code packed} ({@code connector/packed.py}, whose docstring has the layout): {@link
 *       #packedDifference}, checked against the test vectors of {@code tests/vectors/packed.json}.
 * </ul>
 */
final class Encoders {

  /** A cell of text fields; an empty {@code cv} is no visibility. */
  record TextCell(String row, String cf, String cq, String cv, String value) {}

  // the packed layout's constants (connector/_native/src/packed.rs; the vectors check them)
  static final int[] PACKED_MAGIC = {0xFF, 0x01};
  static final int DIFFERENCE = 0x01;
  static final int HAS_CV = 0x01;
  static final int HAS_VALUE = 0x02;
  static final int TEXT = 0x04;

  private Encoders() {}

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

  /**
   * A difference update {@code {"old": ..., "new": ...}} in the {@code packed} encoding, byte for
   * byte what Python's {@code connector.packed.pack} writes for text cells with a value: 0xFF 0x01,
   * shape 0x01 (difference), then old and new, each a varint count and its cells; a cell is its
   * flags (HAS_VALUE | TEXT, and HAS_CV when it has a visibility), then row, cf, cq, the cv if any
   * and the value, each a varint length and its UTF-8 bytes. Rows must not be empty.
   */
  static byte[] packedDifference(List<TextCell> oldCells, List<TextCell> newCells) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int b : PACKED_MAGIC) {
      out.write(b);
    }
    out.write(DIFFERENCE);
    for (List<TextCell> cells : List.of(oldCells, newCells)) {
      varint(out, cells.size());
      for (TextCell cell : cells) {
        if (cell.row().isEmpty()) {
          throw new IllegalArgumentException("a packed cell needs a row");
        }
        boolean hasCv = !cell.cv().isEmpty();
        out.write(HAS_VALUE | TEXT | (hasCv ? HAS_CV : 0));
        field(out, cell.row());
        field(out, cell.cf());
        field(out, cell.cq());
        if (hasCv) {
          field(out, cell.cv());
        }
        field(out, cell.value());
      }
    }
    return out.toByteArray();
  }

  private static void field(ByteArrayOutputStream out, String text) {
    byte[] data = text.getBytes(StandardCharsets.UTF_8);
    varint(out, data.length);
    out.writeBytes(data);
  }

  /** {@code n} (>= 0) as an unsigned LEB128 varint: 7 bits a byte, low first, 0x80 = more follow. */
  static void varint(ByteArrayOutputStream out, int n) {
    while (n > 0x7F) {
      out.write((n & 0x7F) | 0x80);
      n >>>= 7;
    }
    out.write(n);
  }
}
