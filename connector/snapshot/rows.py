"""Reading a producer table's rows whole, each at one version, as Arrow batches; and what a per-row snapshot
function makes of them.

A row of a producer table holds its version (the seq of its last commit, row transactions' ``!tx:v``), its own
cells and maybe outbox cells a crashed producer left. :func:`read_row_chunks` reads a range of rows with an
isolated scan (the gateway's ``isolated`` scan option: a row is never read half before and half after a commit)
and hands them over in chunks of whole rows: the rows' own cells as one batch of :data:`ROWS_SCHEMA` (each cell
with its row's version), every row read with its version, and the outbox cells counted. Nothing loops over
cells in Python here; a per-row snapshot function is fed by :meth:`RowChunk.snap_rows`, and
:func:`snapshot_exports` turns its results into a batch of exports.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Cell, Connection, Range
from connector.serializers import Serializer
from connector.transactions import TxLayout
from connector.transactions.layout import parse_version

#: cells handed over at a time at most (bounded memory; a row larger than this comes whole, alone)
CHUNK_CELLS = 50_000
#: cells per scan page
SCAN_PAGE = 10_000

#: a chunk's cells, as a batch snapshot function receives them: whole rows, key order, each cell with the
#: version of its row (the version and outbox cells of row transactions left out)
ROWS_SCHEMA = pa.schema([("row", pa.binary()), ("cf", pa.binary()), ("cq", pa.binary()), ("cv", pa.binary()),
                         ("ts", pa.int64()), ("value", pa.binary()), ("version", pa.int64())])


@dataclass
class SnapRow:
    """One row as a per-row snapshot function sees it: its version (the seq of its last commit; for a row
    without a version cell, the newest timestamp of its cells), its own cells in key order."""

    row: bytes
    version: int = 0
    cells: list[Cell] = field(default_factory=list)
    outbox: int = 0


@dataclass(frozen=True)
class RowChunk:
    """Whole rows of a producer table: ``cells`` (:data:`ROWS_SCHEMA`, the rows' own cells), ``rows`` every row
    read (rows deleted on A, with a version and no cell, too) and their ``versions``, ``outbox`` cells counted."""

    cells: pa.RecordBatch
    rows: pa.Array
    versions: pa.Array
    outbox: int = 0

    def snap_rows(self) -> list[SnapRow]:
        """The rows with cells of their own, as :class:`SnapRow` objects (the per-row functions' input)."""
        if not self.cells.num_rows:
            return []
        columns = [self.cells.column(name).to_pylist() for name in ("row", "cf", "cq", "cv", "ts", "value")]
        out: list[SnapRow] = []
        for row, cf, cq, cv, ts, value, version in zip(*columns, self.cells.column("version").to_pylist(),
                                                      strict=True):
            if not out or out[-1].row != row:
                out.append(SnapRow(row, version))
            out[-1].cells.append(Cell(row, cf, cq, cv, ts, value))
        return out


def read_row_chunks(conn: Connection, table: str, rows: Range, layout: TxLayout,
                    chunk_cells: int | None = None) -> Iterator[RowChunk]:
    """The rows of ``rows`` in ``table``, whole and each at one version, about ``chunk_cells`` cells (default
    :data:`CHUNK_CELLS`) at a time."""
    chunk_cells = chunk_cells or CHUNK_CELLS
    pending: list[pa.RecordBatch] = []
    size = 0
    for page in conn.scan_batches(table, rows, batch_size=SCAN_PAGE, isolated=True):
        if not page.num_rows:
            continue
        pending.append(page)
        size += page.num_rows
        if size < chunk_cells:
            continue
        cells = pa.Table.from_batches(pending).combine_chunks()
        row = cells.column("row").chunk(0)
        cut = pc.index(row, row[-1]).as_py()  # the last row may go on in the next page: keep it for then
        if cut > 0:
            yield _chunk(cells.slice(0, cut), layout)
            rest = cells.slice(cut)
            pending, size = rest.to_batches(), rest.num_rows
    if pending:
        yield _chunk(pa.Table.from_batches(pending).combine_chunks(), layout)


def _chunk(cells: pa.Table, layout: TxLayout) -> RowChunk:
    """Whole rows' cells as scanned: the version and outbox cells taken out, each own cell given its version."""
    row = cells.column("row").combine_chunks()
    n = len(row)
    change = np.asarray(pc.not_equal(row.slice(1), row.slice(0, n - 1)).to_numpy(zero_copy_only=False), dtype=bool)
    starts = np.concatenate([[0], np.flatnonzero(change) + 1])
    run = np.concatenate([[0], np.cumsum(change)])
    cf, cq = cells.column("cf").combine_chunks(), cells.column("cq").combine_chunks()
    is_version = np.asarray(pc.and_(pc.equal(cf, pa.scalar(layout.version_family, pa.binary())),
                                    pc.equal(cq, pa.scalar(layout.version_qualifier, pa.binary())))
                            .to_numpy(zero_copy_only=False), dtype=bool)
    is_outbox = np.asarray(pc.equal(cf, pa.scalar(layout.outbox_family, pa.binary())).to_numpy(zero_copy_only=False),
                           dtype=bool)
    own = ~(is_version | is_outbox)
    versions = np.zeros(len(starts), dtype=np.int64)
    if is_version.any():
        versions[run[is_version]] = _versions(cells.column("value").combine_chunks().filter(pa.array(is_version)))
    ts = cells.column("ts").combine_chunks().to_numpy()
    newest = np.maximum.reduceat(np.where(own, ts, 0), starts)  # a row without a version cell: its newest cell
    versions = np.where(versions == 0, newest, versions)
    mine = pa.array(own)
    batch = cells.filter(mine).append_column("version", pa.array(versions[run[own]], pa.int64()))
    batches = batch.select(ROWS_SCHEMA.names).cast(ROWS_SCHEMA).combine_chunks().to_batches()
    own_cells = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=ROWS_SCHEMA)
    return RowChunk(own_cells, row.take(pa.array(starts)), pa.array(versions, pa.int64()), int(is_outbox.sum()))


def _versions(values: pa.Array) -> np.ndarray:
    """The seqs version cells hold (``"<seq>"`` or ``"<seq> <token> ..."``), parsed together; a cell that is not
    a version raises as :func:`~connector.transactions.layout.parse_version` does."""
    try:
        first = pc.list_element(pc.split_pattern(values.cast(pa.string()), " ", max_splits=1), 0)
        return np.asarray(first.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return np.array([parse_version(v) for v in values.to_pylist()], dtype=np.int64)


#: the exports of a chunk of rows: serialized key and value, the seq (= the version of the row they derive
#: from) and that row
EXPORT_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("seq", pa.int64()),
                           ("source", pa.binary())])


