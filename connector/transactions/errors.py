"""The errors of row transactions: each names the table and the row."""

from __future__ import annotations

from connector.errors import ConnectorError


class TransactionError(ConnectorError, RuntimeError):
    """A row transaction could not commit (the message names table and row)."""


class LayoutError(TransactionError, ValueError):
    """A row-transaction layout, family or cell that breaks the protocol (the message says what is wrong)."""


class MalformedOutboxError(LayoutError):
    """An outbox cell that does not follow the protocol (the message says what is wrong)."""


class RelayError(TransactionError):
    """The transactions committed, but relaying their outbox failed (the message says why); the outbox
    stays in the rows and is relayed later (see the module's description)."""


class TransactionConflictError(TransactionError):
    """Other commits to the row kept winning: the transaction gave up after its attempts; nothing of it was
    written."""

    def __init__(self, table: str, row: bytes, attempts: int) -> None:
        super().__init__(f"row transaction on table {table!r} row {row[:100]!r}: the row kept changing under it; "
                         f"gave up after {attempts} attempts, nothing was written")
        self.table, self.row, self.attempts = table, row, attempts
