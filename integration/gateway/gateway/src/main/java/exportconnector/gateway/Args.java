package exportconnector.gateway;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/** A tiny "--name value" / "--flag" parser; unknown names are errors so typos fail loudly. */
public final class Args {
  private final Map<String,String> values = new HashMap<>();

  /**
   * @param withValue names that take a value
   * @param flags names that take none
   */
  public Args(String[] argv, Set<String> withValue, Set<String> flags) {
    for (int i = 0; i < argv.length; i++) {
      String a = argv[i];
      String name = a.startsWith("--") ? a.substring(2) : null;
      String inline = null;
      if (name != null && name.contains("=")) {
        inline = name.substring(name.indexOf('=') + 1);
        name = name.substring(0, name.indexOf('='));
      }
      if (name != null && flags.contains(name) && inline == null) {
        values.put(name, "true");
      } else if (name != null && withValue.contains(name)) {
        if (inline == null) {
          if (i + 1 >= argv.length) {
            throw new IllegalArgumentException("--" + name + " needs a value");
          }
          inline = argv[++i];
        }
        values.put(name, inline);
      } else {
        throw new IllegalArgumentException("unknown argument: " + a);
      }
    }
  }

  public String get(String name, String fallback) {
    return values.getOrDefault(name, fallback);
  }

  public String require(String name) {
    String v = values.get(name);
    if (v == null || v.isEmpty()) {
      throw new IllegalArgumentException("--" + name + " is required");
    }
    return v;
  }

  public long getLong(String name, long fallback) {
    String v = values.get(name);
    if (v == null) {
      return fallback;
    }
    try {
      return Long.parseLong(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--" + name + " must be an integer, got '" + v + "'");
    }
  }

  public int getInt(String name, int fallback) {
    long v = getLong(name, fallback);
    if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("--" + name + " is out of range");
    }
    return (int) v;
  }

  public boolean flag(String name) {
    return values.containsKey(name);
  }
}
