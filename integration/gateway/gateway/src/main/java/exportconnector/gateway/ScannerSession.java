package exportconnector.gateway;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.accumulo.core.client.ScannerBase;
import org.apache.accumulo.core.data.Key;
import org.apache.accumulo.core.data.Value;
import org.apache.accumulo.proxy.thrift.KeyValue;
import org.apache.accumulo.proxy.thrift.ScanResult;

/** One client scan, read in pages by nextK. */
final class ScannerSession extends Session {
  private final ScannerBase scanner;
  private final String table;
  private final long timeoutMs; // 0: none
  private Iterator<Map.Entry<Key,Value>> entries; // kept across calls: it holds the peeked entry

  /**
   * The scan waited longer than its timeout for a tablet server. The message starts with
   * {@link ErrorNames#TIMED_OUT}, which the client maps to its timeout error.
   */
  static final class TimedOut extends Exception {
    private static final long serialVersionUID = 1L;

    TimedOut(String message, Throwable cause) {
      super(message, cause);
    }
  }

  ScannerSession(ScannerBase scanner, String table, long timeoutMs) {
    this.scanner = scanner;
    this.table = table;
    this.timeoutMs = timeoutMs;
  }

  /** A page of entries as the scanner handed them out, and whether anything is left after them. */
  record Page(List<Map.Entry<Key,Value>> entries, boolean more) {
    /** The page as the IDL's ScanResult (the generic path; {@link NextKEncoder} skips it). */
    ScanResult toThrift() {
      List<KeyValue> results = new ArrayList<>(entries.size());
      for (Map.Entry<Key,Value> e : entries) {
        results.add(Conversions.toThrift(e.getKey(), e.getValue()));
      }
      return new ScanResult(results, more);
    }
  }

  /** Up to k entries. */
  Page next(int k) throws TimedOut {
    try {
      if (entries == null) {
        entries = scanner.iterator();
      }
      List<Map.Entry<Key,Value>> page = new ArrayList<>(Math.max(0, Math.min(k, 4096)));
      while (page.size() < k && entries.hasNext()) {
        page.add(entries.next());
      }
      return new Page(page, entries.hasNext());
    } catch (RuntimeException e) {
      if (timeoutMs > 0 && Errors.isTimeout(e)) {
        throw new TimedOut(ErrorNames.message(ErrorNames.TIMED_OUT, "the scan of table " + table
            + " found no tablet server to serve it within its timeout of " + timeoutMs + " ms"), e);
      }
      throw e;
    }
  }

  @Override
  void release() {
    scanner.close();
  }
}
