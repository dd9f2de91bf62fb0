package exportconnector.gateway;

import java.util.List;
import java.util.Map;

/**
 * Writes the few JSON lines this module prints (READY lines, benchmark results) in the same
 * layout as Python's json.dumps: ", " between items and ": " after keys.
 */
public final class Json {
  private Json() {}

  /** Renders String, Number, Boolean, null, Map (insertion order kept) and List values. */
  public static String write(Object value) {
    StringBuilder sb = new StringBuilder();
    append(sb, value);
    return sb.toString();
  }

  private static void append(StringBuilder sb, Object value) {
    if (value == null) {
      sb.append("null");
    } else if (value instanceof String s) {
      quote(sb, s);
    } else if (value instanceof Double || value instanceof Float) {
      double d = ((Number) value).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        throw new IllegalArgumentException("JSON has no " + d);
      }
      sb.append(d);
    } else if (value instanceof Number || value instanceof Boolean) {
      sb.append(value);
    } else if (value instanceof Map<?,?> map) {
      sb.append('{');
      String sep = "";
      for (Map.Entry<?,?> e : map.entrySet()) {
        sb.append(sep);
        quote(sb, String.valueOf(e.getKey()));
        sb.append(": ");
        append(sb, e.getValue());
        sep = ", ";
      }
      sb.append('}');
    } else if (value instanceof List<?> list) {
      sb.append('[');
      String sep = "";
      for (Object o : list) {
        sb.append(sep);
        append(sb, o);
        sep = ", ";
      }
      sb.append(']');
    } else {
      throw new IllegalArgumentException("cannot write " + value.getClass() + " as JSON");
    }
  }

  private static void quote(StringBuilder sb, String s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        case '\b' -> sb.append("\\b");
        case '\f' -> sb.append("\\f");
        default -> {
          // control characters and the JS line separators must be escaped; everything else is UTF-8 text
          if (c < 0x20 || c == '\u2028' || c == '\u2029') {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    sb.append('"');
  }
}
