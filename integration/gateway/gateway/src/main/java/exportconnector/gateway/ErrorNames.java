package exportconnector.gateway;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Map;
import java.util.TreeMap;

import org.apache.accumulo.proxy.thrift.AccumuloSecurityException;
import org.apache.accumulo.proxy.thrift.TableNotFoundException;
import org.apache.thrift.TException;

/**
 * The names errors carry across the gateway where the IDL has no exception for them: the message of
 * a {@code TApplicationException} (a call that declares no exception, a scan timeout, a failed scan)
 * or the text of a writer's rejection starts with one of these and {@link #SEPARATOR}. The only
 * place in the gateway that spells them; every message of that kind is built by {@link #message}.
 *
 * <p>The Python client matches the same names, spelt once there too: {@code
 * connector/accumulo/error_names.py}. {@code tests/test_error_names.py} runs {@link #main}, which
 * prints this list, and checks that the two are equal.
 */
public final class ErrorNames {
  /** No tablet server served a scan, or took a writer's writes, within the caller's timeout. */
  public static final String TIMED_OUT = "TimedOutException";
  /** Accumulo's servers failed a scan (an iterator that cannot load, say): not a permission problem. */
  public static final String SERVER = "AccumuloServerException";
  /** The IDL's AccumuloSecurityException, sent on a call that declares none (a wrong shared secret). */
  public static final String SECURITY = "AccumuloSecurityException";
  /** The IDL's TableNotFoundException, sent on a call that declares none. */
  public static final String TABLE_NOT_FOUND = "TableNotFoundException";
  /**
   * No staging directory of that bulk id under this gateway's gateway.bulk.dir (deleted, never made,
   * or made by a gateway with another gateway.bulk.dir); sent in an AccumuloException.
   */
  public static final String BULK_IMPORT_NOT_FOUND = "BulkImportNotFoundException";
  /** Between the name and the rest of the message. */
  public static final String SEPARATOR = ": ";

  private ErrorNames() {}

  /** {@code name}: {@code text}, the form the client recognises. */
  static String message(String name, String text) {
    return name + SEPARATOR + text;
  }

  /**
   * An exception of the IDL sent on a call that does not declare it: named by its type, with the
   * constants above for the types the client tells apart (others fall to its generic error).
   */
  static String undeclared(TException te) {
    String name;
    if (te instanceof AccumuloSecurityException) {
      name = SECURITY;
    } else if (te instanceof TableNotFoundException) {
      name = TABLE_NOT_FOUND;
    } else {
      name = te.getClass().getSimpleName();
    }
    return message(name, Errors.messageOf(te));
  }

  /** Every constant above, by its name (read by reflection, so a new one cannot be left out). */
  public static Map<String,String> all() {
    Map<String,String> m = new TreeMap<>();
    for (Field f : ErrorNames.class.getFields()) {
      int mod = f.getModifiers();
      if (Modifier.isStatic(mod) && Modifier.isFinal(mod) && f.getType() == String.class) {
        try {
          m.put(f.getName(), (String) f.get(null));
        } catch (IllegalAccessException e) {
          throw new IllegalStateException(e);
        }
      }
    }
    return m;
  }

  /** Prints {@link #all} as one JSON object (for the test that compares it with the Python list). */
  public static void main(String[] args) {
    System.out.println(Json.write(all()));
  }
}
