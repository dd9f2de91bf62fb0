package exportconnector.gateway;

import java.util.List;
import java.util.Map;

import org.apache.accumulo.core.data.ByteSequence;
import org.apache.accumulo.core.data.Key;
import org.apache.accumulo.core.data.Value;
import org.apache.thrift.transport.TTransport;
import org.apache.thrift.transport.TTransportException;

/**
 * Writes a {@code nextK} reply's result struct (its {@code success} field, a ScanResult) in Thrift
 * compact protocol bytes straight from the scanner's Keys and Values: the same bytes as the
 * generated code writes, without a KeyValue, Key and five ByteBuffers per entry.
 */
final class NextKEncoder {
  // compact protocol bytes
  private static final byte STRUCT = 0x0C;
  private static final byte FIELD1_LIST = 0x19; // results(1): list
  private static final byte FIELD1_STRUCT = 0x1C; // key(1): struct
  private static final byte DELTA1_BINARY = 0x18; // the next field, binary
  private static final byte DELTA1_I64 = 0x16; // timestamp(5) after colVisibility(4)
  private static final byte MORE_TRUE = 0x11; // more(2) = true
  private static final byte MORE_FALSE = 0x12;
  private static final byte STOP = 0;
  /** Scratch buffers past this size are not kept for the thread's next page. */
  private static final int KEEP_BYTES = 8 << 20;
  private static final ThreadLocal<byte[]> SCRATCH = ThreadLocal.withInitial(() -> new byte[64 << 10]);

  private byte[] buf;
  private int pos;

  private NextKEncoder(byte[] buf) {
    this.buf = buf;
  }

  /** Writes {@code nextK_result{success: page}} (the reply message's body) to the transport. */
  static void write(ScannerSession.Page page, TTransport out) throws TTransportException {
    NextKEncoder e = new NextKEncoder(SCRATCH.get());
    e.encode(page);
    out.write(e.buf, 0, e.pos);
    SCRATCH.set(e.buf.length <= KEEP_BYTES ? e.buf : new byte[64 << 10]);
  }

  private void encode(ScannerSession.Page page) {
    List<Map.Entry<Key,Value>> entries = page.entries();
    int n = entries.size();
    ensure(32);
    // success(0): a field id that is not above the last one (0) takes the long form: type, zigzag id
    buf[pos++] = STRUCT;
    buf[pos++] = 0;
    buf[pos++] = FIELD1_LIST;
    if (n < 15) {
      buf[pos++] = (byte) ((n << 4) | STRUCT);
    } else {
      buf[pos++] = (byte) (0xF0 | STRUCT);
      varint(n);
    }
    for (int i = 0; i < n; i++) {
      Map.Entry<Key,Value> entry = entries.get(i);
      entry(entry.getKey(), entry.getValue());
    }
    ensure(3);
    buf[pos++] = page.more() ? MORE_TRUE : MORE_FALSE;
    buf[pos++] = STOP; // ScanResult
    buf[pos++] = STOP; // nextK_result
  }

  private void entry(Key k, Value v) {
    ByteSequence row = k.getRowData();
    ByteSequence cf = k.getColumnFamilyData();
    ByteSequence cq = k.getColumnQualifierData();
    ByteSequence cv = k.getColumnVisibilityData();
    byte[] value = v.get();
    // field headers and stops (9), five lengths (5 each), the timestamp (10)
    ensure(9 + 25 + 10 + row.length() + cf.length() + cq.length() + cv.length() + value.length);
    buf[pos++] = FIELD1_STRUCT;
    binary(row);
    binary(cf);
    binary(cq);
    binary(cv);
    buf[pos++] = DELTA1_I64;
    long ts = k.getTimestamp();
    varint((ts << 1) ^ (ts >> 63));
    buf[pos++] = STOP; // Key
    buf[pos++] = DELTA1_BINARY; // value(2)
    varint(value.length);
    System.arraycopy(value, 0, buf, pos, value.length);
    pos += value.length;
    buf[pos++] = STOP; // KeyValue
  }

  private void binary(ByteSequence b) {
    buf[pos++] = DELTA1_BINARY;
    int len = b.length();
    varint(len);
    if (b.isBackedByArray()) {
      System.arraycopy(b.getBackingArray(), b.offset(), buf, pos, len);
    } else {
      System.arraycopy(b.toArray(), 0, buf, pos, len);
    }
    pos += len;
  }

  private void varint(long n) {
    while ((n & ~0x7FL) != 0) {
      buf[pos++] = (byte) ((n & 0x7F) | 0x80);
      n >>>= 7;
    }
    buf[pos++] = (byte) n;
  }

  private void ensure(long more) {
    long need = pos + more;
    if (need > buf.length) {
      if (need > Integer.MAX_VALUE - 8) {
        throw new IllegalStateException("a nextK page of more than 2 GiB");
      }
      byte[] grown = new byte[(int) Math.min(Integer.MAX_VALUE - 8, Math.max(need, 2L * buf.length))];
      System.arraycopy(buf, 0, grown, 0, pos);
      buf = grown;
    }
  }
}
