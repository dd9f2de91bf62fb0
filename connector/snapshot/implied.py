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

from connector.accumulo import Connection, Range
from connector.accumulo.cells import Key
from connector.counters import FieldCounters
from connector.export import AccumuloExporter
from connector.queue import QueueConfig

from .functions import SnapshotSource
from .rows import SnapRow, read_rows, snapshot_exports

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


def implied_updates(rows: Sequence[SnapRow], source: SnapshotSource, queue: QueueConfig,
                    exporter: AccumuloExporter) -> Implied:
    """For a chunk of rows: the exports their snapshots give (``key``, ``value``, ``seq``, ``row`` index),
    the cells those become (the columns ``BatchWriter.add_cells`` takes, plus ``source``: the A row each
    derives from), the counters, and the rows that failed (their snapshot raised, or one of their exports
    could not be translated: what they imply is unknown, so their cells are missing or partial)."""
    key_serde, value_serde = queue.serializers()
    exports, failures = snapshot_exports(rows, source.snapshot, key_serde, value_serde)
    updates, untranslatable = exporter.updates(exports.select(["key", "value", "seq"]),
                                               key_serializer=queue.key_serializer,
                                               value_serializer=queue.value_serializer)
    row_of = pc.take(exports.column("row"), updates.column("entry"))
    names = pa.array([r.row for r in rows], pa.binary())
    updates = updates.drop_columns(["entry"]).append_column("source", pc.take(names, row_of))
    stats = SnapshotStats(rows=len(rows), exports=exports.num_rows - len(untranslatable), cells=updates.num_rows,
                          failed=len(failures) + len(untranslatable), outbox=sum(r.outbox for r in rows))
    untranslated = [rows[exports.column("row")[u.entry].as_py()].row for u in untranslatable]
    stats.errors = ([f"row {f.row[:100]!r}: snapshot failed: {f.reason}" for f in failures]
                    + [f"row {row[:100]!r}: {u.reason}" for row, u in zip(untranslated, untranslatable, strict=True)]
                    )[:SnapshotStats.MAX_ERRORS]
    return exports, updates, stats, [f.row for f in failures] + untranslated


def implied_chunks(conn: Connection, table: str, bounds: Bounds, source: SnapshotSource, queue: QueueConfig,
                   exporter: AccumuloExporter) -> Iterator[Implied]:
    """:func:`implied_updates` of every chunk of rows of one tablet range of the producer table."""
    rows = bounds_range(bounds)
    for chunk in read_rows(conn, table, rows, source.layout):
        started = time.monotonic()
        exports, updates, stats, failed = implied_updates(chunk, source, queue, exporter)
        stats.seconds = time.monotonic() - started
        yield exports, updates, stats, failed
