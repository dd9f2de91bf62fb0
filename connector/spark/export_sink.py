"""The ``accumulo-export`` Spark data source (a sink): exports rows into a destination Accumulo table.

Two input shapes:

* rows of the ``export-queue`` source (``key``, ``value``, ``seq``, ``entry_row``, ``entry_ts``, ...) with
  the ``queue.*`` and ``source.*`` options: the drain. Each partition is exported in batches of at most
  ``buffer_bytes`` (data bytes: an entry's row and value; other rows are cut the same way, by their text and
  binary columns), and after each ``export()`` returned the batch's entries are deleted from the queue, each
  at its own timestamp. Malformed entries are dead-lettered (or, with ``fail_fast``, the task fails
  before anything of that batch is exported or deleted).
* any other rows with a ``seq`` column: each row becomes ``SequencedExport(key, value, seq)`` with
  ``value`` = the row as a dict (so the ``cells`` translator takes columns row, cf, cq, cv, value, delete),
  or, if there is a ``value`` column of JSON text and no ``row`` column, that JSON decoded. A DataFrame of
  cells (row, cf, cq, value of string or binary type, integer seq) with the ``cells`` translator takes the
  columnar path of :mod:`.cell_frames` instead: its Arrow batches go to the writer whole.

Commit messages are plain dataclasses of counts. The batch ``commit()`` runs in a fresh driver process,
so totals travel back through a report file when ``report_dir`` is set.
"""

from __future__ import annotations

import itertools
import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import Row
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from connector.export import AccumuloExporter, SequencedExport, prepare_destination, prepare_destination_table
from connector.export.shared import shared_exporter
from connector.queue import DrainSettings, DrainStats, QueueConfig
from connector.queue.batches import cut_by_bytes, data_bytes
from connector.queue.destinations import RegisteredExporter, drain_exporter
from connector.queue.drain import EntryProcessor
from connector.queue.reader import ENTRY_SCHEMA
from connector.queue.settings import EXPORT
from connector.queue.stored_config import read_translator

from .cell_frames import columnar_cells, export_cell_batches
from .compat import STREAM_ARROW_WRITER
from .options import (
    ACCUMULO_EXPORT,
    DEST_PREFIX,
    SOURCE_PREFIX,
    GatewayOptions,
    OptionError,
    SinkTarget,
    checked,
    queue_config,
)
from .planner_errors import input_errors_in_one_line
from .worker_heap import freeze_worker_heap

#: the save modes the sink implements
SAVE_MODES = ("append",)


@dataclass
class ExportCommitMessage(WriterCommitMessage):
    """What one task did: its drain counters only, so it is small and pickles anywhere."""

    stats: DrainStats


