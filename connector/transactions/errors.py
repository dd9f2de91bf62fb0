"""The errors of row transactions. What a caller may do after one depends on what was written, which the class
says:

- :class:`CommitError` (and its :class:`TransactionConflictError`): the transaction did not commit, nothing of
  it was written. Running it again is safe (after a conflict it may well succeed; a refused mutation is
  refused again until its cause is fixed).
- :class:`RelayError`: the transactions committed; only their relay failed or could not start. Never run them
  again (that would apply them twice): their outbox stays in the rows and reaches the queues later. Raised by
  ``run``/``run_all`` it carries the commits' ``seqs``.
- :class:`PartialCommitError`: ``run_all`` stopped part way: some items committed (``seqs``), the others did
  not (``pending``: only those may be run again).
- :class:`LayoutError`: a layout, family or cell that breaks the protocol; nothing was written.

An exception raised by the transaction's own function (or a serializer) propagates as it is: nothing of it was
written. :class:`TransactionError` is the layer's root, so ``except TransactionError`` catches all of the
above: it does not mean "could not commit".
"""

from __future__ import annotations

from collections.abc import Sequence

from connector.errors import ConnectorError


class TransactionError(ConnectorError, RuntimeError):
    """An error of row transactions (the message names the table and the row); its class says what was
    written (see the module's description). Catch :class:`CommitError` for "could not commit"."""


class CommitError(TransactionError):
    """The transaction could not commit: nothing of it was written (the message says why). Running it again is
    safe; it succeeds only once the cause is gone."""


class TransactionConflictError(CommitError):
    """Other commits to the row kept winning: the transaction gave up after its attempts; nothing of it was
    written. Running it again is safe."""

    def __init__(self, table: str, row: bytes, attempts: int) -> None:
        super().__init__(f"row transaction on table {table!r} row {row[:100]!r}: the row kept changing under it; "
                         f"gave up after {attempts} attempts, nothing was written")
        self.table, self.row, self.attempts = table, row, attempts


class ProducerTableError(CommitError, ValueError):
    """The table cannot hold a producer's rows (it does not exist, it holds a queue's records, or it could not
    be set up for row transactions): nothing was written; the message says what to do."""


class LayoutError(TransactionError, ValueError):
    """A row-transaction layout, family or cell that breaks the protocol (the message says what is wrong);
    nothing was written."""


class MalformedOutboxError(LayoutError):
    """An outbox cell that does not follow the protocol (the message says what is wrong)."""


class RelayError(TransactionError):
    """The transactions committed, but relaying their outbox failed, or it could not be handed to the
    producer's relayer (the message says why). Never run them again: the outbox stays in the rows and is
    relayed later (by the relayer, a later transaction on the row, a drain's relay or ``accumulo-export tx
    relay``).

    ``seqs``: raised by ``run_all``, each item's seq as ``run_all`` returns them (None: the item buffered
    nothing); raised by ``run``, its one seq; empty when raised by ``flush`` or ``close``."""

    def __init__(self, message: str, seqs: Sequence[int | None] = ()) -> None:
        super().__init__(message)
        self.seqs: list[int | None] = list(seqs)


class PartialCommitError(TransactionError):
    """``run_all`` stopped part way (its ``__cause__`` says why: a function that raised, a row that kept
    conflicting, a refused mutation, a lost connection) after some of its items had committed.

    ``seqs``: each item's seq, as ``run_all`` would have returned them (None: not committed, or it buffered
    nothing); ``pending``: the indexes of the items that did not commit, the only ones that may be run again;
    ``unknown``: items whose commit was sent and whose outcome could not be settled (their row's version tells:
    it holds the commit's token if it applied). The committed items' outboxes are relayed as usual."""

    def __init__(self, message: str, seqs: Sequence[int | None] = (), pending: Sequence[int] = (),
                 unknown: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.seqs: list[int | None] = list(seqs)
        self.pending: list[int] = list(pending)
        self.unknown: list[int] = list(unknown)
