"""The ``export-queue`` Spark data source: reads export-queue entries from the source table.

Batch reads plan one input partition per group of buckets (``buckets_per_partition``, default: the
buckets of one tablet). Streaming reads keep one offset per bucket: the number of that bucket's entries
scheduled so far. Each micro-batch reads, per bucket, up to the newly scheduled number of entries from the
head of the bucket (key+seq order). The source never deletes: the ``accumulo-export`` sink deletes each
entry after exporting it, so the head of a bucket is always what is still to do, and a replayed
micro-batch re-reads what was not yet deleted (at least once).

Columns: ``key`` and ``value`` (binary, as serialized by the producer), ``seq``, ``bucket``, and
``entry_row``/``entry_ts`` (the entry's row and Accumulo timestamp, which the sink needs to delete exactly
that entry), ``error`` (why the entry is malformed, else null; key, seq and bucket are then null).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from connector.queue import DrainSettings, QueueConfig
from connector.queue.marks import settle_marks
from connector.queue.planner import StreamPlanner, pending_by_bucket
from connector.queue.reader import read_bucket_head
from connector.queue.settings import PLAN
from connector.queue.stored_config import check_config
from connector.settings import Surface

from .compat import (
    ADMISSION_CONTROL,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from .options import EXPORT_QUEUE, SOURCE_PREFIX, GatewayOptions, StreamTrigger, checked, queue_config
from .planner_errors import input_errors_in_one_line
from .worker_heap import freeze_worker_heap

SCHEMA = ("key binary, value binary, seq long, bucket int, entry_row binary, entry_ts long, error string")


class BucketGroup(InputPartition):
    """One Spark input partition: (bucket, at most how many entries, at most how many bytes) triples, read
    from each bucket's head; None = no such limit."""

    def __init__(self, buckets: Sequence[tuple[int, int | None, int | None]]) -> None:
        super().__init__(tuple(buckets))

    @property
    def buckets(self) -> tuple[tuple[int, int | None, int | None], ...]:
        return self.value


ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("seq", pa.int64()),
                          ("bucket", pa.int32()), ("entry_row", pa.binary()), ("entry_ts", pa.int64()),
                          ("error", pa.string())])


def read_group(gateway: GatewayOptions, config: QueueConfig, group: BucketGroup) -> Iterator[pa.RecordBatch]:
    """The entries of a group of buckets, each bucket's head in key+seq order (within its limits), as Arrow
    record batches: scan pages decoded and rows parsed natively, no Python object per entry."""
    freeze_worker_heap()
    conn = gateway.shared()
    for bucket, limit, byte_limit in group.buckets:
        for page in read_bucket_head(conn, config, bucket, limit, byte_limit):
            parsed = config.layout.parse_rows(page.column("row"))
            yield pa.record_batch([parsed.column("key"), page.column("value"), parsed.column("seq"),
                                   parsed.column("bucket"), page.column("row"), page.column("ts"),
                                   parsed.column("error")], schema=ARROW_SCHEMA)


def group_buckets(buckets: Sequence[tuple[int, int | None, int | None]], per_partition: int) -> list[BucketGroup]:
    return [BucketGroup(buckets[i:i + per_partition]) for i in range(0, len(buckets), per_partition)]


@dataclass(frozen=True)
class QueueRead:
    """What the ``export-queue`` source reads: the cluster (``source.*``), the queue (``queue.*``) and how
    reads are planned (the ``plan`` settings of :class:`~connector.queue.DrainSettings`)."""

    gateway: GatewayOptions
    config: QueueConfig
    settings: DrainSettings
    available_now: bool = False  # option ``available_now``: Spark before 4.2 runs availableNow as one micro-batch

    @classmethod
    def parse(cls, options: dict[str, str], surface: Surface, tags: frozenset[str] = frozenset({PLAN})) -> QueueRead:
        return cls(GatewayOptions.parse(options, SOURCE_PREFIX, surface.where),
                   queue_config(options, surface.where),
                   DrainSettings.from_options(options, where=surface.where, tags=tags),
                   StreamTrigger.from_options(options, where=surface.where).available_now)

    @property
    def per_partition(self) -> int:
        return self.settings.buckets_per_partition or self.config.tablet_buckets