@dataclass(frozen=True)
class SinkSettings:
    """The sink's options, parsed: the destination's gateway (``dest.*``), where it writes
    (:class:`~connector.spark.options.SinkTarget`), how (the export part of
    :class:`~connector.queue.DrainSettings`) and, to drain the queue its rows came from, ``source.*`` and
    ``queue.*``."""

    dest: GatewayOptions
    target: SinkTarget
    drain: DrainSettings
    source: GatewayOptions | None
    queue: QueueConfig | None

    @classmethod
    def parse(cls, options: Mapping[str, str], where: str = ACCUMULO_EXPORT.where) -> SinkSettings:
        has_queue = any(k.startswith("queue.") for k in options)
        return cls(
            dest=GatewayOptions.parse(options, DEST_PREFIX, where),
            target=SinkTarget.from_options(options, where=where),
            drain=DrainSettings.from_options(options, where=where, tags={EXPORT}),
            source=GatewayOptions.parse(options, SOURCE_PREFIX, where) if has_queue else None,
            queue=queue_config(options, where) if has_queue else None,
        )

    @property
    def table(self) -> str:
        return self.target.table

    @property
    def report_dir(self) -> str | None:
        return self.target.report_dir

    def on_driver(self) -> SinkSettings:
        """These settings as the tasks take them, checked on the driver before any task runs: the translator
        settled (the one given, else the queue's stored one in drain mode, else the default) and the
        destination table there (created only with ``create_dest_table``; else a missing one is refused in one
        line naming the closest existing table), its delete mode settled (the table's: refused in one line when
        another is asked, or when its shape cannot keep the mode's promise: before any task writes)."""
        stored = None
        if self.drain.translator is None and self.queue is not None and self.source is not None:
            with self.source.connect() as conn:
                stored = read_translator(conn, self.queue)
        with self.dest.connect() as conn:
            prepare_destination_table(conn, self.target.table, self.drain.create_dest_table)
            mode = prepare_destination(conn, self.target.table, self.drain.delete_mode)
        return replace(self, drain=replace(self.drain, translator=self.drain.translator_or(stored),
                                           delete_mode=mode.value))

    def exporter(self) -> AccumuloExporter | RegisteredExporter:
        """This process's exporter; in drain mode into every destination registered with the queue too."""
        if self.queue is not None and self.source is not None:
            return drain_exporter(self.source, self.queue, self.dest, self.target.table, self.translator,
                                  self.drain.delete_mode, self.drain.create_dest_table)
        return self.table_exporter()

    def table_exporter(self) -> AccumuloExporter:
        """This process's exporter into the sink's own table only."""
        return shared_exporter(self.dest, self.target.table, self.translator, self.drain.delete_mode,
                               self.drain.create_dest_table)

    @property
    def translator(self) -> str:
        """The translator (settled by :meth:`on_driver`)."""
        return self.drain.translator_or(None)


def write_partition(settings: SinkSettings, batches: Iterator[pa.RecordBatch]) -> ExportCommitMessage:
    """Export one partition; in drain mode, delete each batch's queue entries after its export returned."""
    freeze_worker_heap()
    if settings.queue is not None:
        assert settings.source is not None
        processor = EntryProcessor(settings.source.shared(), settings.queue, settings.exporter(), settings.drain)
        return ExportCommitMessage(processor.process_batches(_queue_entries(batches)))
    exporter = settings.table_exporter()
    if settings.translator == "cells":  # a DataFrame of cells: columnar unless its column types need Python
        first = next(batches, None)
        if first is None:
            return ExportCommitMessage(DrainStats())
        batches = itertools.chain([first], batches)
        if columnar_cells(first.schema):
            return ExportCommitMessage(export_cell_batches(exporter, settings.drain.buffer_bytes, batches))
    return _export_plain_rows(exporter, settings.drain.buffer_bytes, batches)


def _queue_entries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The entry columns of the export-queue source's batches, renamed as the drain takes them."""
    for b in batches:
        names = b.schema.names
        if ("entry_row" not in names or "entry_ts" not in names or b.column("entry_row").null_count
                or b.column("entry_ts").null_count):
            raise OptionError("drain mode needs the entry_row and entry_ts columns of the export-queue source")
        yield pa.record_batch([b.column("entry_row"), b.column("entry_ts"), b.column("value")], schema=ENTRY_SCHEMA)


def _export_plain_rows(exporter: AccumuloExporter, buffer_bytes: int,
                       batches: Iterator[pa.RecordBatch]) -> ExportCommitMessage:
    """Rows as ``SequencedExport`` objects, exported in batches of at most ``buffer_bytes`` data bytes (the
    drain's cutter)."""
    started = time.monotonic()
    stats = DrainStats()
    for batch in cut_by_bytes(batches, buffer_bytes):
        exports = []
        for record in batch.to_pylist():
            if record.get("seq") is None:
                raise OptionError("rows written to accumulo-export need a non-null 'seq' column")
            seq = int(record.pop("seq"))
            value: Any = record
            if "row" not in record and isinstance(record.get("value"), str | bytes | bytearray):
                value = json.loads(record["value"])
            exports.append(SequencedExport(record.get("key"), value, seq))
        exporter.export(exports)
        stats.entries += batch.num_rows
        stats.bytes += data_bytes(batch)
        stats.exported += len(exports)
        stats.batches += 1
    stats.seconds = time.monotonic() - started
    return ExportCommitMessage(stats)


