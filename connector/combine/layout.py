"""The combine queue's row layout, in one place (the export queue's is in :mod:`connector.queue.layout`).

A key's queued updates, its current value and its outgoing exports all live in the key's own row, so one
conditional mutation can apply a combine atomically (plain Accumulo is atomic per row)::

    key row   <cid>:<bucketHex>:<serialized key>
      o:e:<queue table>:<export row>   outbox: one outgoing export, value = serialized export value, ts = seq
      s:seq            the version counter: seq of the last combine (ASCII decimal), ts = that seq
      s:val            the current value (serialized), ts = seq of the combine that wrote it
      u:<update id>    one queued update, value = serialized delta, ts = the producer's clock (ms), chosen once
    config    <cid>#config     c:combine = JSON (buckets, serializers), written once by ``init``

Buckets, bucket hex width and split points are the export queue's (murmur3 of the serialized key, the same
``<cid>#``, ``<cid>:~`` and bucket-row splits), so a bucket's key rows are one contiguous range and one scan
reads a bucket's updates, values and outbox together.

The version sorts before the value and the updates (``s:seq`` < ``s:val`` < ``u:*``). Scans are not isolated
(the proxy interface has no isolated scanner), but a scan reads a row's cells in key order, never earlier
than the cells before them. So if a concurrent combine commits while a row is being read, it commits after
its version was read, and the condition on that version refuses our combine; otherwise version, value and
updates are read as one consistent state. That is why the condition on the version alone suffices.

Why these choices:

- ``u:<update id>``: the id (producer id + counter) is unique per update, so updates never overwrite each
  other, even within one millisecond, and a combine deletes exactly the updates it read. The producer picks the
  timestamp once per update, so a writer's replay after a dropped connection rewrites the same version, and the
  combine's delete at that timestamp hides the replay as well: a retried update is never counted twice.
- ``s:seq``: the condition of a combine is on this version counter, never on the value (a value can change and
  change back). It is also the change's sequence number on cluster B, so it rises strictly per key:
  ``max(wall-clock µs, previous seq + 1)``. A key whose combiner returned nothing keeps its ``s:seq`` (so a
  re-created key continues the sequence), and loses ``s:val``.
- Every cell a combine writes carries timestamp = its seq: a value deleted at seq s and re-created at s' > s is
  visible, whatever the server's clock says (two server-timestamped writes in one millisecond would tie, and
  the delete would win).
- A combine is a row transaction (:mod:`connector.transactions`) with version ``s:seq`` and outbox family
  ``o``: the same commit and relay code, the same outbox cells. The qualifier names the export queue's table
  and entry row (export key + seq), so relaying it is a plain copy, and a relay repeated after a crash writes
  the same entry row again (harmless: exports are replayed by version). The outbox cell is then deleted at
  its timestamp. The export queue records the combine table as a source of outboxes, so its streaming drain
  relays what a crashed pass left, as for any producer.
- The compaction hazard (DESIGN.md) applies to update ids too: once a full major compaction dropped the delete
  of a consumed update, a replay of that same update arriving later would be counted again.
"""

from __future__ import annotations

from connector.accumulo import Range
from connector.queue import QueueLayout
from connector.transactions import TxLayout
from connector.transactions.layout import UPDATE_FAMILY

OUTBOX_FAMILY = b"o"
STATE_FAMILY = b"s"
SEQ_QUALIFIER = b"seq"
VALUE_QUALIFIER = b"val"
CONFIG_FAMILY = b"c"
CONFIG_QUALIFIER = b"combine"
#: a combine is a row transaction with these version and outbox cells
COMBINE_TX_LAYOUT = TxLayout(STATE_FAMILY, SEQ_QUALIFIER, OUTBOX_FAMILY)
__all__ = ["COMBINE_TX_LAYOUT", "CombineLayout", "OUTBOX_FAMILY", "STATE_FAMILY", "SEQ_QUALIFIER", "UPDATE_FAMILY",
           "VALUE_QUALIFIER", "CONFIG_FAMILY", "CONFIG_QUALIFIER"]


class CombineLayout:
    """Rows of the combine queue ``cid`` with ``num_buckets`` buckets (bucketing shared with the export queue)."""

    __slots__ = ("buckets", "cid", "num_buckets")

    def __init__(self, cid: str, num_buckets: int) -> None:
        self.buckets = QueueLayout(cid, num_buckets)  # validates the id and the bucket count
        self.cid = cid
        self.num_buckets = num_buckets

    def __repr__(self) -> str:
        return f"CombineLayout(cid={self.cid!r}, num_buckets={self.num_buckets})"

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        return (CombineLayout, (self.cid, self.num_buckets))

    def bucket_of(self, key_bytes: bytes) -> int:
        return self.buckets.bucket_of(key_bytes)

    def key_row(self, key_bytes: bytes) -> bytes:
        """``<cid>:<bucketHex>:<serialized key>``: the row of everything about this key."""
        key_bytes = bytes(key_bytes)
        return self.buckets.bucket_prefix(self.buckets.bucket_of(key_bytes)) + key_bytes

    def key_of(self, row: bytes) -> bytes:
        """The serialized key of a key row (raises ``ValueError`` for a row that is not one)."""
        bucket = self.buckets.bucket_range_of(row)
        if bucket is None:
            raise ValueError(f"not a key row of combine queue {self.cid!r}: {row[:100]!r}")
        return row[len(self.buckets.bucket_prefix(bucket)):]

    def bucket_range(self, bucket: int) -> Range:
        """Every key row of one bucket."""
        return self.buckets.bucket_range(bucket)

    def queue_range(self) -> Range:
        """Every key row of the combine queue."""
        return self.buckets.queue_range()

    def split_points(self, buckets_per_tablet: int) -> list[bytes]:
        return self.buckets.split_points(buckets_per_tablet)

    @property
    def config_row(self) -> bytes:
        return self.buckets.config_row