@dataclass
class SnapshotFailure:
    """A row whose snapshot failed (the function raised, or a serializer refused what it returned)."""

    row: bytes
    reason: str


def snapshot_exports(rows: Sequence[SnapRow], snapshot: object, key_serializer: Serializer,
                     value_serializer: Serializer) -> tuple[pa.RecordBatch, list[SnapshotFailure]]:
    """The exports a per-row ``snapshot`` says the rows imply, serialized, each at seq = its row's version; and
    the rows whose snapshot failed (their exports are left out: the rest of the chunk goes on)."""
    keys: list[bytes] = []
    values: list[bytes] = []
    seqs: list[int] = []
    sources: list[bytes] = []
    failures: list[SnapshotFailure] = []
    for r in rows:
        if not r.cells:
            continue
        try:
            implied = [(key_serializer.dumps(k), value_serializer.dumps(v))
                       for k, v in snapshot(r.row, r.cells)]  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - the user's function: named per row, the rest goes on
            failures.append(SnapshotFailure(r.row, f"{type(exc).__name__}: {exc}"))
            continue
        for key, value in implied:
            keys.append(key)
            values.append(value)
            seqs.append(r.version)
            sources.append(r.row)
    batch = pa.record_batch([pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                             pa.array(seqs, pa.int64()), pa.array(sources, pa.binary())], schema=EXPORT_SCHEMA)
    return batch, failures
