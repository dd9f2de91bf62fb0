"""Reading a producer table's rows whole, each at one version, and what a snapshot makes of them.

A row of a producer table holds its version (the seq of its last commit, row transactions' ``!tx:v``), its own
cells and maybe outbox cells a crashed producer left. :func:`read_rows` reads a range of rows with an isolated
scan (the gateway's ``isolated`` scan option: a row is never read half before and half after a commit) and
hands them over in chunks. :func:`snapshot_exports` turns a chunk into the exports the rows imply, each at
seq = its row's version, as the Arrow batch an exporter takes (columns ``key``, ``value``, ``seq``, and ``row``:
the index of the row in the chunk, so each destination cell can be traced to its row).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from connector.accumulo import Cell, Connection, Range
from connector.serializers import Serializer
from connector.transactions import TxLayout
from connector.transactions.layout import parse_version

#: rows handed over at a time (bounded memory; one exporter call each)
ROWS_PER_CHUNK = 2_000
#: cells per scan page
SCAN_PAGE = 10_000


@dataclass
class SnapRow:
    """One row as read: its version (the seq of its last commit; for a row without a version cell, the newest
    timestamp of its cells), its own cells in key order, and how many outbox cells it still holds."""

    row: bytes
    version: int = 0
    cells: list[Cell] = field(default_factory=list)
    outbox: int = 0


def read_rows(conn: Connection, table: str, rows: Range, layout: TxLayout,
              chunk_rows: int = ROWS_PER_CHUNK) -> Iterator[list[SnapRow]]:
    """The rows of ``rows`` in ``table``, whole and each at one version, ``chunk_rows`` at a time. Rows with
    no cell of their own (only a version: deleted on A) come back with no cells."""
    chunk: list[SnapRow] = []
    current: SnapRow | None = None
    vf, vq, of = layout.version_family, layout.version_qualifier, layout.outbox_family
    for page in conn.scan_batches(table, rows, batch_size=SCAN_PAGE, isolated=True):
        columns = [page.column(i).to_pylist() for i in range(6)]
        for row, cf, cq, cv, ts, value in zip(*columns, strict=True):
            if current is None or row != current.row:
                if current is not None:
                    chunk.append(_finished(current))
                    if len(chunk) >= chunk_rows:
                        yield chunk
                        chunk = []
                current = SnapRow(row)
            if cf == vf and cq == vq:
                current.version = parse_version(value)
            elif cf == of:
                current.outbox += 1
            else:
                current.cells.append(Cell(row, cf, cq, cv, ts, value))
    if current is not None:
        chunk.append(_finished(current))
    if chunk:
        yield chunk


def _finished(row: SnapRow) -> SnapRow:
    if not row.version and row.cells:  # not a row transaction's: its newest cell stands for its version
        row.version = max(c.ts for c in row.cells)
    return row


EXPORT_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("seq", pa.int64()),
                           ("row", pa.int32())])


@dataclass
class SnapshotFailure:
    """A row whose snapshot failed (the function raised, or a serializer refused what it returned)."""

    row: bytes
    reason: str


def snapshot_exports(rows: Sequence[SnapRow], snapshot: object, key_serializer: Serializer,
                     value_serializer: Serializer) -> tuple[pa.RecordBatch, list[SnapshotFailure]]:
    """The exports ``snapshot`` says the rows imply, serialized, each at seq = its row's version; and the
    rows whose snapshot failed (their exports are left out: the rest of the chunk goes on)."""
    keys: list[bytes] = []
    values: list[bytes] = []
    seqs: list[int] = []
    index: list[int] = []
    failures: list[SnapshotFailure] = []
    for i, r in enumerate(rows):
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
            index.append(i)
    batch = pa.record_batch([pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                             pa.array(seqs, pa.int64()), pa.array(index, pa.int32())], schema=EXPORT_SCHEMA)
    return batch, failures
