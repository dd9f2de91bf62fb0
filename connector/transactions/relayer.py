"""The producer's relayer: relays the outboxes of committed transactions on a thread of its own, so that a
commit returns once it is durable and the relay of many transactions is one round of flushes.

Delivery is what :mod:`.relay` gives, at least once: a cell handed to the relayer is in its row's outbox
already (it committed with the row), so a relayer that dies with cells still waiting (the process killed, a
``close()`` that gave up) leaves them exactly where a crashed producer leaves them, for a streaming drain's
relay or ``accumulo-export tx relay``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from connector.accumulo import Connection

from .errors import RelayError
from .layout import OutboxCell, TxLayout
from .relay import Relay

log = logging.getLogger(__name__)

#: how long a committed outbox cell waits for others to share its relay (seconds)
DEFAULT_RELAY_DELAY = 0.05
#: outbox cells waiting for the relayer before commits wait for room
DEFAULT_MAX_UNRELAYED = 50_000
#: cells relayed in one round of flushes
_ROUND = 5_000
#: seconds between attempts of a failing relay: doubles from the first to the last
_RETRY_FIRST, _RETRY_LAST = 0.1, 5.0


class BackgroundRelay:
    """Relays the ``(row, outbox cell)`` items given to :meth:`submit` within about ``delay`` seconds, many
    transactions' cells in one round of flushes (a copy to the queues, their marks, the outbox deletes).

    ``max_unrelayed`` bounds the memory: :meth:`submit` waits while that many cells wait. A relay that fails
    is retried on the thread (0.1 s, doubling to 5 s) and the cells stay waiting; :meth:`flush` raises
    :class:`RelayError` while it fails. ``delay=0`` relays each submission at once (a caller's ``flush``
    then costs one round of flushes, as an inline relay does)."""

    def __init__(self, conn: Connection, table: str, layout: TxLayout,
                 writer_options: Mapping[str, Any] | None = None, *, delay: float = DEFAULT_RELAY_DELAY,
                 max_unrelayed: int = DEFAULT_MAX_UNRELAYED, delete_every: float = 1.0) -> None:
        if delay < 0:
            raise ValueError(f"relay delay must be >= 0 seconds, got {delay!r}")
        if max_unrelayed < 1:
            raise ValueError(f"max_unrelayed must be >= 1, got {max_unrelayed!r}")
        self.conn, self.table, self.delay, self.max_unrelayed = conn, table, delay, max_unrelayed
        self._relay = Relay(conn, table, layout, writer_options, delete_every=delete_every)
        self._cond = threading.Condition()
        self._waiting: list[tuple[bytes, OutboxCell]] = []
        self._waiting_read: list[float] = []  # per waiting cell: when its commit was sent (the relay's hold)
        self._first_at = 0.0  # when the oldest waiting cell was submitted
        self._in_flight: list[tuple[bytes, OutboxCell]] = []
        self._in_flight_read = 0.0  # the earliest commit of the cells in flight
        self._keys: set[tuple[bytes, bytes]] = set()  # (row, qualifier) of waiting and in-flight cells
        self._error: BaseException | None = None  # the last attempt's failure, until one succeeds
        self._attempts = 0  # relay attempts finished, failed or not
        self._retry_now = False  # a flush() waits: cut a failing relay's pause short
        self._closing = False
        self._stopped = False
        #: cells relayed, in all
        self.relayed = 0
        self._thread = self._start()

    def _start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name=f"outbox-relayer-{self.table}", daemon=True)
        thread.start()
        return thread

    def submit(self, items: Sequence[tuple[bytes, OutboxCell]], read_at: float | None = None) -> None:
        """Hand committed outbox cells to the relayer (waits while ``max_unrelayed`` cells wait). ``read_at``: the
        moment (``time.monotonic()``) before their commits were sent (None: now), from which the relay's hold
        counts (:meth:`Relay.relay`: held longer, they are read again and copied only if still there). Raises
        :class:`RelayError` when it is closed for good, or full while its relay fails: the cells stay in their
        rows' outboxes, as after a crash (``RowTransactions`` reports it with the commits' seqs)."""
        if not items:
            return
        with self._cond:
            if self._stopped:  # closed, and used again: a new thread, unless the old one is stuck or gone for good
                if self.conn.closed or self._thread.is_alive():
                    raise RelayError(f"the outbox relayer of table {self.table!r} is closed; the cells stay in "
                                     "their rows' outboxes for a drain's relay or 'accumulo-export tx relay'")
                self._closing = self._stopped = False
                self._error = None
                self._thread = self._start()
            while len(self._waiting) + len(self._in_flight) >= self.max_unrelayed:
                if self._error is not None:  # full and failing: these stay in the outboxes, as after a crash
                    raise self._failure(self._error)
                self._cond.wait(1.0)
            if not self._waiting:
                self._first_at = time.monotonic()
            self._waiting.extend(items)
            self._waiting_read.extend([time.monotonic() if read_at is None else read_at] * len(items))
            self._keys.update((row, cell.qualifier) for row, cell in items)
            self._cond.notify_all()

    def owns(self, row: bytes, qualifier: bytes) -> bool:
        """Whether this relayer has the cell in hand, or deleted it without flushing the delete yet (so that
        its producer does not take it for a leftover of a crash and relay it twice)."""
        with self._cond:
            return (row, qualifier) in self._keys or (row, qualifier) in self._relay.unflushed

    @property
    def unrelayed(self) -> int:
        """Cells submitted and not relayed yet."""
        with self._cond:
            return len(self._waiting) + len(self._in_flight)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every cell submitted so far is relayed: in its queue and its bucket marked (the delete of
        its outbox cell is durable within about a second, or at :meth:`close`).
        Raises :class:`RelayError` if the relay is failing (the cells stay in the outboxes and the relayer
        keeps trying) or ``timeout`` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._first_at = 0.0  # nothing waits for company once someone waits for the relay
            self._retry_now = True
            self._cond.notify_all()
            since = self._attempts
            while self._waiting or self._in_flight:
                if self._error is not None and (self._attempts > since or self._stopped):
                    raise self._failure(self._error)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise RelayError(f"{len(self._waiting) + len(self._in_flight)} committed outbox cells of "
                                     f"table {self.table!r} were not relayed within {timeout} s; they stay in "
                                     "their rows' outboxes and the relayer keeps trying")
                self._cond.wait(left if left is not None else 1.0)

    def close(self, timeout: float | None = 60.0) -> None:
        """Relay what waits (for up to ``timeout`` seconds), stop the thread and release the writers. If the
        relay fails or takes longer, :class:`RelayError` says so: what was not relayed stays in the outboxes,
        for a drain's relay or ``accumulo-export tx relay``."""
        try:
            self.flush(timeout)
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._thread.join(timeout=30)
            with self._cond:
                self._stopped = True
            if self._thread.is_alive():  # stuck in a call: its writers are still in use, leave them to it
                log.warning("the outbox relayer of %s did not stop within 30 s; its writers are left open",
                            self.table)
            else:
                try:
                    self._relay.close()  # the thread has stopped: its writers are ours now
                except Exception as exc:  # noqa: BLE001 - a lost outbox delete only means a harmless re-relay
                    log.warning("closing the outbox relayer of %s: %s: %s", self.table, type(exc).__name__, exc)

    def _failure(self, exc: BaseException) -> RelayError:
        rows = sorted({row for row, _ in self._in_flight + self._waiting})
        return RelayError(f"row transactions on table {self.table!r} committed (rows {rows[:5]!r}"
                          f"{' ...' if len(rows) > 5 else ''}), but relaying their outbox failed: {exc}. "
                          "The outbox stays in the rows: the relayer keeps trying, and the next transaction on a "
                          "row, a streaming drain of the queue or 'accumulo-export tx relay' relays it")

    def _take(self) -> list[tuple[bytes, OutboxCell]] | None:
        """The next round's cells once they have waited ``delay`` (or fill a round); None: stop."""
        with self._cond:
            while True:
                if self._in_flight:  # a failed round, retried first
                    return self._in_flight
                if self._closing:
                    return None
                if self._waiting:
                    due = self._first_at + self.delay - time.monotonic()
                    if due <= 0 or len(self._waiting) >= _ROUND:
                        self._in_flight, self._waiting = self._waiting[:_ROUND], self._waiting[_ROUND:]
                        self._in_flight_read = min(self._waiting_read[:_ROUND])
                        self._waiting_read = self._waiting_read[_ROUND:]
                        self._first_at = time.monotonic() if self._waiting else 0.0
                        return self._in_flight
                    self._cond.wait(due)
                else:
                    self._cond.wait(self._relay.delete_every)
                    if not self._waiting and not self._closing and self._relay.unflushed:
                        return []  # idle: make the deletes of relayed cells durable

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # not expected: flush() must not wait for a thread that is gone
            with self._cond:
                self._error, self._stopped = exc, True
                self._cond.notify_all()
            raise

    def _loop(self) -> None:
        pause = _RETRY_FIRST
        while (items := self._take()) is not None:
            relayed = 0
            try:
                if items:  # a failed round retried past the hold is read again: only what still waits is copied
                    relayed = self._relay.relay(items, self._in_flight_read).relayed
                else:
                    self._relay.flush_deletes()
            except Exception as exc:  # noqa: BLE001 - kept and retried; flush() reports it
                if self.conn.closed:  # its owner went without close(): what waits stays in the outboxes
                    with self._cond:
                        self._error, self._stopped = exc, True
                        self._cond.notify_all()
                    if items:
                        log.warning("the connection of the outbox relayer of %s was closed with %d cells "
                                    "unrelayed: they stay in their rows' outboxes", self.table, len(items))
                    return
                log.warning("relaying %d outbox cells of %s failed (%s: %s); retrying in %.1f s", len(items),
                            self.table, type(exc).__name__, exc, pause)
                with self._cond:
                    self._error = exc
                    self._attempts += 1
                    self._retry_now = False
                    self._cond.notify_all()
                    self._cond.wait_for(lambda: self._closing or self._retry_now, pause)
                    if self._closing:
                        return  # close() gives up: the cells stay in the outboxes
                pause = min(pause * 2, _RETRY_LAST)
                continue
            pause = _RETRY_FIRST
            with self._cond:
                self._attempts += 1
                self.relayed += relayed
                self._keys.difference_update((row, cell.qualifier) for row, cell in items)
                self._in_flight = []
                self._error = None
                self._cond.notify_all()
