"""A combine queue's key row as a pass reads it: its queued updates, outbox cells, version and value."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from connector.accumulo import Cell, Connection, Range
from connector.transactions.layout import MalformedOutboxError, OutboxCell, parse_outbox

from .layout import OUTBOX_FAMILY, SEQ_QUALIFIER, STATE_FAMILY, UPDATE_FAMILY, VALUE_QUALIFIER


@dataclass
class KeyRow:
    """One key row as read."""

    row: bytes
    updates: list[tuple[bytes, int, bytes]] = field(default_factory=list)  # (update id, ts, delta bytes)
    outbox: list[OutboxCell] = field(default_factory=list)
    seq: bytes | None = None  # the version as stored
    value: bytes | None = None
    malformed: int = 0  # outbox cells that do not follow the protocol (left in place)

    def add(self, cell: Cell) -> None:
        if cell.cf == UPDATE_FAMILY:
            self.updates.append((cell.cq, cell.ts, cell.value))
        elif cell.cf == OUTBOX_FAMILY:
            try:
                self.outbox.append(parse_outbox(cell.cq, cell.value, cell.ts))
            except MalformedOutboxError:
                self.malformed += 1
        elif cell.cf == STATE_FAMILY:
            if cell.cq == SEQ_QUALIFIER:
                self.seq = cell.value
            elif cell.cq == VALUE_QUALIFIER:
                self.value = cell.value


def key_rows(cells: Iterable[Cell]) -> Iterator[KeyRow]:
    """Group a scan's cells (in key order) into rows."""
    current: KeyRow | None = None
    for cell in cells:
        if current is None or cell.row != current.row:
            if current is not None:
                yield current
            current = KeyRow(cell.row)
        current.add(cell)
    if current is not None:
        yield current


def read_key_rows(conn: Connection, table: str, rows: list[bytes], scan_batch: int) -> list[KeyRow]:
    """The current state of ``rows`` (rows without cells are left out)."""
    by_row: dict[bytes, KeyRow] = {}
    ranges = [Range.exact_row(r) for r in rows]
    # cells of one row arrive in key order (version, value, updates), rows interleaved
    for cell in conn.batch_read(table, ranges, batch_size=scan_batch):
        state = by_row.get(cell.row)
        if state is None:
            state = by_row[cell.row] = KeyRow(cell.row)
        state.add(cell)
    return list(by_row.values())
