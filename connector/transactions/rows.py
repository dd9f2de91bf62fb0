"""Row transactions: one row's read-modify-write, committed with its outbox in one conditional mutation.

    txs = RowTransactions(conn_a, "counts")
    def bump(tx):                                  # may run more than once: keep it free of side effects
        old = int(tx.get(b"c", b"n", default=b"0"))
        tx.put(b"c", b"n", str(old + 1).encode())
        tx.export(queue, key=word, value={"old": old, "new": old + 1})
    seq = txs.run(word, bump)                      # commits and returns the commit's seq
    txs.flush()                                    # only if the exports must be in the queue now

The guarantee: the row's new cells, its new version and the outbox (every export and update the function
buffered) commit together or not at all, and every committed outbox cell reaches its queue: this producer's
relayer thread relays it within about ``relay_delay`` seconds of the commit, many transactions in one round of
flushes; if the producer dies first, a streaming drain of the queue or ``accumulo-export tx relay`` does.
``run`` returns once the commit is durable; a caller that needs the exports in their queues before it goes on
calls :meth:`RowTransactions.flush` (or passes ``relay_delay=None``: every call relays before it returns).
Only one row is one transaction: a change spanning rows needs the combine queue (updates are folded per key)
or a transactional system such as Fluo.

What a caller may do after an error (``connector.transactions.errors`` says it class by class): after a
:class:`~connector.transactions.CommitError` (a :class:`~connector.transactions.TransactionConflictError`, a
refused mutation) or an exception from the function, nothing of it was written and running it again is safe;
after a :class:`~connector.transactions.RelayError` from ``run``/``run_all`` the transactions committed (their
``seqs`` are on it) and must never run again; after a :class:`~connector.transactions.PartialCommitError` only
the items in its ``pending`` may run again.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from connector.accumulo import Connection, IteratorSetting
from connector.accumulo.errors import AccumuloSecurityError
from connector.accumulo.mutation import BytesLike, to_bytes
from connector.accumulo.summaries import SUMMARIZER_CLASS, SUMMARIZER_PROPERTY, ensure_visibility_summary
from connector.queue.layout import CONFIG_FAMILY

from .commit import ACCEPTED, REJECTED, UNKNOWN, Committer
from .errors import CommitError, PartialCommitError, ProducerTableError, RelayError, TransactionConflictError
from .layout import (
    OUTBOX_GROUP,
    OutboxCell,
    TxLayout,
    clock_us,
    new_token,
    next_seq,
    parse_version,
    version_tokens,
    version_value,
)
from .relay import Sightings
from .relayer import DEFAULT_MAX_UNRELAYED, DEFAULT_RELAY_DELAY, BackgroundRelay
from .targets import Targets
from .transaction import RowState, Transaction, read_rows

log = logging.getLogger(__name__)

#: another producer's outbox cell is relayed by this one once it is still there this many seconds (of this
#: process's monotonic clock) after this producer first saw it; until then its own producer most likely
#: relays it (relaying it too would be harmless, but doubled)
LEFTOVER_SECONDS = 2.0
#: rows whose other producers' outbox cells a producer remembers having seen
LEFTOVER_ROWS = 100_000
#: attempts of one transaction before TransactionConflictError
DEFAULT_MAX_ATTEMPTS = 20


def prepare_producer_table(conn: Connection, table: str, layout: TxLayout) -> None:
    """Set up a producer table's properties, unless they are (needs the permission to alter the table): the
    outbox family in a locality group of its own (a relay looking for leftovers then reads only the outbox's
    files) and Accumulo's visibility summarizer (a bootstrap or verify then knows whether its user reads every
    row whole: :mod:`connector.accumulo.summaries`)."""
    ensure_visibility_summary(conn, table)
    props = conn.table_properties(table)
    for name, value in layout.locality_group_properties().items():
        if props.get(name) != value:
            conn.set_table_property(table, name, value)
    enabled = [g for g in props.get("table.groups.enabled", "").split(",") if g]
    if OUTBOX_GROUP not in enabled:
        conn.set_table_property(table, "table.groups.enabled", ",".join([*enabled, OUTBOX_GROUP]))


def producer_table_ready(conn: Connection, table: str, layout: TxLayout) -> bool:
    """Whether ``table`` is set up for row transactions (:func:`prepare_producer_table` ran on it)."""
    props = conn.table_properties(table)
    enabled = props.get("table.groups.enabled", "").split(",")
    return (props.get(SUMMARIZER_PROPERTY) == SUMMARIZER_CLASS and OUTBOX_GROUP in enabled
            and all(props.get(k) == v for k, v in layout.locality_group_properties().items()))


def check_producer_table(conn: Connection, table: str, layout: TxLayout) -> None:
    """Make sure ``table`` may hold a producer's rows before the first commit: it exists, it is no queue's table
    (a queue's records and a producer's rows would share one table's rows, and the queue's drains and the
    relays would read each other's cells), and it is set up for row transactions, which this does if it is not
    (``ProducerTableError`` when the user may not alter the table)."""
    if not conn.table_exists(table):
        raise ProducerTableError(f"producer table {table!r} does not exist: create it with RowTransactions(conn, "
                                 f"{table!r}).init() or 'accumulo-export tx init --table {table}'")
    if producer_table_ready(conn, table, layout):
        return
    refuse_queue_table(conn, table)
    try:
        prepare_producer_table(conn, table, layout)
    except AccumuloSecurityError as exc:
        raise ProducerTableError(f"producer table {table!r} is not set up for row transactions and this user may "
                                 f"not alter it ({exc}): run 'accumulo-export tx init --table {table}' as a user "
                                 "who may") from None
    log.info("set up table %r for row transactions (the outbox's locality group, the visibility summarizer)", table)


def refuse_queue_table(conn: Connection, table: str) -> None:
    """``ProducerTableError`` when ``table`` holds a queue's (or a combine queue's) records: a producer's rows
    and a queue's would share one table's rows, and drains and relays would read each other's cells."""
    for cell in conn.scan(table, columns=[CONFIG_FAMILY], iterators=[_CONFIG_ROWS], batch_size=1):
        queue = cell.row.decode("utf-8", "replace").removesuffix("#config")
        raise ProducerTableError(f"table {table!r} holds the records of queue {queue!r}: a producer's rows need a "
                                 "table of their own (RowTransactions(conn, '<producer table>'), exporting to "
                                 f"QueueConfig(table={table!r}, ...))")


