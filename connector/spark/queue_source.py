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

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from connector import columnar
from connector.queue import KEYS_ONLY, QueueConfig, read_bucket_batches

from .options import GatewayOptions, as_dict, int_option, queue_config

SCHEMA = ("key binary, value binary, seq long, bucket int, entry_row binary, entry_ts long, error string")
SOURCE_PREFIX = "source."


class BucketGroup(InputPartition):
    """One Spark input partition: (bucket, how many entries to read at most; None = all) pairs."""

    def __init__(self, buckets: Sequence[tuple[int, int | None]]) -> None:
        super().__init__(tuple(buckets))

    @property
    def buckets(self) -> tuple[tuple[int, int | None], ...]:
        return self.value


ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("seq", pa.int64()),
                          ("bucket", pa.int32()), ("entry_row", pa.binary()), ("entry_ts", pa.int64()),
                          ("error", pa.string())])


def read_group(gateway: GatewayOptions, config: QueueConfig, group: BucketGroup) -> Iterator[pa.RecordBatch]:
    """The entries of a group of buckets, each bucket in key+seq order, as Arrow record batches: scan pages
    decoded and rows parsed natively, no Python object per entry."""
    conn = gateway.shared()
    for bucket, limit in group.buckets:
        left = limit
        for page in read_bucket_batches(conn, config, bucket):
            if left is not None:
                if left <= 0:
                    break
                page = page.slice(0, left)
                left -= page.num_rows
            parsed = columnar.parse_entry_rows(page.column("row"), config.layout)
            yield pa.record_batch([parsed.column("key"), page.column("value"), parsed.column("seq"),
                                   parsed.column("bucket"), page.column("row"), page.column("ts"),
                                   parsed.column("error")], schema=ARROW_SCHEMA)


def group_buckets(buckets: Sequence[tuple[int, int | None]], per_partition: int) -> list[BucketGroup]:
    return [BucketGroup(buckets[i:i + per_partition]) for i in range(0, len(buckets), per_partition)]


class ExportQueueDataSource(DataSource):
    """``spark.read.format("export-queue")`` and ``spark.readStream.format("export-queue")``.

    Options: ``source.host``, ``source.port``, ``source.secret_file`` or ``source.secret_env``;
    ``queue.table``, ``queue.id``, ``queue.buckets`` (and ``queue.key_serializer``/``value_serializer``);
    ``buckets_per_partition``; streaming: ``max_entries_per_trigger`` (default: all available).
    """

    @classmethod
    def name(cls) -> str:
        return "export-queue"

    def schema(self) -> str:
        return SCHEMA

    def _parsed(self) -> tuple[GatewayOptions, QueueConfig, int]:
        opts = as_dict(self.options)
        config = queue_config(opts)
        per_partition = int_option(opts, "buckets_per_partition", config.tablet_buckets, minimum=1)
        return GatewayOptions.parse(opts, SOURCE_PREFIX), config, per_partition

    def reader(self, schema: StructType) -> DataSourceReader:
        return QueueBatchReader(*self._parsed())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        gateway, config, per_partition = self._parsed()
        max_entries = int_option(as_dict(self.options), "max_entries_per_trigger", 0, minimum=0)
        return QueueStreamReader(gateway, config, per_partition, max_entries or None)


class QueueBatchReader(DataSourceReader):
    def __init__(self, gateway: GatewayOptions, config: QueueConfig, per_partition: int) -> None:
        self.gateway, self.config, self.per_partition = gateway, config, per_partition

    def partitions(self) -> Sequence[InputPartition]:
        return group_buckets([(b, None) for b in range(self.config.num_buckets)], self.per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BucketGroup)
        return read_group(self.gateway, self.config, partition)


def pending_by_bucket(gateway: GatewayOptions, config: QueueConfig, max_keys: int) -> dict[int, int]:
    """Entries per non-empty bucket, from a keys-only scan. The scan stops after ``max_keys`` keys; the
    buckets it did not reach then count as ``max_keys`` each (one full round of them may be scheduled)."""
    layout = config.layout
    conn = gateway.shared()
    counts: dict[int, int] = {}
    for i, cell in enumerate(conn.scan(config.table, layout.queue_range(), columns=[("e", "v")],
                                       iterators=[KEYS_ONLY], batch_size=10_000)):
        if i >= max_keys:
            return {b: counts.get(b, max_keys) for b in range(config.num_buckets)}
        # malformed rows in a bucket's range count too: the sink gets to dead-letter them
        bucket = layout.bucket_range_of(cell.row)
        if bucket is None:
            continue
        counts[bucket] = counts.get(bucket, 0) + 1
    return counts


READ_ALL = "read_all"  # offset flag: read pending buckets whole (no read limit in force)


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Per-bucket offsets: {bucketHex: entries scheduled so far, "read_all": flag}. With a read limit
    (``max_entries_per_trigger``) or AvailableNow, a micro-batch reads at most the scheduled number of
    entries from the head of each bucket: under sustained overload, entries with larger keys may then wait
    several micro-batches. See the module docstring."""

    MAX_SCAN_KEYS = 500_000

    def __init__(self, gateway: GatewayOptions, config: QueueConfig, per_partition: int,
                 max_entries: int | None) -> None:
        self.gateway, self.config, self.per_partition = gateway, config, per_partition
        self.max_entries = max_entries
        self._available_now: dict[int, int] | None = None  # pending counts when AvailableNow started
        self._target: dict[str, int] | None = None

    def _hex(self, bucket: int) -> str:
        return self.config.layout.bucket_hex(bucket)

    def initialOffset(self) -> dict:
        return {**{self._hex(b): 0 for b in range(self.config.num_buckets)}, READ_ALL: False}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_entries) if self.max_entries else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = pending_by_bucket(self.gateway, self.config, self.MAX_SCAN_KEYS)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        counts = pending_by_bucket(self.gateway, self.config, self.MAX_SCAN_KEYS)
        if self._available_now is not None and self._target is None:
            self._target = {self._hex(b): start.get(self._hex(b), 0) + n for b, n in self._available_now.items()}
        if isinstance(limit, ReadMaxRows) and counts:
            share = max(1, limit.max_rows // len(counts))
            counts = {b: min(n, share) for b, n in counts.items()}
        end = dict(start)
        # With no read limit, each pending bucket is read whole at read time. Cutting it at the count seen
        # while planning would let entries added meanwhile with smaller keys (the bucket is in key order)
        # push older entries to later batches, again and again under steady load.
        if counts:  # with nothing pending the offset must stay equal to start (no empty micro-batch)
            end[READ_ALL] = isinstance(limit, ReadAllAvailable) and self._target is None
        for bucket, n in counts.items():
            h = self._hex(bucket)
            end[h] = start.get(h, 0) + n
            if self._target is not None:
                end[h] = min(end[h], max(self._target.get(h, 0), start.get(h, 0)))
        return end

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        todo: list[tuple[int, int | None]] = []
        read_all = bool(end.get(READ_ALL))
        for b in range(self.config.num_buckets):
            h = self._hex(b)
            n = end.get(h, 0) - start.get(h, 0)
            if n > 0:
                todo.append((b, None if read_all else n))
        return group_buckets(todo, self.per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BucketGroup)
        return read_group(self.gateway, self.config, partition)

    def commit(self, end: dict) -> None:
        """Nothing to purge here: the sink deleted each entry right after its export returned."""
