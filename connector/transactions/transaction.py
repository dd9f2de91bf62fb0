"""One attempt of a row transaction: the row as read (:class:`RowState`) and the :class:`Transaction` the
user's function reads it through and buffers its writes, exports and updates in."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from connector.accumulo import Cell, Connection, Mutation, Range
from connector.accumulo.mutation import BytesLike, to_bytes

from .layout import MalformedOutboxError, OutboxCell, TxLayout, parse_outbox, version_value
from .targets import Targets


@dataclass
class RowState:
    """A row as read: its version cell, its own cells (key order) and any outbox cells left unrelayed."""

    row: bytes
    version: bytes | None = None
    cells: list[Cell] = field(default_factory=list)
    outbox: list[OutboxCell] = field(default_factory=list)

    def after(self, tx: Transaction) -> RowState:
        """The row as ``tx`` leaves it (for the next transaction of the same row in one commit)."""
        cells = {(c.cf, c.cq, c.cv): c for c in self.cells}
        for u in tx._cells.updates:
            if u.delete:
                cells.pop((u.cf, u.cq, u.cv), None)
            else:
                cells[(u.cf, u.cq, u.cv)] = Cell(self.row, u.cf, u.cq, u.cv, tx.seq, u.value)
        return RowState(self.row, version_value(tx.seq), sorted(cells.values()), self.outbox)


def read_rows(conn: Connection, table: str, layout: TxLayout, rows: list[bytes]) -> dict[bytes, RowState]:
    """The state of each row (rows without cells come back empty). A read cut short by a lost connection (a
    gateway killed mid-read) goes on (a scan resumes; a batch read is read again whole)."""
    states = {r: RowState(r) for r in rows}
    if len(rows) == 1:
        cells: Iterable[Cell] = conn.scan(table, Range.exact_row(rows[0]), batch_size=1000)
    else:
        # cells of one row arrive in key order (version first), rows interleaved
        cells = conn.batch_read(table, [Range.exact_row(r) for r in rows], batch_size=max(1000, 4 * len(rows)))
    for cell in cells:
        state = states[cell.row]
        if cell.cf == layout.version_family:
            if cell.cq == layout.version_qualifier:
                state.version = cell.value
        elif cell.cf == layout.outbox_family:
            with contextlib.suppress(MalformedOutboxError):  # left for `tx relay`/`tx status` to report
                state.outbox.append(parse_outbox(cell.cq, cell.value, cell.ts))
        else:
            state.cells.append(cell)
    return states


class Transaction:
    """One attempt of a row's read-modify-write, given to the user's function. Reads see the row as of the
    start; writes and outbox entries are buffered and committed together when the function returns."""

    def __init__(self, state: RowState, seq: int, layout: TxLayout, targets: Targets) -> None:
        self._state, self._layout, self._targets = state, layout, targets
        #: the commit's sequence number: the timestamp of every cell it writes and the seq of its exports
        self.seq = seq
        self._cells = Mutation(state.row)  # the row's own cells, checked as they are buffered
        self._outbox: list[OutboxCell] = []
        self._used: list[Any] = []

    @property
    def row(self) -> bytes:
        return self._state.row

    def get(self, cf: BytesLike, cq: BytesLike, default: bytes | None = None,
            visibility: BytesLike | None = None) -> bytes | None:
        """The value of cell ``cf:cq`` (with ``visibility``, if given) as of the start, or ``default``."""
        cf_b, cq_b = to_bytes(cf, "column family"), to_bytes(cq, "column qualifier")
        cv = None if visibility is None else to_bytes(visibility, "visibility")
        for cell in self._state.cells:
            if cell.cf == cf_b and cell.cq == cq_b and (cv is None or cell.cv == cv):
                return cell.value
        return default

    def scan(self, cf: BytesLike | None = None) -> list[Cell]:
        """The row's own cells as of the start (of family ``cf``, if given), in key order."""
        if cf is None:
            return list(self._state.cells)
        cf_b = to_bytes(cf, "column family")
        return [c for c in self._state.cells if c.cf == cf_b]

    def put(self, cf: BytesLike, cq: BytesLike, value: BytesLike, visibility: BytesLike = b"") -> None:
        """Write cell ``cf:cq`` of the row at timestamp = ``seq``."""
        self._layout.check_family(to_bytes(cf, "column family"))
        self._cells.put(cf, cq, value, visibility, timestamp=self.seq)

    def delete(self, cf: BytesLike, cq: BytesLike, visibility: BytesLike = b"") -> None:
        """Delete cell ``cf:cq`` (every version at or below ``seq``)."""
        self._layout.check_family(to_bytes(cf, "column family"))
        self._cells.delete(cf, cq, visibility, timestamp=self.seq)

    def export(self, queue: Any, key: Any, value: Any) -> None:
        """Queue the export ``(key, value, seq)`` into ``queue`` (an ``ExportQueue`` or ``QueueConfig``) if
        and when this transaction commits."""
        self._outbox.append(self._targets.export(queue, key, value, self.seq))
        self._used.append(queue)

    def update(self, combine: Any, key: Any, delta: Any) -> None:
        """Queue the update ``(key, delta)`` into the combine queue ``combine`` (a ``CombineQueue`` or
        ``CombineConfig``) if and when this transaction commits."""
        self._outbox.append(self._targets.update(combine, key, delta, self.seq))
        self._used.append(combine)

    @property
    def empty(self) -> bool:
        return not self._cells.updates and not self._outbox
