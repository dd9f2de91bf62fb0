"""Row transactions on plain Accumulo: a row's own cells and the exports and combine updates they cause
commit together in one conditional mutation (the row's outbox), then a relay copies the outbox into the
queues. Modules: ``layout`` (the protocol: version and outbox cells, documented there for producers in any
language), ``targets`` (exports and updates as outbox cells, and the queues' record of their source tables),
``commit`` (conditional commits of many rows), ``relay`` (outboxes to queues, leftovers of crashed producers),
``transaction`` (one attempt: the row as read, the buffered writes), ``rows`` (``RowTransactions.run``),
``errors``, ``status`` (what waits in outboxes)::

    txs = RowTransactions(conn_a, "counts")
    txs.init()
    seq = txs.run("word", lambda tx: (tx.put(b"c", b"n", b"1"), tx.export(queue, "word", {"new": 1})))
"""

from .commit import Committer
from .errors import RelayError, TransactionConflictError, TransactionError
from .layout import MalformedOutboxError, OutboxCell, TxLayout, next_seq, parse_outbox, parse_version
from .relay import PeriodicRelay, Relay, RelayStats, pending_outbox, relay_sources, relay_table
from .rows import RowTransactions, ensure_outbox_group
from .status import OutboxStatus, outbox_status
from .targets import Targets, record_source, recorded_sources
from .transaction import Transaction

__all__ = [
    "Committer", "MalformedOutboxError", "OutboxCell", "OutboxStatus", "PeriodicRelay", "Relay", "RelayError",
    "RelayStats", "RowTransactions", "Targets", "Transaction", "TransactionConflictError", "TransactionError",
    "TxLayout", "ensure_outbox_group", "next_seq", "outbox_status", "parse_outbox", "parse_version",
    "pending_outbox", "record_source", "recorded_sources", "relay_sources", "relay_table",
]
