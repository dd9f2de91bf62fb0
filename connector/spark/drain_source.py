"""The ``export-queue-drain`` Spark streaming source: the streaming drain's micro-batches, drained in the tasks.

It plans exactly as the ``export-queue`` source does (bucket marks, the sweep, read limits: see
:class:`~connector.spark.queue_source.QueueStreamReader`), but each task drains its group of buckets itself,
as a batch round's task does (read, export, delete: :func:`connector.queue.drain_buckets`), and yields one
row of counters (the ``DrainStats`` columns). So Spark carries plans in and counters out, never entries, and
a stream catches up with a backlog at the batch drain's rate. ``start_stream`` reads it with ``foreachBatch``,
which collects each micro-batch's counters on the driver.

Options: those of ``export-queue`` and of the ``accumulo-export`` sink in drain mode (``dest.*``, ``table``,
``translator``, ``delete_mode``, ``create_table``, ``buffer_bytes``, ``fail_fast``), and ``relay_seconds``
(default 10): the planner relays, on a thread of its own, what crashed producers left in the outboxes of the
tables recorded as feeding the queue (:class:`connector.transactions.PeriodicRelay`), within about that long.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from connector.jobs.stats import stats_batch, stats_ddl
from connector.queue import DrainStats, drain_buckets
from connector.transactions import PeriodicRelay
from connector.transactions.relay import DEFAULT_RELAY_SECONDS

from .export_sink import SinkSettings
from .options import OptionError, as_dict, float_option, int_option
from .queue_source import BucketGroup, ExportQueueDataSource, QueueStreamReader


class QueueDrainDataSource(ExportQueueDataSource):
    """``spark.readStream.format("export-queue-drain")``: streaming only."""

    @classmethod
    def name(cls) -> str:
        return "export-queue-drain"

    def schema(self) -> str:
        return stats_ddl(DrainStats)

    def reader(self, schema: StructType) -> DataSourceReader:
        raise OptionError("export-queue-drain is a streaming source (its reads drain the queue): use "
                          "spark.readStream, or the export-queue source to read entries")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = as_dict(self.options)
        relay_seconds = float_option(opts, "relay_seconds", DEFAULT_RELAY_SECONDS)
        if relay_seconds <= 0:
            raise OptionError(f"relay_seconds must be > 0, got {relay_seconds}")
        return DrainStreamReader(*self._stream_settings(), sink=SinkSettings.parse(opts), relay_seconds=relay_seconds)


class DrainStreamReader(QueueStreamReader):
    """A :class:`QueueStreamReader` whose tasks drain their buckets and yield counters, not entries."""

    def __init__(self, *planning: Any, sink: SinkSettings, relay_seconds: float = DEFAULT_RELAY_SECONDS) -> None:
        super().__init__(*planning)
        self.sink = sink
        self.relay_seconds = relay_seconds
        self._relay: PeriodicRelay | None = None

    def __getstate__(self) -> dict:
        # pickled to the read tasks, which never plan: the relay's thread stays with the planner
        return {k: v for k, v in self.__dict__.items() if k != "_relay"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._relay = None

    def latestOffset(self, start: dict, limit: Any) -> dict:
        if self._relay is None:
            self._relay = PeriodicRelay(self.gateway.shared, self.config.table, self.config.layout.config_row,
                                        self.relay_seconds).start()
        return super().latestOffset(start, limit)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BucketGroup)
        sink = self.sink
        limits = {bucket: (n, size) for bucket, n, size in partition.buckets}
        stats = drain_buckets(self.gateway.shared(), self.config, list(limits), sink.exporter(),
                              buffer_bytes=sink.buffer_bytes, fail_fast=sink.fail_fast, limits=limits)
        yield stats_batch(stats)


class WarmUpDataSource(DataSource):
    """``spark.read.format("export-queue-warm-up")``: ``partitions`` tasks that read nothing; each loads the
    connector and opens the drain's connections (source, destination exporter) in its Python worker, which
    Spark then keeps for the stream's data-source reads. Options: those of ``export-queue-drain``."""

    @classmethod
    def name(cls) -> str:
        return "export-queue-warm-up"

    def schema(self) -> str:
        return "opened long"

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = as_dict(self.options)
        return WarmUpReader(SinkSettings.parse(opts), int_option(opts, "partitions", 1, minimum=1))


class WarmUpReader(DataSourceReader):
    def __init__(self, sink: SinkSettings, partitions: int) -> None:
        self.sink, self.count = sink, partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.count)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        if self.sink.source is not None:
            self.sink.source.shared()
        self.sink.exporter()
        return iter(())
