"""The ``accumulo-export`` Spark data source (a sink): exports rows into a destination Accumulo table.

Two input shapes:

* rows of the ``export-queue`` source (``key``, ``value``, ``seq``, ``entry_row``, ``entry_ts``, ...) with
  the ``queue.*`` and ``source.*`` options: the drain. Each partition is exported in batches of at most
  ``buffer_bytes``, and after each ``export()`` returned the batch's entries are deleted from the queue,
  each at its own timestamp. Malformed entries are dead-lettered (or, with ``fail_fast``, the task fails
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
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from connector.export import AccumuloExporter, DeleteMode, SequencedExport
from connector.export.shared import shared_exporter
from connector.queue import DrainStats
from connector.queue.drain import EntryProcessor
from connector.queue.reader import ENTRY_SCHEMA

from .cell_frames import columnar_cells, export_cell_batches
from .options import GatewayOptions, OptionError, as_dict, bool_option, int_option, queue_config

DEST_PREFIX = "dest."
SOURCE_PREFIX = "source."
DEFAULT_BUFFER = 1 << 20


@dataclass
class ExportCommitMessage(WriterCommitMessage):
    """What one task did: its drain counters only, so it is small and pickles anywhere."""

    stats: DrainStats


@dataclass(frozen=True)
class SinkSettings:
    dest: GatewayOptions
    table: str
    translator: str
    delete_mode: str
    create_table: bool
    buffer_bytes: int
    fail_fast: bool
    source: GatewayOptions | None
    queue: Any  # QueueConfig | None
    report_dir: str | None

    @classmethod
    def parse(cls, options: dict[str, str]) -> SinkSettings:
        has_queue = "queue.table" in options
        try:
            mode = DeleteMode(options.get("delete_mode") or "delete").value
        except ValueError:
            bad = options["delete_mode"]
            raise OptionError(f"option 'delete_mode' must be delete or tombstone, not {bad!r}") from None
        return cls(
            dest=GatewayOptions.parse(options, DEST_PREFIX),
            table=options.get("table") or _missing("table"),
            translator=options.get("translator") or "difference",
            delete_mode=mode,
            create_table=bool_option(options, "create_table", True),
            buffer_bytes=int_option(options, "buffer_bytes", DEFAULT_BUFFER, minimum=1),
            fail_fast=bool_option(options, "fail_fast", False),
            source=GatewayOptions.parse(options, SOURCE_PREFIX) if has_queue else None,
            queue=queue_config(options) if has_queue else None,
            report_dir=options.get("report_dir") or None,
        )

    def exporter(self) -> AccumuloExporter:
        return shared_exporter(self.dest, self.table, self.translator, self.delete_mode, self.create_table)


def _missing(name: str) -> str:
    raise OptionError(f"option {name!r} is required")


def write_partition(settings: SinkSettings, batches: Iterator[pa.RecordBatch]) -> ExportCommitMessage:
    """Export one partition; in drain mode, delete each batch's queue entries after its export returned."""
    exporter = settings.exporter()
    if settings.queue is not None:
        assert settings.source is not None
        processor = EntryProcessor(settings.source.shared(), settings.queue, exporter,
                                   buffer_bytes=settings.buffer_bytes, fail_fast=settings.fail_fast)
        return ExportCommitMessage(processor.process_batches(_queue_entries(batches)))
    if settings.translator == "cells":  # a DataFrame of cells: columnar unless its column types need Python
        first = next(batches, None)
        if first is None:
            return ExportCommitMessage(DrainStats())
        batches = itertools.chain([first], batches)
        if columnar_cells(first.schema):
            return ExportCommitMessage(export_cell_batches(exporter, settings.buffer_bytes, batches))
    return _export_plain_rows(exporter, settings.buffer_bytes, (r for b in batches for r in b.to_pylist()))


def _queue_entries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The entry columns of the export-queue source's batches, renamed as the drain takes them."""
    for b in batches:
        names = b.schema.names
        if ("entry_row" not in names or "entry_ts" not in names or b.column("entry_row").null_count
                or b.column("entry_ts").null_count):
            raise OptionError("drain mode needs the entry_row and entry_ts columns of the export-queue source")
        yield pa.record_batch([b.column("entry_row"), b.column("entry_ts"), b.column("value")], schema=ENTRY_SCHEMA)


def _export_plain_rows(exporter: AccumuloExporter, buffer_bytes: int,
                       rows: Iterator[dict[str, Any]]) -> ExportCommitMessage:
    started = time.monotonic()
    stats = DrainStats()
    batch: list[SequencedExport] = []
    size = 0
    for record in rows:
        if record.get("seq") is None:
            raise OptionError("rows written to accumulo-export need a non-null 'seq' column")
        seq = int(record.pop("seq"))
        value: Any = record
        if "row" not in record and isinstance(record.get("value"), str | bytes | bytearray):
            value = json.loads(record["value"])
        batch.append(SequencedExport(record.get("key"), value, seq))
        size += len(repr(record))
        stats.entries += 1
        if size >= buffer_bytes:
            exporter.export(batch)
            stats.exported += len(batch)
            stats.batches += 1
            batch, size = [], 0
    if batch:
        exporter.export(batch)
        stats.exported += len(batch)
        stats.batches += 1
    stats.seconds = time.monotonic() - started
    return ExportCommitMessage(stats)


def total(messages: list[Any]) -> DrainStats:
    return sum((m.stats for m in messages if isinstance(m, ExportCommitMessage)), DrainStats())


def write_report(report_dir: str | None, summary: DrainStats, batch_id: int | None = None,
                 wall_seconds: float | None = None) -> None:
    if not report_dir:
        return
    os.makedirs(report_dir, exist_ok=True)
    name = f"batch-{batch_id:08d}.json" if batch_id is not None else f"job-{uuid.uuid4().hex}.json"
    tmp = os.path.join(report_dir, f".{name}.tmp")
    with open(tmp, "w") as f:
        json.dump(dict(asdict(summary), batch_id=batch_id, at=time.time(), wall_seconds=wall_seconds), f)
    os.replace(tmp, os.path.join(report_dir, name))


class AccumuloExportDataSource(DataSource):
    """``df.write.format("accumulo-export")`` and ``df.writeStream.format("accumulo-export")``.

    Options: ``dest.host``, ``dest.port``, ``dest.secret_file`` or ``dest.secret_env``; ``table``;
    ``translator`` (difference, replicator, cells, module:callable); ``delete_mode`` (delete, tombstone);
    ``create_table``; ``buffer_bytes``; ``fail_fast``; ``report_dir``; and for draining the queue it was
    read from: ``source.*`` and ``queue.*`` as for the ``export-queue`` source.
    """

    @classmethod
    def name(cls) -> str:
        return "accumulo-export"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return ExportWriter(SinkSettings.parse(as_dict(self.options)))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return ExportStreamWriter(SinkSettings.parse(as_dict(self.options)))


class ExportWriter(DataSourceArrowWriter):
    """Receives Arrow record batches (cheaper than one Row object per entry)."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_partition(self.settings, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        write_report(self.settings.report_dir, total(messages))


class ExportStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_partition(self.settings, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        write_report(self.settings.report_dir, total(messages), batchId)
