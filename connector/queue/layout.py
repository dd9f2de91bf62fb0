"""The queue's row layout, in one place: which bucket a key goes to, and how rows are built and parsed.

Compatible with the Fluo Recipes export queue::

    entry row    <qid>:<bucketHex>:<serialized key><seq, 8 bytes big-endian>    column e:v, value = serialized value
    dead letter  <qid>#dead:<original row>                                      columns d:reason, d:value, d:ts
    requeued     <qid>#requeued:<original row>                                  column q:ms, value = when its dead
                                                                                letter was written (ms, this tablet's)
    config       <qid>#config                                                   column c:queue, value = JSON
    progress     <qid>#progress:<run id>:<task>                                 column p:stats, value = JSON
    mark         <qid>#mark:<bucketHex>                                         column m:t, value = a unique token
    bootstrap    <qid>#bootstrap:<destination>                                  a bootstrap's lease, plan and progress
    ack          <qid>#ack:<drain process>                                      column a:e, value = JSON: the
                                                                                registrations the process uses

Entry rows sort between the split points ``<qid>#`` and ``<qid>:~``; dead letters and the config row sort
between ``<qid>#`` and ``<qid>:``, so they never fall into a bucket's range. The config row holds what every
reader and writer of the queue must agree on (buckets, serializers), written once by ``init``. A drain's tasks
A bucket mark says "this bucket got entries": producers set it (a fresh token each time) after their entries
are durable, and a streaming drain plans from the marks (one row per bucket) instead of scanning the entries;
it clears a mark only if it still holds the token it planned with (see :mod:`connector.queue.marks`). Drain
tasks write their running counters to progress rows (with the deletes they flush anyway), so the driver can show
live progress wherever the tasks run; the driver removes its run's rows when the run ends.
"""

from __future__ import annotations

from typing import NamedTuple

import mmh3
import pyarrow as pa

from connector.accumulo import Range
from connector.export.core import MAX_SEQ

from .errors import MalformedEntryError, QueueConfigError
from .native_rows import parse_entry_rows

SEQ_BYTES = 8
ENTRY_FAMILY = b"e"
ENTRY_QUALIFIER = b"v"
DEAD_FAMILY = b"d"
DEAD_REASON = b"reason"
DEAD_VALUE = b"value"
DEAD_TS = b"ts"
CONFIG_FAMILY = b"c"
CONFIG_QUALIFIER = b"queue"
MARK_FAMILY = b"m"
MARK_QUALIFIER = b"t"
PROGRESS_FAMILY = b"p"
PROGRESS_QUALIFIER = b"stats"
_HEX_DIGITS = frozenset(b"0123456789abcdef")


def murmur3_32(data: bytes) -> int:
    """The signed 32-bit murmur3 hash (seed 0) of ``data``, as Guava's ``murmur3_32().hashBytes().asInt()``."""
    return int(mmh3.hash(data, 0, signed=True))


def bucket_of(key_bytes: bytes, num_buckets: int) -> int:
    """The bucket of a serialized key: ``abs(murmur3_32(key)) % num_buckets``."""
    # Python ints do not overflow, so abs(-2**31) is 2**31 and this equals Java's Math.abs(hash % n)
    return abs(murmur3_32(key_bytes)) % num_buckets


#: the most buckets a queue may have. A bucket is a unit of drain parallelism with a mark row, a status line and
#: a progress count of its own, planned in the driver: far more buckets than a cluster has cores buys nothing and
#: costs every plan and status scan. 65,536 (four hex digits) is 16 times the largest drain we know of.
MAX_BUCKETS = 65_536


