"""The ``export-queue-drain`` Spark streaming source: the streaming drain's micro-batches, drained in the tasks.

It plans exactly as the ``export-queue`` source does (bucket marks, the sweep, read limits: see
:class:`~connector.spark.queue_source.QueueStreamReader`), but each task drains its group of buckets itself,
as a batch round's task does (read, export, delete: :func:`connector.queue.drain_buckets`), and yields one
row of counters (the ``DrainStats`` columns). So Spark carries plans in and counters out, never entries, and
a stream catches up with a backlog at the batch drain's rate. ``start_stream`` reads it with ``foreachBatch``,
which collects each micro-batch's counters on the driver.

Options: those of ``export-queue`` and of the ``accumulo-export`` sink in drain mode (``dest.*``, ``table``,
the export settings, ``create_table``), and ``relay_seconds`` (default 10): the planner relays, on a thread of
its own, what crashed producers left in the outboxes of the tables recorded as feeding the queue
(:class:`connector.transactions.PeriodicRelay`), within about that long. Unknown options are refused when
Spark creates the source.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from connector.jobs.stats import stats_batch, stats_ddl
from connector.queue import DrainStats, drain_buckets
from connector.queue.settings import DRAIN, EXPORT, PLAN
from connector.transactions import PeriodicRelay

from .export_sink import SinkSettings
from .options import EXPORT_QUEUE_DRAIN, WARM_UP, OptionError, WarmUp, checked
from .queue_source import BucketGroup, ExportQueueDataSource, QueueRead, QueueStreamReader

#: the drain settings the streaming drain takes as options
_TAGS = frozenset({PLAN, EXPORT, DRAIN})


class QueueDrainDataSource(ExportQueueDataSource):
    """``spark.readStream.format("export-queue-drain")``: streaming only."""

    surface = EXPORT_QUEUE_DRAIN

    def __init__(self, options: Any) -> None:
        DataSource.__init__(self, options)
        self.read_options = checked(self.surface, options)
        self.queue_read = QueueRead.parse(self.read_options, self.surface, _TAGS)
        self.sink = SinkSettings.parse(self.read_options, self.surface.where)

    @classmethod
    def name(cls) -> str:
        return "export-queue-drain"

    def schema(self) -> str:
        return stats_ddl(DrainStats)

    def reader(self, schema: StructType) -> DataSourceReader:
        raise OptionError("export-queue-drain is a streaming source (its reads drain the queue): use "
                          "spark.readStream, or the export-queue source to read entries")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return DrainStreamReader(self.queue_read, self.sink)


class DrainStreamReader(QueueStreamReader):
    """A :class:`QueueStreamReader` whose tasks drain their buckets and yield counters, not entries."""

    def __init__(self, read: QueueRead, sink: SinkSettings) -> None:
        super().__init__(read)
        self.sink = sink
        self.settings = read.settings
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
                                        self.settings.relay_seconds).start()
        return super().latestOffset(start, limit)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BucketGroup)
        limits = {bucket: (n, size) for bucket, n, size in partition.buckets}
        stats = drain_buckets(self.gateway.shared(), self.config, list(limits), self.sink.exporter(), self.settings,
                              limits=limits)
        yield stats_batch(stats)


class WarmUpDataSource(DataSource):
    """``spark.read.format("export-queue-warm-up")``: ``partitions`` tasks that read nothing; each loads the
    connector and opens the drain's connections (source, destination exporter) in its Python worker, which
    Spark then keeps for the stream's data-source reads. Options: those of ``export-queue-drain``."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        opts = checked(WARM_UP, options)
        self.sink = SinkSettings.parse(opts, WARM_UP.where)
        self.partitions = WarmUp.from_options(opts, where=WARM_UP.where).partitions

    @classmethod
    def name(cls) -> str:
        return "export-queue-warm-up"

    def schema(self) -> str:
        return "opened long"

    def reader(self, schema: StructType) -> DataSourceReader:
        return WarmUpReader(self.sink, self.partitions)


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
