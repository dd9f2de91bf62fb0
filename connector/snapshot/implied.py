"""What A's rows imply on B: the cells a range of a producer table becomes, each at its row's version.

``T(S(rows))``: each row's snapshot exports (:func:`~connector.snapshot.rows.snapshot_exports`), translated by
the queue's translator through an :class:`~connector.export.AccumuloExporter` (natively for the built-in
translators), every cell at timestamp = the version of the row it derives from. The bootstrap writes them;
verify compares them with what B holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import UPDATE_SCHEMA, Connection, Range
from connector.accumulo.cells import Key
from connector.counters import FieldCounters
from connector.export import AccumuloExporter
from connector.export.core import EntryFailure
from connector.queue import QueueConfig

from .errors import SnapshotError
from .functions import BatchSnapshot, CombineSnapshot, SnapshotSource, is_batch_snapshot
from .rows import EXPORT_SCHEMA, RowChunk, SnapshotFailure, read_row_chunks, snapshot_exports

Bounds = tuple[bytes | None, bytes | None]


@dataclass
class SnapshotStats(FieldCounters):
    """What a bootstrap (or the A side of a verify) did: ``rows`` read, ``exports`` their snapshots gave,
    ``cells`` written (or implied), ``failed`` rows or exports that could not be (their first reasons in
    ``errors``), ``outbox`` outbox cells still waiting in the rows read, ``seconds`` of work."""

    rows: int = 0
    exports: int = 0
    cells: int = 0
    failed: int = 0
    outbox: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def tablet_bounds(splits: Sequence[bytes], start: bytes | None = None, stop: bytes | None = None) -> list[Bounds]:
    """The tablets of a table with these split rows as [first row key, bound) pairs, clipped to [start,
    stop); None is unbounded. A tablet ends at its split row inclusive: it spans [previous split + 0x00,
    split + 0x00)."""
    edges: list[bytes | None] = [None, *(s + b"\x00" for s in sorted(splits)), None]
    out = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        lo = start if lo is None else lo if start is None else max(lo, start)
        hi = hi if stop is None else (stop if hi is None else min(hi, stop))
        if lo is None or hi is None or lo < hi:
            out.append((lo, hi))
    return out


def bounds_range(bounds: Bounds) -> Range:
    start, stop = bounds
    return Range(None if start is None else Key(start), True, None if stop is None else Key(stop), False)


def source_bounds(conn: Connection, table: str, source: SnapshotSource) -> list[Bounds]:
    """The tablets of the producer table that hold its producer rows, in row order."""
    start = stop = None
    if source.rows is not None:
        start = None if source.rows.start is None else source.rows.start.row
        stop = None if source.rows.stop is None else source.rows.stop.row
    return tablet_bounds(conn.list_splits(table), start, stop)


Implied = tuple[pa.RecordBatch, pa.RecordBatch, SnapshotStats, list[bytes]]
#: implied cells: what ``BatchWriter.add_cells`` takes, plus ``source``, the A row each derives from
IMPLIED_SCHEMA = pa.schema([*UPDATE_SCHEMA, ("source", pa.binary())])
_CELL_COLUMNS = ("row", "cf", "cq", "value", "source")
_EXPORT_COLUMNS = ("key", "value", "source")


def implied_updates(chunk: RowChunk, source: SnapshotSource, queue: QueueConfig,
                    exporter: AccumuloExporter) -> Implied:
    """For a chunk of rows: the exports their snapshots give (:data:`~connector.snapshot.rows.EXPORT_SCHEMA`;
    empty when a batch snapshot gives cells), the cells those become (:data:`IMPLIED_SCHEMA`), the counters,
    and the rows that failed (their snapshot raised, or one of their exports could not be translated: what
    they imply is unknown, so their cells are missing or partial)."""
    stats = SnapshotStats(rows=len(chunk.rows), outbox=chunk.outbox)
    batch = _batch_form(source, queue, exporter)
    if batch is not None:
        exports, cells, failures = _batch_snapshot(batch, chunk)
    else:
        key_serde, value_serde = queue.serializers()
        exports, failures = snapshot_exports(chunk.snap_rows(), source.snapshot, key_serde, value_serde)
        cells = None
    untranslatable: list[EntryFailure] = []
    parts: list[pa.RecordBatch] = [] if cells is None else [cells]
    if exports.num_rows:
        translated, untranslatable = exporter.updates(exports.select(["key", "value", "seq"]),
                                                      key_serializer=queue.key_serializer,
                                                      value_serializer=queue.value_serializer)
        parts.append(translated.drop_columns(["entry"]).append_column(
            "source", pc.take(exports.column("source"), translated.column("entry"))))
    updates = _one_batch(pa.Table.from_batches(parts, schema=IMPLIED_SCHEMA), IMPLIED_SCHEMA)
    untranslated = [exports.column("source")[u.entry].as_py() for u in untranslatable]
    stats.exports = exports.num_rows - len(untranslatable)
    stats.cells = updates.num_rows
    stats.failed = len(failures) + len(untranslatable)
    stats.errors = ([f"row {f.row[:100]!r}: snapshot failed: {f.reason}" for f in failures]
                    + [f"row {row[:100]!r}: {u.reason}" for row, u in zip(untranslated, untranslatable, strict=True)]
                    )[:SnapshotStats.MAX_ERRORS]
    return exports, updates, stats, [f.row for f in failures] + untranslated


def _batch_form(source: SnapshotSource, queue: QueueConfig, exporter: AccumuloExporter) -> BatchSnapshot | None:
    """The snapshot's batch form: the user's, or a built-in one where it gives the per-row form's bytes."""
    fn = source.snapshot
    if isinstance(fn, CombineSnapshot):
        return fn.batch(queue, exporter.translator)
    return fn if is_batch_snapshot(fn) else None  # type: ignore[return-value]


