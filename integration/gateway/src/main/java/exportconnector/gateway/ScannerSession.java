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
  private Iterator<Map.Entry<Key,Value>> entries; // kept across calls: it holds the peeked entry

  ScannerSession(ScannerBase scanner) {
    this.scanner = scanner;
  }

  /** Up to k entries; {@code more} tells whether anything is left after them. */
  ScanResult next(int k) {
    if (entries == null) {
      entries = scanner.iterator();
    }
    List<KeyValue> page = new ArrayList<>(Math.max(0, Math.min(k, 4096)));
    while (page.size() < k && entries.hasNext()) {
      Map.Entry<Key,Value> e = entries.next();
      page.add(Conversions.toThrift(e.getKey(), e.getValue()));
    }
    return new ScanResult(page, entries.hasNext());
  }

  @Override
  void release() {
    scanner.close();
  }
}
