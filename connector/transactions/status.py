"""What waits in a table's outboxes: committed exports and updates not relayed yet."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from connector.accumulo import Connection

from .layout import MalformedOutboxError, TxLayout, clock_us, parse_outbox
from .relay import pending_outbox


@dataclass
class OutboxStatus:
    """Outbox cells of one table: how many, in how many rows, per destination table, the oldest seq (and its
    age in seconds, seqs being wall-clock µs) and malformed cells."""

    table: str
    cells: int = 0
    rows: int = 0
    by_target: Counter[str] = field(default_factory=Counter)
    oldest_seq: int | None = None
    malformed: int = 0
    age_seconds: float | None = None

    @property
    def empty(self) -> bool:
        return self.cells == 0 and self.malformed == 0


def outbox_status(conn: Connection, table: str, layout: TxLayout | None = None) -> OutboxStatus:
    """Scan the outbox family of ``table`` (its own locality group: cheap when the outboxes are small)."""
    status = OutboxStatus(table)
    last_row = None
    for row, qualifier, ts, value in pending_outbox(conn, table, layout):
        if row != last_row:
            status.rows += 1
            last_row = row
        try:
            cell = parse_outbox(qualifier, value, ts)
        except MalformedOutboxError:
            status.malformed += 1
            continue
        status.cells += 1
        status.by_target[cell.table] += 1
        status.oldest_seq = ts if status.oldest_seq is None else min(status.oldest_seq, ts)
    if status.oldest_seq is not None:
        status.age_seconds = max(0.0, (clock_us() - status.oldest_seq) / 1e6)
    return status
