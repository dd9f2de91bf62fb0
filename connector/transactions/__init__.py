"""Row transactions on plain Accumulo: a row's own cells and the exports and combine updates they cause
commit together in one conditional mutation (the row's outbox), then a relay copies the outbox into the
queues. Modules: ``layout`` (the protocol: version and outbox cells, documented there for producers in any
language), ``targets`` (exports and updates as outbox cells, and the queues' record of their source tables),
``commit`` (conditional commits of many rows), ``relay`` (outboxes to queues, leftovers of crashed producers),
``relayer`` (the producer's relayer thread),
``transaction`` (one attempt: the row as read, the buffered writes), ``rows`` (``RowTransactions.run``),
``errors`` (what each error means was written, and what may be retried), ``status`` (what waits in
outboxes), ``watermark`` (how far the destinations are; waiting for one commit to reach them: read-your-writes)::

    txs = RowTransactions(conn_a, "counts")
    txs.init()
    seq = txs.run("word", lambda tx: (tx.put(b"c", b"n", b"1"), tx.export(queue, "word", {"new": 1})))
    wait_for_seq(conn_a, queue, seq)                 # its export is on every destination of the queue now
"""

from .errors import (
    CommitError,
    LayoutError,
    MalformedOutboxError,
    PartialCommitError,
    ProducerTableError,
    RelayError,
    TransactionConflictError,
    TransactionError,
)
from .layout import TxLayout
from .relay import PeriodicRelay, RelayStats, relay_sources, relay_table
from .rows import RowTransactions
from .status import OutboxStatus, outbox_status
from .transaction import Transaction
from .watermark import Pin, Unbuilt, WaitTimeout, Watermark, queue_watermark, wait_for_seq

# the public API; the protocol's pieces (commits, outbox cells, relays, targets) are imported from their modules
__all__ = [
    "CommitError", "LayoutError", "MalformedOutboxError", "OutboxStatus", "PartialCommitError", "PeriodicRelay",
    "Pin", "ProducerTableError",
    "RelayError", "RelayStats", "RowTransactions", "Transaction", "TransactionConflictError", "TransactionError",
    "TxLayout", "Unbuilt", "WaitTimeout", "Watermark", "outbox_status", "queue_watermark", "relay_sources",
    "relay_table", "wait_for_seq",
]
