"""What waits in a table's outboxes: committed exports and updates not relayed yet; and whether a table is a
producer's table at all."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from connector.accumulo import Connection

from .layout import MalformedOutboxError, TxLayout, clock_us, parse_outbox
from .relay import pending_outbox


@dataclass
class OutboxStatus:
    """Outbox cells of one table: how many, in how many rows, per destination table, the oldest seq (and its
    age in seconds by this machine's clock, seqs being their producers' wall-clock µs: shown only, since a
    producer whose clock runs ahead shows younger; no relay decides by it) and malformed cells."""

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


def holds_row_transactions(conn: Connection, table: str, layout: TxLayout | None = None) -> bool:
    """Whether ``table`` is a row-transaction producer's table (with ``layout``): its outbox family has a
    locality group of its own (what ``RowTransactions.init``, the Java producer and ``CombineQueue.init`` set:
    an initialised table with no transaction yet counts), or it holds a version cell or an outbox cell (a
    producer that never ran ``init``). A queue's table has none of these. The look is a scan of the version and
    outbox columns that stops at the first cell: the whole table only when it holds neither."""
    layout = layout or TxLayout()
    if outbox_has_group(conn.table_properties(table), layout):
        return True
    columns = [(layout.version_family, layout.version_qualifier), layout.outbox_family]
    cells = conn.scan(table, columns=columns, batch_size=1)
    try:
        return next(cells, None) is not None
    finally:
        getattr(cells, "close", lambda: None)()  # the scanner, at once


def outbox_has_group(properties: dict[str, str], layout: TxLayout) -> bool:
    """Whether table ``properties`` put ``layout``'s outbox family in an enabled locality group."""
    family = layout.outbox_family.decode("utf-8")
    for group in (g for g in properties.get("table.groups.enabled", "").split(",") if g):
        if family in properties.get(f"table.group.{group}", "").split(","):
            return True
    return False