@input_errors_in_one_line
class ExportQueueDataSource(DataSource):
    """``spark.read.format("export-queue")`` and ``spark.readStream.format("export-queue")``.

    Options (docs/reference.md: Data source options): ``source.*`` (cluster A's gateway), ``queue.table``, ``queue.id``,
    ``queue.buckets`` (and ``queue.key_serializer``/``value_serializer``), ``buckets_per_partition``;
    streaming: ``max_entries_per_trigger`` or ``max_bytes_per_trigger`` (row + value bytes; default: all
    available), ``sweep_seconds``. Unknown options are refused when Spark creates the source (at ``load()``).
    """

    #: the options this source accepts
    surface = EXPORT_QUEUE

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.read_options = checked(self.surface, options)
        self.queue_read = QueueRead.parse(self.read_options, self.surface)

    @classmethod
    def name(cls) -> str:
        return "export-queue"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_stored()
        return QueueBatchReader(self.queue_read)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_stored()
        return QueueStreamReader(self.queue_read)

    def _check_stored(self) -> None:
        """Refuse, before any task reads, options that disagree with what the queue was initialised with (say
        JSON values for a packed queue, which the sink would dead-letter as undecodable)."""
        check_config(self.queue_read.gateway.shared(), self.queue_read.config)


@input_errors_in_one_line
class QueueBatchReader(DataSourceReader):
    def __init__(self, read: QueueRead) -> None:
        self.gateway, self.config, self.per_partition = read.gateway, read.config, read.per_partition

    def partitions(self) -> Sequence[InputPartition]:
        return group_buckets([(b, None, None) for b in range(self.config.num_buckets)], self.per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BucketGroup)
        return read_group(self.gateway, self.config, partition)


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from the bucket marks (:class:`connector.queue.planner.StreamPlanner`), O(buckets)
    per trigger.

    An offset is ``{"batch": n, "marks": {bucketHex: token}, "limits": {bucketHex: n or null},
    "byte_limits": {bucketHex: n}}``: the buckets a micro-batch drains, the mark token each was planned with
    ("" for a bucket found by the sweep), and how many entries (or bytes) to read from its head (null: the
    whole bucket, so nothing starves behind newer entries with smaller keys). A mark whose token was already
    planned is not planned again; ``commit`` settles the marks of the batch before (cleared if the bucket is
    empty, renewed if entries are left).

    Every ``sweep_seconds`` (and at the first trigger) a keys-only scan of the queue also plans the buckets
    that hold entries without a mark, so no entry waits longer than that. With a read limit
    (``max_entries_per_trigger`` or ``max_bytes_per_trigger``) each pending bucket reads its share from its
    head, so a backlog drains in bounded micro-batches and a bucket with new entries is not starved behind
    others. AvailableNow drains what a full scan found when the query started (at most those counts per
    bucket; a byte limit then applies on top).

    Spark before 4.2 has no admission control (:mod:`connector.spark.compat`): it calls ``latestOffset()``
    without arguments, so the reader plans from the last offset Spark planned, with its own read-limit
    options; its ``availableNow`` runs one micro-batch, which with the ``available_now`` option reads what a
    full scan found then, without read limits.
    """

    def __init__(self, read: QueueRead) -> None:
        self.gateway, self.config, self.per_partition = read.gateway, read.config, read.per_partition
        self.max_entries = read.settings.max_entries_per_trigger
        self.max_bytes = read.settings.max_bytes_per_trigger
        self.planner = StreamPlanner(self.gateway.shared, self.config, read.settings.sweep_seconds,
                                     compact_dead_keys=read.settings.compact_dead_keys)
        self._available_now: dict[str, int] | None = None  # per bucket: entries still to schedule
        self._settled = 0  # the last batch whose marks were settled
        # Spark before 4.2 (no admission control): it calls latestOffset() without the start offset, so the
        # reader keeps the last offset Spark planned (partitions() sees each one, a restart's last one too)
        self._last: dict | None = None
        self._one_batch = read.available_now and not ADMISSION_CONTROL  # Spark's availableNow fallback

    def _hex(self, bucket: int) -> str:
        return self.config.layout.bucket_hex(bucket)

    def initialOffset(self) -> dict:
        return {"batch": 0, "marks": {}, "limits": {}}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadMaxRows(self.max_entries) if self.max_entries else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        counts = pending_by_bucket(self.gateway.shared(), self.config)
        self._available_now = {self._hex(b): n for b, n in counts.items() if n}

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The next micro-batch's end offset (``start`` when there is nothing to do). Spark 4.2+ passes the
        start and its read limit; before 4.2 Spark passes neither (the reader's own last offset and read-limit
        options stand in: :mod:`connector.spark.compat`)."""
        if start is None:
            start = self._last if self._last is not None else self.initialOffset()
            if self._one_batch:  # Spark's availableNow fallback: this offset's micro-batch is the only one
                self._one_batch = False  # (should Spark ask again, it is not availableNow: plan as usual)
                self.prepareForTriggerAvailableNow()
                offset = self.latestOffset(start, ReadAllAvailable())
                self._available_now = None
                return offset
        if limit is None:
            limit = ReadAllAvailable() if self._available_now is not None else self.getDefaultReadLimit()
        # Spark asks for the next offset only once the batch ending at ``start`` is done (exported, deleted):
        # settle its marks now, not at its commit(), which Spark calls only when yet another batch runs
        if start.get("batch", 0) != self._settled:
            self._settle(start)
            self._settled = start.get("batch", 0)
        pending = self._pending(start)
        if not pending:
            return start  # nothing new: no micro-batch
        share: int | None = None
        if isinstance(limit, ReadMaxRows):
            share = max(1, limit.max_rows // len(pending))
        limits: dict[str, int | None] = {}
        for h in pending:
            n = share
            if self._available_now is not None:
                n = min(self._available_now[h], share or self._available_now[h])
                self._available_now[h] -= n
            limits[h] = n
        offset = {"batch": int(start.get("batch", 0)) + 1, "marks": pending, "limits": limits}
        if isinstance(limit, ReadMaxBytes):
            byte_share = max(1, limit.max_bytes // len(pending))
            offset["byte_limits"] = dict.fromkeys(pending, byte_share)
        return offset

    def _pending(self, start: dict) -> dict[str, str]:
        """bucketHex -> token of the buckets to drain next."""
        if self._available_now is not None:  # a bounded run: only what was there when it started
            marks = self.planner.marks()
            return {h: marks.get(h, "") for h, left in self._available_now.items() if left > 0}
        return self.planner.pending(start.get("marks", {}))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        self._last = end  # the offset Spark planned last (a restart's latest seen one: start == end)
        if end.get("batch") == start.get("batch"):
            return []
        limits, byte_limits = end.get("limits", {}), end.get("byte_limits", {})
        todo = [(int(h, 16), limits.get(h), byte_limits.get(h)) for h in sorted(end.get("marks", {}))]
        return group_buckets(todo, self.per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BucketGroup)
        return read_group(self.gateway, self.config, partition)

    def commit(self, end: dict) -> None:
        """The micro-batch that ended at ``end`` is exported and its entries deleted (the sink deletes each
        right after its export): settle the marks it was planned with, unless ``latestOffset`` did already
        (settling twice is harmless: each change is conditional on the planned token)."""
        if end.get("batch", 0) != self._settled:
            self._settle(end)

    def _settle(self, end: dict) -> None:
        planned = {int(h, 16): t.encode() for h, t in end.get("marks", {}).items() if t}
        limits, byte_limits = end.get("limits", {}), end.get("byte_limits", {})
        whole = [b for b in planned if limits.get(self._hex(b)) is None and self._hex(b) not in byte_limits]
        settle_marks(self.gateway.shared(), self.config, planned, drained_whole=whole)
