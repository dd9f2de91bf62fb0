"""The ``accumulo-export`` sink's columnar path for plain DataFrames of cells (translator ``cells``).

A DataFrame with columns ``row``, ``cf``, ``cq``, ``value`` (string or binary), ``seq`` (an integer) and
optionally ``cv`` (string or binary; null: none) and ``delete`` (boolean) reaches the sink's writer as
Arrow batches. Each batch becomes cell changes with Arrow compute (no Python object per row), is checked
as a whole, and goes to ``AccumuloExporter.export_changes`` in batches of at most ``buffer_bytes`` data bytes:
every cell at ts = its row's ``seq``, a null ``value`` or a true ``delete`` as a delete, as the ``cells``
translator does row by row. Other shapes (numbers as cell text, say) keep the row-by-row path.

A bad cell (null row, family or qualifier, an empty row, a negative seq, a bad visibility) fails the
task with ``BatchTranslationError`` naming the problem, before anything of its batch is written; batches
written before it stay written (they are idempotent: each cell at ts = seq). A null ``seq`` fails it with
``OptionError``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.export import AccumuloExporter
from connector.export.core import BatchTranslationError
from connector.export.native_translate import CHANGE_SCHEMA
from connector.queue import DrainStats
from connector.queue.batches import cut_by_bytes, data_bytes

from .options import OptionError

_TEXT = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())
_KEY = ("row", "cf", "cq")


def columnar_cells(schema: pa.Schema) -> bool:
    """Whether rows of this schema take the columnar path (see the module's documentation)."""
    def has(name: str, ok: object) -> bool:
        i = schema.get_field_index(name)  # -1 when missing or duplicated
        return i >= 0 and bool(ok(schema.field(i).type))  # type: ignore[operator]

    def optional(name: str, ok: object) -> bool:
        return name not in schema.names or has(name, ok)

    return (all(has(name, lambda t: t in _TEXT) for name in (*_KEY, "value"))
            and has("seq", pa.types.is_integer) and optional("cv", lambda t: t in _TEXT)
            and optional("delete", pa.types.is_boolean))


def cell_columns(batch: pa.RecordBatch, first: int = 0) -> pa.RecordBatch:
    """The batch's cells as columns row, cf, cq, cv, value (binary; value null for a delete) and seq (int64).
    Raises ``BatchTranslationError`` naming every bad row (by its position ``first + i`` in the task's
    input) and ``OptionError`` for a null seq."""
    n = batch.num_rows
    row, cf, cq, value = (pc.cast(batch.column(name), pa.binary()) for name in (*_KEY, "value"))
    if "cv" in batch.schema.names:
        cv = pc.fill_null(pc.cast(batch.column("cv"), pa.binary()), pa.scalar(b"", pa.binary()))
    else:
        cv = pc.fill_null(pa.nulls(n, pa.binary()), pa.scalar(b"", pa.binary()))
    if "delete" in batch.schema.names:
        value = pc.if_else(pc.fill_null(batch.column("delete"), False), pa.scalar(None, pa.binary()), value)
    seq = pc.cast(batch.column("seq"), pa.int64())
    if seq.null_count:
        raise OptionError("rows written to accumulo-export need a non-null 'seq' column")
    failures: dict[int, str] = {}
    checks = [(pc.is_null(col), f"column {name!r} is null") for name, col in zip(_KEY, (row, cf, cq), strict=True)]
    checks.append((pc.equal(pc.binary_length(row), 0), "column 'row' is empty"))
    checks.append((pc.less(seq, 0), "column 'seq' must be in [0, 2**63-1]"))
    for mask, reason in checks:
        if pc.any(mask).as_py():
            for i in pc.indices_nonzero(mask).to_pylist():  # only the bad rows: they are rare
                failures.setdefault(first + i, f"{reason} ({_describe(row, seq, i)})")
    if failures:
        raise BatchTranslationError(failures)
    return pa.record_batch([row, cf, cq, cv, value, seq], names=["row", "cf", "cq", "cv", "value", "seq"])


def _describe(row: pa.Array, seq: pa.Array, i: int) -> str:
    return f"row {row[i].as_py()!r}, seq {seq[i].as_py()}"


def export_cell_batches(exporter: AccumuloExporter, buffer_bytes: int, batches: Iterable[pa.RecordBatch]) -> DrainStats:
    """Export a task's batches of cells (see the module's documentation), in batches of at most ``buffer_bytes``
    data bytes (:func:`~connector.queue.batches.cut_by_bytes`, as the drain's); its counters."""
    started = time.monotonic()
    stats = DrainStats()

    def cells() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                columns = cell_columns(batch, stats.entries)
                stats.entries += batch.num_rows
                stats.bytes += data_bytes(columns)
                yield columns

    for cut in cut_by_bytes(cells(), buffer_bytes):
        _write(exporter, cut, stats)
    stats.seconds = time.monotonic() - started
    return stats


def _write(exporter: AccumuloExporter, cells: pa.RecordBatch, stats: DrainStats) -> None:
    n = cells.num_rows
    changes = pa.record_batch([pa.array(np.arange(n, dtype=np.int32)),
                               *(cells.column(name) for name in ("row", "cf", "cq", "cv", "value"))],
                              schema=CHANGE_SCHEMA)
    exporter.export_changes(changes, cells.column("seq"))
    stats.exported += n
    stats.batches += 1