def hex_width(num_buckets: int) -> int:
    """Hex digits of a bucket id: enough for the bit length of ``num_buckets`` (5 or 15 -> 1, 16 -> 2)."""
    return -(-num_buckets.bit_length() // 4)


class ParsedRow(NamedTuple):
    """An entry row taken apart."""

    bucket: int
    key_bytes: bytes
    seq: int


class QueueLayout:
    """Row layout of the queue ``qid`` with ``num_buckets`` buckets."""

    __slots__ = ("qid", "num_buckets", "hex_width", "_qid_bytes", "_entry_prefix", "_dead_prefix")

    def __init__(self, qid: str, num_buckets: int) -> None:
        if not isinstance(qid, str) or not qid:
            raise QueueConfigError("queue id must be a non-empty string")
        if ":" in qid or "#" in qid:
            # ':' ends the id in entry rows, '#' in dead-letter rows: "a#dead" would read queue a's dead letters
            raise QueueConfigError(f"queue id must not contain ':' or '#', got {qid!r}")
        if not isinstance(num_buckets, int) or isinstance(num_buckets, bool) or num_buckets < 1:
            raise QueueConfigError(f"num_buckets must be an int >= 1, got {num_buckets!r}")
        if num_buckets > MAX_BUCKETS:
            raise QueueConfigError(f"num_buckets must be at most {MAX_BUCKETS:,} (a bucket is a unit of drain "
                                   f"parallelism; more cost every plan and status scan), got {num_buckets:,}")
        self.qid = qid
        self.num_buckets = num_buckets
        self.hex_width = hex_width(num_buckets)
        self._qid_bytes = qid.encode("utf-8")
        self._entry_prefix = self._qid_bytes + b":"
        self._dead_prefix = self._qid_bytes + b"#dead:"

    def __repr__(self) -> str:
        return f"QueueLayout(qid={self.qid!r}, num_buckets={self.num_buckets})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueueLayout) and (self.qid, self.num_buckets) == (other.qid, other.num_buckets)

    def __hash__(self) -> int:
        return hash((self.qid, self.num_buckets))

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        return (QueueLayout, (self.qid, self.num_buckets))

    # --- buckets ------------------------------------------------------------------------------------

    def bucket_of(self, key_bytes: bytes) -> int:
        """The bucket that entries for this serialized key go to."""
        return bucket_of(key_bytes, self.num_buckets)

    def bucket_hex(self, bucket: int) -> str:
        """The bucket id as it appears in rows: lowercase hex, zero-padded to ``hex_width``."""
        self._check_bucket(bucket)
        return format(bucket, "x").zfill(self.hex_width)

    def bucket_row(self, bucket: int) -> bytes:
        """``<qid>:<bucketHex>``: sorts just before every entry of ``bucket`` (the form used as a split point)."""
        return self._entry_prefix + self.bucket_hex(bucket).encode("ascii")

    def bucket_prefix(self, bucket: int) -> bytes:
        """``<qid>:<bucketHex>:``, the prefix of every entry row of ``bucket``."""
        return self.bucket_row(bucket) + b":"

    def bucket_range(self, bucket: int) -> Range:
        """The range holding exactly the entries of ``bucket``."""
        return Range.prefix(self.bucket_prefix(bucket))

    def queue_range(self) -> Range:
        """The range holding every entry row of this queue (all buckets)."""
        return Range.prefix(self._entry_prefix)

    def outer_splits(self) -> tuple[bytes, bytes]:
        """The split points around the queue's tablets, ``<qid>#`` and ``<qid>:~``: a compaction or flush of
        the rows after the first, up to the second, touches no tablet of the table's other rows (only another
        queue's, one whose id extends this one's with a character from ``#`` to ``:``, as ``q1`` does ``q``)."""
        return self._qid_bytes + b"#", self._qid_bytes + b":~"

    def split_points(self, buckets_per_tablet: int) -> list[bytes]:
        """Table splits that give each run of ``buckets_per_tablet`` buckets its own tablet, and keep the
        queue apart from other data: ``<qid>#``, ``<qid>:~`` and the bucket rows of b, 2b, ... < num_buckets."""
        if not isinstance(buckets_per_tablet, int) or buckets_per_tablet < 1:
            raise QueueConfigError(f"buckets_per_tablet must be an int >= 1, got {buckets_per_tablet!r}")
        splits = list(self.outer_splits())
        splits += [self.bucket_row(b) for b in range(buckets_per_tablet, self.num_buckets, buckets_per_tablet)]
        return sorted(splits)

    # --- entry rows ---------------------------------------------------------------------------------

    def entry_row(self, key_bytes: bytes, seq: int) -> bytes:
        """The row of the entry for serialized key ``key_bytes`` at sequence number ``seq``."""
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= MAX_SEQ:
            raise ValueError(f"seq must be an int in [0, 2**63-1], got {seq!r}")
        key_bytes = bytes(key_bytes)
        return self.bucket_prefix(self.bucket_of(key_bytes)) + key_bytes + seq.to_bytes(SEQ_BYTES, "big")

    def parse_rows(self, rows: pa.Array) -> pa.RecordBatch:
        """Entry rows taken apart in one native pass: a batch (bucket int32, key binary, seq int64, error
        string). A malformed row has null bucket/key/seq and the reason :meth:`parse_row` gives in
        ``error``; the other rows are parsed all the same."""
        return parse_entry_rows(rows, self.qid, self.num_buckets)

    def parse_row(self, row: bytes) -> ParsedRow:
        """Take an entry row apart; raises ``MalformedEntryError`` with the reason when it is not one of
        this queue's entry rows (wrong prefix, short, bad bucket, bad sequence, key in the wrong bucket)."""
        parsed = self.parse_rows(pa.array([row], pa.binary())).to_pylist()[0]
        if parsed["error"] is not None:
            raise MalformedEntryError(row, parsed["error"])
        return ParsedRow(parsed["bucket"], parsed["key"], parsed["seq"])

    def bucket_range_of(self, row: bytes) -> int | None:
        """The bucket whose range holds ``row`` (even a malformed entry row), or None if no bucket's does.
        A drain reads exactly the rows of its buckets' ranges, malformed or not."""
        start = len(self._entry_prefix)
        hex_part = row[start:start + self.hex_width]
        if (not row.startswith(self._entry_prefix) or len(hex_part) != self.hex_width
                or not set(hex_part) <= _HEX_DIGITS or row[start + self.hex_width:start + self.hex_width + 1] != b":"):
            return None
        bucket = int(hex_part, 16)
        return bucket if bucket < self.num_buckets else None

    # --- configuration ------------------------------------------------------------------------------

    @property
    def config_row(self) -> bytes:
        """``<qid>#config``, the row holding the queue's stored configuration."""
        return self._qid_bytes + b"#config"

    @property
    def mark_prefix(self) -> bytes:
        """``<qid>#mark:``, the prefix of every bucket mark row."""
        return self._qid_bytes + b"#mark:"

    def mark_row(self, bucket: int) -> bytes:
        """``<qid>#mark:<bucketHex>``, the row of one bucket's mark."""
        return self.mark_prefix + self.bucket_hex(bucket).encode("ascii")

    def bucket_of_mark(self, row: bytes) -> int | None:
        """The bucket a mark row names, or None if it is not a mark row of this queue."""
        hex_part = row[len(self.mark_prefix):]
        if not row.startswith(self.mark_prefix) or len(hex_part) != self.hex_width or not set(hex_part) <= _HEX_DIGITS:
            return None
        bucket = int(hex_part, 16)
        return bucket if bucket < self.num_buckets else None

    def progress_prefix(self, run_id: str) -> bytes:
        """``<qid>#progress:<run id>:``, the prefix of the progress rows of one drain run."""
        return self._qid_bytes + b"#progress:" + run_id.encode("ascii") + b":"

    def progress_row(self, run_id: str, task: int) -> bytes:
        """The row where task ``task`` of drain run ``run_id`` keeps its running counters."""
        return self.progress_prefix(run_id) + str(task).encode("ascii")

    def bootstrap_row(self, destination: str) -> bytes:
        """``<qid>#bootstrap:<destination>``: where a bootstrap of ``destination`` (``cluster/table``) keeps
        its lease, plan and progress (:mod:`connector.snapshot.state`)."""
        return self._qid_bytes + b"#bootstrap:" + destination.encode("utf-8")

    @property
    def ack_prefix(self) -> bytes:
        """``<qid>#ack:``, the prefix of the rows where drain processes acknowledge the registrations they use
        (:mod:`connector.queue.destinations`)."""
        return self._qid_bytes + b"#ack:"

    def ack_row(self, process: str) -> bytes:
        """The row where drain process ``process`` acknowledges the registrations it exports to."""
        return self.ack_prefix + process.encode("utf-8")

    # --- dead letters -------------------------------------------------------------------------------

    @property
    def dead_letter_prefix(self) -> bytes:
        """``<qid>#dead:``, the prefix of every dead-letter row."""
        return self._dead_prefix

    def dead_letter_row(self, original_row: bytes) -> bytes:
        """The dead-letter row for a malformed entry row."""
        return self._dead_prefix + original_row

    def original_row(self, dead_letter_row: bytes) -> bytes:
        """The entry row a dead-letter row was made from."""
        if not dead_letter_row.startswith(self._dead_prefix):
            raise ValueError(f"not a dead-letter row of queue {self.qid!r}: {dead_letter_row!r}")
        return dead_letter_row[len(self._dead_prefix):]

    @property
    def requeued_prefix(self) -> bytes:
        """``<qid>#requeued:``, the prefix of the rows where a requeue records when each entry it wrote back had been
        dead-lettered (:mod:`connector.queue.dead_letters`)."""
        return self._qid_bytes + b"#requeued:"

    @property
    def records_range(self) -> tuple[bytes, bytes]:
        """The rows between ``<qid>#`` and ``<qid>:`` (exclusive): the queue's own records, never an entry."""
        return self._qid_bytes + b"#", self._qid_bytes + b":"

    def dead_letter_range(self) -> Range:
        """The range holding every dead-letter row of this queue (inside [``<qid>#``, ``<qid>:``))."""
        return Range.prefix(self._dead_prefix)

    def _check_bucket(self, bucket: int) -> None:
        if not isinstance(bucket, int) or isinstance(bucket, bool) or not 0 <= bucket < self.num_buckets:
            raise ValueError(f"bucket must be an int in [0, {self.num_buckets}), got {bucket!r}")