def total(messages: list[Any]) -> DrainStats:
    return sum((m.stats for m in messages if isinstance(m, ExportCommitMessage)), DrainStats())


def write_report(report_dir: str | None, summary: DrainStats, batch_id: int | None = None,
                 wall_seconds: float | None = None, **extra: Any) -> None:
    if not report_dir:
        return
    os.makedirs(report_dir, exist_ok=True)
    name = f"batch-{batch_id:08d}.json" if batch_id is not None else f"job-{uuid.uuid4().hex}.json"
    tmp = os.path.join(report_dir, f".{name}.tmp")
    with open(tmp, "w") as f:
        json.dump(dict(asdict(summary), batch_id=batch_id, at=time.time(), wall_seconds=wall_seconds, **extra), f)
    os.replace(tmp, os.path.join(report_dir, name))


@input_errors_in_one_line
class AccumuloExportDataSource(DataSource):
    """``df.write.format("accumulo-export").mode("append")`` and ``df.writeStream.format("accumulo-export")``.

    Options (docs/reference.md: Data source options): ``dest.*`` (the destination's gateway), ``table``, the export
    settings (``translator``, ``delete_mode``, ``create_dest_table``, ``buffer_bytes``, ``fail_fast``),
    ``report_dir``; to drain the queue the rows were read from, ``source.*`` and ``queue.*`` as for the
    ``export-queue`` source. Unknown options are refused when Spark creates the sink. Only the ``append``
    save mode is implemented: cells merge by timestamp = seq, so ``overwrite`` cannot mean "replace" and is
    refused (delete the table first to replace its content).
    """

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.settings = SinkSettings.parse(checked(ACCUMULO_EXPORT, options))

    @classmethod
    def name(cls) -> str:
        return "accumulo-export"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _refuse_overwrite(overwrite)
        return ExportWriter(self.settings.on_driver())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _refuse_overwrite(overwrite)
        settings = self.settings.on_driver()
        if STREAM_ARROW_WRITER is None:  # Spark 4.0: rows, turned back into Arrow batches
            return ExportStreamRowWriter(settings, to_arrow_schema(schema))
        return ExportStreamWriter(settings)


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError("accumulo-export supports the save mode 'append' only (cells merge by timestamp = seq, "
                          "so an overwrite would not replace the table's content): use .mode(\"append\"), and "
                          "delete the table first to replace what it holds")


class ExportWriter(DataSourceArrowWriter):
    """Receives Arrow record batches (cheaper than one Row object per entry)."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_partition(self.settings, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        write_report(self.settings.report_dir, total(messages))


class ExportStreamWriter(STREAM_ARROW_WRITER or DataSourceStreamWriter):  # type: ignore[misc]
    """The streaming sink's writer: Arrow record batches (Spark 4.1+'s ``DataSourceStreamArrowWriter``; on
    Spark 4.0 this class is not used, :class:`ExportStreamRowWriter` is)."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        return write_partition(self.settings, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        write_report(self.settings.report_dir, total(messages), batchId)


#: rows per Arrow batch the row-based writer builds
ROWS_PER_BATCH = 4096


class ExportStreamRowWriter(DataSourceStreamWriter):
    """The streaming sink's writer on Spark 4.0, which has no Arrow stream writer: it takes Spark's rows and
    writes them as the Arrow writer does, in batches of ``ROWS_PER_BATCH`` rows."""

    def __init__(self, settings: SinkSettings, arrow_schema: pa.Schema) -> None:
        self.settings, self.arrow_schema = settings, arrow_schema

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return write_partition(self.settings, rows_to_batches(iterator, self.arrow_schema))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        write_report(self.settings.report_dir, total(messages), batchId)


def rows_to_batches(rows: Iterator[Row], schema: pa.Schema, size: int = ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """Spark rows as Arrow record batches of at most ``size`` rows of ``schema``."""
    names = schema.names
    while chunk := list(itertools.islice(rows, size)):
        columns = [[row[i] for row in chunk] for i in range(len(names))]
        yield pa.record_batch([pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)],
                              schema=schema)