#: a queue's (or combine queue's) configuration row, ``<id>#config``: no producer row looks like one
_CONFIG_ROWS = IteratorSetting(50, "queueConfigRows", "org.apache.accumulo.core.iterators.user.RegExFilter",
                               {"rowRegex": ".*#config"})


@dataclass
class _RowWork:
    """The items of one row in a ``run_all`` call, and where they stand."""

    row: bytes
    items: list[tuple[int, Callable[[Transaction], object]]] = field(default_factory=list)
    attempts: int = 0
    # a commit whose outcome is not settled: (its token, its transactions)
    sent: tuple[bytes, list[tuple[int, Transaction]]] | None = None
    # committed, or its functions buffered nothing: nothing left to run
    done: bool = False


class RowTransactions:
    """Runs row transactions on one table of cluster A (see the module's description).

    ``layout``: where versions and outboxes live (defaults ``!tx:v`` and ``!txo``); ``max_attempts``: runs of
    one transaction before :class:`TransactionConflictError`; ``relay_delay``: seconds a committed outbox
    waits for others to share its relay (None: each call relays before it returns); ``max_unrelayed``:
    outbox cells waiting for the relayer before commits wait for room; ``clock_us``: wall-clock microseconds
    (the floor of a commit's seq). One instance may be shared by threads (calls take turns) but not by
    processes. Close it (or use it as a context manager): that relays what waits.

    ``cache_rows``: how many rows' states after this producer's own commits to keep (least recently used
    go first; 0, the default, keeps none). The next transaction on a kept row runs on that state without
    reading the row: one round trip (the commit) instead of two. The commit's condition on the version still
    guards it, so a row another producer committed meanwhile costs a lost condition, then a read and a
    second run: worth it when each row has one producer (rows partitioned among producers), a loss when
    producers share hot rows. Use it only for rows every writer changes through row transactions (a plain
    write to a row's cells does not change its version). Rows whose transactions write cells with a
    visibility are not kept.
    """

    def __init__(self, conn: Connection, table: str, *, layout: TxLayout | None = None,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, writer_options: Mapping[str, Any] | None = None,
                 relay_delay: float | None = DEFAULT_RELAY_DELAY, max_unrelayed: int = DEFAULT_MAX_UNRELAYED,
                 cache_rows: int = 0, clock_us: Callable[[], int] = clock_us) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts!r}")
        if isinstance(cache_rows, bool) or not isinstance(cache_rows, int) or cache_rows < 0:
            raise ValueError(f"cache_rows must be an int >= 0, got {cache_rows!r}")
        self.cache_rows = cache_rows
        self._cache: OrderedDict[bytes, RowState] = OrderedDict()
        self.conn, self.table = conn, table
        self.layout = layout or TxLayout()
        self.max_attempts = max_attempts
        self.relay_delay = relay_delay
        self._clock = clock_us
        self._targets = Targets(conn, table, self.layout)
        self._committer = Committer(conn, table, self.layout)
        # deletes of relayed outbox cells: durable within a second (a lost one only means a harmless re-relay)
        self._relayer = BackgroundRelay(conn, table, self.layout, writer_options,
                                        delay=0.0 if relay_delay is None else relay_delay,
                                        max_unrelayed=max_unrelayed, delete_every=1.0)
        # other producers' outbox cells seen in rows this one read, by row: see _leftovers
        self._sightings = Sightings(LEFTOVER_SECONDS, max_groups=LEFTOVER_ROWS)
        self._lock = threading.Lock()
        self._table_checked = False  # check_producer_table ran: once per instance, before its first commit
        #: totals: commits, conflicts (lost conditions and unknown outcomes that had not applied), rows read,
        #: and rows run on a cached state instead
        self.commits = self.conflicts = self.rows_read = self.cache_hits = 0

    @property
    def relayed(self) -> int:
        """Outbox cells relayed so far (this producer's and leftovers of others)."""
        return self._relayer.relayed

    def __repr__(self) -> str:
        return f"RowTransactions(table={self.table!r})"

    def init(self) -> None:
        """Create the table if it does not exist and set it up (:func:`prepare_producer_table`: the outbox's
        locality group, the visibility summarizer); ``ProducerTableError`` for a queue's table. Needs the
        permission to alter the table; safe to run again. Without it the first commit sets a bare table up."""
        self.conn.create_table(self.table, exist_ok=True)
        refuse_queue_table(self.conn, self.table)
        prepare_producer_table(self.conn, self.table, self.layout)

    def run(self, row: BytesLike, fn: Callable[[Transaction], object]) -> int | None:
        """Run ``fn`` on ``row`` (bytes, or str as UTF-8) and commit what it buffered; returns the commit's
        seq, or None when ``fn`` buffered nothing (nothing is committed, no new version).

        ``fn`` may run more than once: when another commit changed the row meanwhile, the row is read again
        and ``fn`` runs again on the new state. After ``max_attempts`` runs, :class:`TransactionConflictError`
        (a :class:`CommitError`: nothing written, running it again is safe). An exception from ``fn`` (or from a
        serializer refusing a value) propagates and nothing is written. The outbox is relayed to its queues by
        the relayer within about ``relay_delay`` seconds (before ``run`` returns if ``relay_delay`` is None).

        Once the commit is accepted, ``run`` returns its seq or raises :class:`RelayError` with it
        (``.seqs[0]``): the relayer could not take the outbox (it is closed, or as many cells as
        ``max_unrelayed`` wait while its relay fails), or, with ``relay_delay=None``, the relay failed. The
        commit stands and its outbox stays in the row, relayed later: never run ``fn`` again for it."""
        return self.run_all([(row, fn)])[0]

    def run_all(self, items: Iterable[tuple[BytesLike, Callable[[Transaction], object]]]) -> list[int | None]:
        """Run many row transactions, in rounds: each round reads its rows in one batch scan, runs their
        functions, commits them in one conditional call and relays the accepted outboxes together. Each row
        is still its own transaction (this is not atomic across rows). Items on the same row run in the
        given order, each on the state the one before left, and commit together in one conditional mutation
        (each at its own seq; if the row changed meanwhile, all of them run again). Returns each item's seq
        (None: nothing buffered).

        If a function raises (or a row keeps conflicting, a mutation is refused, the connection fails),
        nothing of the round it ran in is written, and rows committed in earlier rounds (after lost conditions
        of other rows) stay committed and are relayed: then the error comes as :class:`PartialCommitError`
        (its ``__cause__``), whose ``seqs`` are the committed items' and whose ``pending`` are the items that
        may run again; when nothing had committed, the error itself propagates.

        When every item ran, ``run_all`` returns their seqs, or raises :class:`RelayError` with them
        (``.seqs``) if the relayer could not take their outbox (or, with ``relay_delay=None``, the relay
        failed): they committed and must not run again; their outbox stays in the rows, relayed later."""
        if not self._table_checked:
            check_producer_table(self.conn, self.table, self.layout)
            self._table_checked = True
        works: dict[bytes, _RowWork] = {}
        count = 0
        for index, (row, fn) in enumerate(items):
            row_b = to_bytes(row, "row")
            works.setdefault(row_b, _RowWork(row_b)).items.append((index, fn))
            count = index + 1
        results: list[int | None] = [None] * count
        handoff: list[RelayError] = []  # the relayer refused a round's outbox: committed all the same
        with self._lock:
            waiting = list(works.values())
            started = time.monotonic()  # before any commit of this call was sent: where its relay's hold starts
            try:
                while waiting:
                    waiting = self._round(waiting, results, handoff, started)
            except Exception as exc:
                if any(seq is not None for seq in results):
                    raise self._partial(list(works.values()), results, exc, handoff) from exc
                raise
        if handoff:
            raise RelayError(f"row transactions on table {self.table!r}: {self._committed(results)}, but their "
                             f"outbox could not be handed to the relayer: {handoff[0]}", results) from handoff[0]
        if self.relay_delay is None:
            try:
                self._relayer.flush()
            except RelayError as exc:
                raise RelayError(f"{exc} ({self._committed(results)})", results) from exc
        return results

    def _committed(self, results: list[int | None]) -> str:
        done = sum(seq is not None for seq in results)
        return (f"{done} of {len(results)} items committed (their seqs are the error's .seqs: do not run them "
                "again)")

    def _partial(self, works: list[_RowWork], results: list[int | None], exc: Exception,
                 handoff: list[RelayError]) -> PartialCommitError:
        unknown = sorted(i for w in works if not w.done and w.sent is not None for i, _ in w.items)
        pending = sorted(i for w in works if not w.done and w.sent is None for i, _ in w.items)
        first_line = (str(exc).splitlines() or [""])[0][:300]
        return PartialCommitError(
            f"row transactions on table {self.table!r}: {self._committed(results)}, then {type(exc).__name__}: "
            f"{first_line}; the {len(pending)} items in .pending did not commit and may run again"
            + (f"; {len(unknown)} in .unknown were sent and their outcome is unknown (their row's version tells)"
               if unknown else "")
            + (f"; their outbox could not be handed to the relayer ({handoff[0]})" if handoff else ""),
            results, pending, unknown)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the outbox of every transaction committed so far is in its queues. Raises
        :class:`~connector.transactions.RelayError` if the relay fails (the commits stand and their outboxes
        stay in the rows; the relayer keeps trying) or takes longer than ``timeout`` seconds."""
        self._relayer.flush(timeout)

    @property
    def unrelayed(self) -> int:
        """Outbox cells committed by this producer and not relayed yet."""
        return self._relayer.unrelayed

    def _round(self, works: list[_RowWork], results: list[int | None],
               handoff: list[RelayError], started: float) -> list[_RowWork]:
        """One round over distinct rows; returns the rows to run again. A failed hand-off of the committed
        outbox to the relayer is added to ``handoff``, not raised: the commits stand and the other rows go on."""
        states: dict[bytes, RowState] = {}
        for work in works:  # a retry, or a commit whose outcome is unknown, reads the row
            cached = self._cache.get(work.row) if work.attempts == 0 and work.sent is None else None
            if cached is not None:
                states[work.row] = cached
        unread = [w.row for w in works if w.row not in states]
        if unread:
            states.update(read_rows(self.conn, self.table, self.layout, unread))
        self.rows_read += len(unread)
        self.cache_hits += len(works) - len(unread)
        relay: list[tuple[bytes, OutboxCell]] = []
        try:
            return self._commit_round(works, states, results, relay)
        finally:  # also when a function raised: what did commit reaches its queues all the same
            try:
                self._relayer.submit(relay, started)
            except RelayError as exc:  # the cells stay in their rows' outboxes, as after a crash
                handoff.append(exc)

    def _commit_round(self, works: list[_RowWork], states: dict[bytes, RowState], results: list[int | None],
                      relay: list[tuple[bytes, OutboxCell]]) -> list[_RowWork]:
        sends: list[tuple[_RowWork, list[tuple[int, Transaction]], RowState, bytes]] = []
        mutations = []
        again: list[_RowWork] = []
        runs: list[_RowWork] = []
        for work in works:  # unknown outcomes first: a function raising below must not leave them unsettled
            if work.sent is not None:
                token, sent = work.sent
                work.sent = None
                if token in version_tokens(states[work.row].version):  # the unknown outcome was a commit
                    self._accepted(states[work.row], sent, results, relay)
                    work.done = True
                    continue
            runs.append(work)
        for work in runs:
            state = states[work.row]
            if work.attempts >= self.max_attempts:
                raise TransactionConflictError(self.table, work.row, work.attempts)
            work.attempts += 1
            txs, after = self._run_functions(work, state)
            if not txs:
                relay += self._leftovers(state, [])
                work.done = True
                continue
            token = new_token()
            last = txs[-1][1]
            m = self.layout.commit_mutation(work.row, state.version, last.seq, token)
            for _, tx in txs:
                m.updates.extend(tx._cells.updates)
                m.size += tx._cells.size
                self.layout.add_outbox(m, tx._outbox)
                for target in tx._used:
                    self._targets.record(target)
            mutations.append(m)
            sends.append((work, txs, after, token))
        for work, txs, _, token in sends:  # from here on, until settled, their outcome is unknown
            work.sent = (token, txs)
        statuses = self._committer.write(mutations)
        refused: list[str] = []
        for work, txs, after, token in sends:
            status = statuses[work.row]
            if status == ACCEPTED:
                self._remember(states[work.row], txs, after, token)
                work.sent = None
                work.done = True
                self._accepted(states[work.row], txs, results, relay)
            elif status in (REJECTED, UNKNOWN):
                self._cache.pop(work.row, None)
                self.conflicts += 1
                if status == REJECTED:
                    work.sent = None
                again.append(work)
            else:
                work.sent = None  # refused: not applied
                refused.append(f"row {work.row[:100]!r}: the conditional mutation was {status}"
                               + (" (a constraint refused it)" if status == "VIOLATED" else ""))
        if refused:  # after the loop: the accepted rows of this round are relayed all the same
            raise CommitError(f"row transactions on table {self.table!r}: {'; '.join(refused[:5])}; nothing of "
                              "those rows was written")
        if again:
            # colliding writers spread out before they read again
            time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** max(w.attempts for w in again))))
        return again

    def _remember(self, state: RowState, txs: list[tuple[int, Transaction]], after: RowState,
                  token: bytes) -> None:
        """Keep the row as the accepted commit left it (``state``: what its transactions ran on, ``after``: the
        cells they left), if rows are kept."""
        if not self.cache_rows:
            return
        if any(u.cv for _, tx in txs for u in tx._cells.updates):
            self._cache.pop(state.row, None)  # what a read shows depends on the reader's authorizations
            return
        # its outbox is being relayed by this producer: a cached state holds none
        self._cache[state.row] = RowState(state.row, version_value(txs[-1][1].seq, token, state.version),
                                          after.cells, [])
        self._cache.move_to_end(state.row)
        while len(self._cache) > self.cache_rows:
            self._cache.popitem(last=False)

    def _run_functions(self, work: _RowWork,
                       state: RowState) -> tuple[list[tuple[int, Transaction]], RowState]:
        """Run the row's functions in order, each on the state the one before left; the transactions that
        buffered something, with their item indexes, and the row as the last of them leaves it."""
        out = []
        prev = parse_version(state.version)
        view = state
        for index, fn in work.items:
            tx = Transaction(view, next_seq(prev, self._clock), self.layout, self._targets)
            fn(tx)
            if not tx.empty:
                out.append((index, tx))
                prev = tx.seq
                view = view.after(tx)
        return out, view

    def _accepted(self, state: RowState, txs: list[tuple[int, Transaction]], results: list[int | None],
                  relay: list[tuple[bytes, OutboxCell]]) -> None:
        self.commits += len(txs)
        ours: list[OutboxCell] = []
        for index, tx in txs:
            results[index] = tx.seq
            ours += tx._outbox
        relay += [(state.row, c) for c in ours]
        relay += self._leftovers(state, ours)

    def _leftovers(self, state: RowState, ours: list[OutboxCell]) -> list[tuple[bytes, OutboxCell]]:
        """Outbox cells another producer of this row left unrelayed (read with the row): not ours, not those
        our relayer has in hand or deleted without making the delete durable yet, and seen by this producer in
        an earlier read of the row at least ``LEFTOVER_SECONDS`` ago (of its monotonic clock). A cell seen for
        the first time is most likely being relayed by its own producer right now: relaying it too would be
        harmless, but doubled. A cell's seq is never compared with our clock: its producer's clock may run
        ahead of ours or behind it."""
        others = [c for c in state.outbox if c not in ours and not self._relayer.owns(state.row, c.qualifier)]
        if not others:
            return []
        look = self._sightings.look(state.row)
        left = [(state.row, c) for c in others if look.ready((c.qualifier, c.ts))]
        look.close()
        return left

    def close(self, timeout: float | None = 60.0) -> None:
        """Relay what waits (up to ``timeout`` seconds) and release the writers. If that relay fails,
        :class:`~connector.transactions.RelayError` says so; the outboxes stay in their rows for a drain's relay
        or ``accumulo-export tx relay``."""
        with self._lock:
            try:
                self._relayer.close(timeout)
            finally:
                self._committer.close()

    def __enter__(self) -> RowTransactions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
