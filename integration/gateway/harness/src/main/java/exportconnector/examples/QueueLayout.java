package exportconnector.examples;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import com.google.common.hash.Hashing;

/**
 * The rows of the export queue {@code qid} with {@code numBuckets} buckets ({@code
 * connector/queue/layout.py}; DESIGN.md, "Queue layout"): what a producer must get byte for byte
 * right, or it writes rows no drain finds.
 */
final class QueueLayout {

  static final byte[] ENTRY_FAMILY = bytes("e");
  static final byte[] ENTRY_QUALIFIER = bytes("v");
  static final byte[] MARK_FAMILY = bytes("m");
  static final byte[] MARK_QUALIFIER = bytes("t");
  static final byte[] SOURCES_FAMILY = bytes("x");
  /** A combine queue's update cells (an outbox's {@code u:} cells are relayed to these). */
  static final byte[] UPDATE_FAMILY = bytes("u");
  static final byte[] CONFIG_FAMILY = bytes("c");
  static final byte[] CONFIG_QUALIFIER = bytes("queue");

  final String qid;
  final int numBuckets;
  final int hexWidth;

  QueueLayout(String qid, int numBuckets) {
    if (qid.isEmpty() || qid.contains(":") || qid.contains("#")) {
      throw new IllegalArgumentException("queue id must be non-empty without ':' or '#': " + qid);
    }
    if (numBuckets < 1) {
      throw new IllegalArgumentException("the bucket count must be >= 1, got " + numBuckets);
    }
    this.qid = qid;
    this.numBuckets = numBuckets;
    // hex digits for the bit length of numBuckets: 5 or 15 -> 1, 16 -> 2, 1009 -> 3
    int bitLength = 32 - Integer.numberOfLeadingZeros(numBuckets);
    this.hexWidth = (bitLength + 3) / 4;
  }

  /** Guava's signed murmur3_32, seed 0 (murmur3_32_fixed: for bytes identical to murmur3_32). */
  static int murmur3(byte[] data) {
    return Hashing.murmur3_32_fixed().hashBytes(data).asInt();
  }

  /**
   * The bucket of a serialized key: abs(murmur3_32(key)) % numBuckets, with abs taken as a
   * mathematician would. In Java that is Math.abs(hash % n), as Fluo Recipes computes it:
   * Math.abs(hash) % n would be negative for hash = Integer.MIN_VALUE.
   */
  int bucketOf(byte[] keyBytes) {
    return Math.abs(murmur3(keyBytes) % numBuckets);
  }

  String bucketHex(int bucket) {
    StringBuilder hex = new StringBuilder(Integer.toHexString(bucket)); // lowercase
    while (hex.length() < hexWidth) {
      hex.insert(0, '0');
    }
    return hex.toString();
  }

  /** {@code <qid>:<bucketHex>:<key><seq as 8 bytes, big-endian>}. */
  byte[] entryRow(byte[] keyBytes, long seq) {
    byte[] prefix = bytes(qid + ":" + bucketHex(bucketOf(keyBytes)) + ":");
    return ByteBuffer.allocate(prefix.length + keyBytes.length + Long.BYTES).put(prefix)
        .put(keyBytes).putLong(seq).array();
  }

  byte[] configRow() {
    return bytes(qid + "#config");
  }

  /** {@code <qid>#mark:<bucketHex>} for the entry row {@code <qid>:<bucketHex>:...}, else null. */
  static byte[] markRowOf(byte[] entryRow) {
    int first = indexOf(entryRow, (byte) ':', 0);
    int second = first < 0 ? -1 : indexOf(entryRow, (byte) ':', first + 1);
    if (first <= 0 || second <= first + 1) {
      return null;
    }
    String hex = new String(entryRow, first + 1, second - first - 1, StandardCharsets.UTF_8);
    if (!hex.chars().allMatch(c -> (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return null;
    }
    return bytes(new String(entryRow, 0, first, StandardCharsets.UTF_8) + "#mark:" + hex);
  }

  static int indexOf(byte[] data, byte b, int from) {
    for (int i = from; i < data.length; i++) {
      if (data[i] == b) {
        return i;
      }
    }
    return -1;
  }

  /**
   * The documented check values (DESIGN.md, "Queue layout"); false if this JVM's Guava disagrees.
   */
  static boolean checkTestVectors() {
    QueueLayout thirteen = new QueueLayout("q", 13);
    return murmur3(bytes("a")) == 1009084850
        && murmur3(bytes("0001")) == -195267438
        && thirteen.bucketOf(bytes("0001")) == 2
        && new QueueLayout("q", 1009).bucketOf(bytes("0001")) == 713
        && murmur3(bytes("k1")) == -37330902 && thirteen.bucketOf(bytes("k1")) == 11
        && new QueueLayout("q", 5).hexWidth == 1 && new QueueLayout("q", 15).hexWidth == 1
        && new QueueLayout("q", 16).hexWidth == 2 && new QueueLayout("q", 1009).hexWidth == 3;
  }

  static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