def _batch_snapshot(fn: object, chunk: RowChunk) -> tuple[pa.RecordBatch, pa.RecordBatch | None,
                                                           list[SnapshotFailure]]:
    """Run a batch snapshot on a chunk: (exports, cells, failures); every row of a chunk on which it raised
    fails. ``SnapshotError`` for a result that is not one of the two shapes."""
    no_exports = pa.RecordBatch.from_pylist([], schema=EXPORT_SCHEMA)
    if not chunk.cells.num_rows:
        return no_exports, None, []
    try:
        out = fn(chunk.cells)  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the user's function: its rows are named as failed, the rest goes on
        reason = f"{type(exc).__name__}: {exc}"
        return no_exports, None, [SnapshotFailure(r, reason) for r in pc.unique(chunk.cells.column("row")).to_pylist()]
    name = getattr(fn, "__qualname__", repr(fn))
    if isinstance(out, pa.Table):
        out = out.combine_chunks()
    elif not isinstance(out, pa.RecordBatch):
        raise SnapshotError(f"snapshot {name}: a batch snapshot must return a pyarrow RecordBatch or Table, not "
                            f"{type(out).__name__}")
    shape = _EXPORT_COLUMNS if "key" in out.column_names else _CELL_COLUMNS
    missing = [c for c in shape if c not in out.column_names]
    if missing:
        raise SnapshotError(f"snapshot {name}: its result lacks the column(s) {', '.join(missing)} (cells need "
                            f"{', '.join(_CELL_COLUMNS)}; exports need {', '.join(_EXPORT_COLUMNS)})")

    def column(c: str) -> pa.Array:
        data = out.column(c)
        return (data.combine_chunks() if isinstance(data, pa.ChunkedArray) else data).cast(pa.binary())

    sources = column("source")
    at = pc.index_in(sources, value_set=chunk.rows)
    if at.null_count:
        stray = sources.filter(pc.is_null(at))[0].as_py()
        raise SnapshotError(f"snapshot {name}: its result names source row {stray[:100]!r}, which is not among "
                            "the rows it was given")
    seq = pc.take(chunk.versions, at)
    if shape is _EXPORT_COLUMNS:
        return pa.record_batch([column("key"), column("value"), seq, sources], schema=EXPORT_SCHEMA), None, []
    n = len(sources)
    cv = column("cv") if "cv" in out.column_names else pa.repeat(pa.scalar(b"", pa.binary()), n)
    cells = pa.record_batch([column("row"), column("cf"), column("cq"), cv, seq, column("value"),
                             pa.repeat(pa.scalar(False), n), sources], schema=IMPLIED_SCHEMA)
    return no_exports, cells, []


def _one_batch(table: pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=schema)


def implied_chunks(conn: Connection, table: str, bounds: Bounds, source: SnapshotSource, queue: QueueConfig,
                   exporter: AccumuloExporter) -> Iterator[Implied]:
    """:func:`implied_updates` of every chunk of rows of one tablet range of the producer table."""
    rows = bounds_range(bounds)
    for chunk in read_row_chunks(conn, table, rows, source.layout):
        started = time.monotonic()
        exports, updates, stats, failed = implied_updates(chunk, source, queue, exporter)
        stats.seconds = time.monotonic() - started
        yield exports, updates, stats, failed
