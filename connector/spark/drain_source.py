"""The ``export-queue-drain`` Spark streaming source: the streaming drain's micro-batches, drained in the tasks.

It plans exactly as the ``export-queue`` source does (bucket marks, the sweep, read limits: see
:class:`~connector.spark.queue_source.QueueStreamReader`), but each task drains its group of buckets itself,
as a batch round's task does (read, export, delete: :func:`connector.queue.drain_buckets`), and yields one
row of counters (the ``DrainStats`` columns). So Spark carries plans in and counters out, never entries, and
a stream catches up with a backlog at the batch drain's rate. ``start_stream`` reads it with ``foreachBatch``,
which collects each micro-batch's counters on the driver.

Options: those of ``export-queue`` and of the ``accumulo-export`` sink in drain mode (``dest.*``, ``table``,
the export settings, ``create_dest_table``, ``report_dir``), ``relay_seconds`` (default 10): the planner relays, on
a thread of its own, what crashed producers left in the outboxes of the tables recorded as feeding the queue
(:class:`connector.transactions.PeriodicRelay`), within about that long, and writes what each pass relayed into
``report_dir`` (``relay-*.json``: the planner runs in a Python process of its own on the driver, so files are
how its counts reach whoever started the stream); and ``progress_id``: each task keeps its running counters in
a progress row of the queue (``<progress_id>.<micro-batch>``, as a batch round's tasks do), so a long
micro-batch's exports are seen while it runs. Each counters row names its micro-batch (the ``micro_batch``
column: the planner's number, the offset's ``batch``). Unknown options are refused when Spark creates the
source.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from connector.jobs.stats import stats_batch, stats_ddl
from connector.queue import DrainStats, drain_buckets
from connector.queue.destinations import RegisteredExporter
from connector.queue.settings import DRAIN, EXPORT, PLAN
from connector.transactions import PeriodicRelay
from connector.transactions.relay import RelayStats

from .export_sink import SinkSettings
from .options import EXPORT_QUEUE_DRAIN, WARM_UP, OptionError, StreamProgress, WarmUp, checked
from .planner_errors import input_errors_in_one_line
from .queue_source import BucketGroup, ExportQueueDataSource, QueueRead, QueueStreamReader
from .worker_heap import freeze_worker_heap

#: the drain settings the streaming drain takes as options
_TAGS = frozenset({PLAN, EXPORT, DRAIN})
#: the column naming a counters row's micro-batch (after the ``DrainStats`` columns)
MICRO_BATCH = "micro_batch"
#: the report files of the planner's relay, in ``report_dir`` (a micro-batch's are ``batch-*.json``)
RELAY_REPORT_PREFIX = "relay-"


def stream_run_id(progress_id: str, micro_batch: int) -> str:
    """The run id of a micro-batch's progress rows: ``<progress_id>.<micro-batch>``."""
    return f"{progress_id}.{micro_batch}"


class DrainGroup(BucketGroup):
    """A :class:`BucketGroup` of a streaming drain's micro-batch: which micro-batch (the planner's number) and
    which task of it, so the task's progress row and counters say so."""

    def __init__(self, buckets: Sequence[tuple[int, int | None, int | None]], micro_batch: int, task: int) -> None:
        super().__init__(buckets)
        self.micro_batch, self.task = micro_batch, task


@input_errors_in_one_line
class QueueDrainDataSource(ExportQueueDataSource):
    """``spark.readStream.format("export-queue-drain")``: streaming only."""

    surface = EXPORT_QUEUE_DRAIN

    def __init__(self, options: Any) -> None:
        DataSource.__init__(self, options)
        self.read_options = checked(self.surface, options)
        self.queue_read = QueueRead.parse(self.read_options, self.surface, _TAGS)
        self.sink = SinkSettings.parse(self.read_options, self.surface.where)
        self.progress = StreamProgress.from_options(self.read_options, where=self.surface.where)

    @classmethod
    def name(cls) -> str:
        return "export-queue-drain"

    def schema(self) -> str:
        return f"{stats_ddl(DrainStats)}, {MICRO_BATCH} long"

    def reader(self, schema: StructType) -> DataSourceReader:
        raise OptionError("export-queue-drain is a streaming source (its reads drain the queue): use "
                          "spark.readStream, or the export-queue source to read entries")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return DrainStreamReader(self.queue_read, self.sink.on_driver(), self.progress.progress_id)


class DrainStreamReader(QueueStreamReader):
    """A :class:`QueueStreamReader` whose tasks drain their buckets and yield counters, not entries (with
    ``progress_id``, keeping them in progress rows as they go)."""

    def __init__(self, read: QueueRead, sink: SinkSettings, progress_id: str | None = None) -> None:
        super().__init__(read)
        self.sink = sink
        self.settings = read.settings
        self.progress_id = progress_id
        self._relay: PeriodicRelay | None = None

    def __getstate__(self) -> dict:
        # pickled to the read tasks, which never plan: the relay's thread stays with the planner
        return {k: v for k, v in self.__dict__.items() if k != "_relay"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._relay = None

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if self._relay is None:
            self._relay = PeriodicRelay(self.gateway.shared, self.config.table, self.config.layout.config_row,
                                        self.settings.relay_seconds, on_relay=self._report_relayed).start()
        return super().latestOffset(start, limit)

    def _report_relayed(self, stats: RelayStats) -> None:
        """Write what a relay pass did into ``report_dir`` (``collect_stream_reports`` folds it)."""
        folder = self.sink.report_dir
        if not folder:
            return
        os.makedirs(folder, exist_ok=True)
        name = f"{RELAY_REPORT_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
        tmp = os.path.join(folder, f".{name}.tmp")
        with open(tmp, "w") as f:
            json.dump({k: v for k, v in asdict(stats).items() if k != "errors"}, f)
        os.replace(tmp, os.path.join(folder, name))

    def stop(self) -> None:
        """The query stopped: so does the relay (a pass under way finishes)."""
        if self._relay is not None:
            self._relay.stop()
            self._relay = None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        micro_batch = int(end.get("batch", 0))
        return [DrainGroup(group.buckets, micro_batch, task)
                for task, group in enumerate(super().partitions(start, end)) if isinstance(group, BucketGroup)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, DrainGroup)
        freeze_worker_heap()
        limits = {bucket: (n, size) for bucket, n, size in partition.buckets}
        progress_row = None
        if self.progress_id is not None:
            run = stream_run_id(self.progress_id, partition.micro_batch)
            progress_row = self.config.layout.progress_row(run, partition.task)
        stats = drain_buckets(self.gateway.shared(), self.config, list(limits), self.sink.exporter(), self.settings,
                              limits=limits, progress_row=progress_row)
        counters = stats_batch(stats)
        yield counters.append_column(MICRO_BATCH, pa.array([partition.micro_batch], pa.int64()))


@input_errors_in_one_line
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
        return WarmUpReader(self.sink.on_driver(), self.partitions)


@input_errors_in_one_line
class WarmUpReader(DataSourceReader):
    def __init__(self, sink: SinkSettings, partitions: int) -> None:
        self.sink, self.count = sink, partitions

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.count)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        if self.sink.source is not None:
            self.sink.source.shared()
        exporter = self.sink.exporter()
        if isinstance(exporter, RegisteredExporter):
            exporter.current()  # looks the registrations up and opens every destination's writer
        return iter(())
