"""How far a queue's destinations are: the watermark, and waiting for one commit to reach them (read-your-writes).

A commit's exports wait in one of three places until a drain has exported them to every destination of the
queue: the outbox of its row (not relayed yet), the queue (relayed, not drained yet) or the dead-letter range
(drained, but refused: never exported). The **watermark** is derived from what waits there, and from nothing
else: when something waits, it is one below the lowest seq waiting; every commit with a lower seq that was
visible when the watermark was computed is on every destination of the queue. No clock is compared with
another: seqs come from the producers' clocks and are only compared with each other.

**The watermark's scans.** The answer stays safe while relays, drains and requeues run because the scans
follow the moves an export makes, and every move writes the export's new place before it deletes the old one:

- outbox → queue (a relay writes the entry, then deletes the outbox cell): the outboxes are scanned first;
- queue → destination (a drain exports, then deletes the entry): nothing waits any more, rightly;
- queue → dead letter (a drain writes the dead letter, then deletes the entry): dead letters are scanned after
  the queue;
- dead letter → queue (``queue dead-letters --requeue`` writes the entry back, then deletes the dead letter):
  the one move *against* the order of the scans, so the dead letters are scanned **before the queue as well**.

An export one scan missed because it moved on is found by the next scan: a dead letter requeued before the
first dead-letter scan reached it is an entry before the queue scan starts (or, drained since, on the
destinations; or, dead-lettered again, found by the second dead-letter scan). What the scans alone cannot see
is an export that moves back and forth within one computation: dead-lettered by a drain before the queue scan
reached it, then requeued again before the second dead-letter scan reached its dead letter. That takes a
requeue that *listed* the dead letters after the computation began, so every requeue changes the queue's
requeue token (``c:requeue`` in its config row) once it has listed them and before it writes any entry, and
the computation reads the token before its scans and after them: when it changed, the computation starts again
(a requeue that changed the token before the first reading listed only dead letters older than the
computation, the case above).

**Destinations not built yet.** A destination registered with the queue
(:mod:`connector.queue.destinations`) is fed by the drains only from its registration on: what was drained
before it is there only once a bootstrap *planned after the registration* finished. So it holds the watermark
(``Watermark.unbuilt``, and :meth:`Watermark.reached` is False) while its bootstrap state row
(``<qid>#bootstrap:<name>``, :mod:`connector.snapshot.state`) holds a plan (unfinished) or a lease (running),
or holds no clock probe at least as new as its registration cell (no bootstrap since it was registered: a
bootstrap writes the probe, when it plans, after registering again). Both cells live in the queue's rows
between ``<qid>#`` and ``<qid>:``, one tablet (unless it grew past the split threshold and was split
between them), whose timestamps never go back. An unfinished bootstrap of a
destination that is not registered (a drain's own) holds it too.

**A wrong queue is refused**, not read as an empty one: the queue must have been made by ``init`` with the
bucket count and serializers given (:func:`connector.queue.stored_config.require_config`; entries of another
bucket count would not parse, and an unknown queue would wait for nothing).

:func:`wait_for_seq` is read-your-writes across clusters: after ``seq = txs.run(row, fn)`` returned, it returns
once nothing with a seq at or below ``seq`` waits, that is once the commit's exports are on every destination
(and every registered destination is built).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Connection, Range
from connector.errors import ConnectorError
from connector.queue import QueueConfig
from connector.queue.dead_letters import REQUEUE_QUALIFIER
from connector.queue.destinations import DESTINATION_FAMILY
from connector.queue.errors import QueueError
from connector.queue.layout import CONFIG_FAMILY, DEAD_FAMILY, DEAD_REASON, ENTRY_FAMILY, ENTRY_QUALIFIER
from connector.queue.status import KEYS_ONLY
from connector.queue.stored_config import require_config

from .layout import EXPORT_KIND
from .targets import recorded_sources

#: cells a scan page holds
_PAGE = 10_000


@dataclass(frozen=True)
class Unbuilt:
    """A destination that holds the watermark: ``destination`` (its name, ``<cluster>/<table>``) and ``why``;
    ``since_us``: since when (µs of the tablet server's clock, as its cells' timestamps): the unfinished
    bootstrap's plan, else the destination's registration."""

    destination: str
    why: str
    since_us: int | None = None

    def __str__(self) -> str:
        return f"destination {self.destination}: {self.why}"


#: the kinds of what holds a watermark (:attr:`Pin.kind`): an outbox cell not relayed, a queue entry not drained, a
#: dead letter, a destination not built yet
OUTBOX, QUEUE_ENTRY, DEAD_LETTER, UNBUILT_DESTINATION = "outbox", "queue_entry", "dead_letter", "unbuilt_destination"
WAITING_KINDS = (OUTBOX, QUEUE_ENTRY, DEAD_LETTER)
_KIND_NAMES = {OUTBOX: "an outbox cell", QUEUE_ENTRY: "a queue entry", DEAD_LETTER: "a dead letter"}


@dataclass(frozen=True)
class Pin:
    """What of one ``kind`` holds a watermark: ``count`` of them, and ``lowest``: for the kinds that wait
    (:data:`WAITING_KINDS`) the lowest seq among them (µs of the producers' clocks); for
    :data:`UNBUILT_DESTINATION`, the earliest :attr:`Unbuilt.since_us` (None when not known)."""

    kind: str
    count: int
    lowest: int | None


@dataclass(frozen=True)
class Watermark:
    """What waits for a queue's destinations: ``outbox`` cells not relayed, ``entries`` not drained,
    ``dead_letters`` refused, and the ``lowest`` seq among them (None: nothing waits); ``unbuilt``: the
    destinations not built yet, which hold it whatever waits; ``started_us``: this host's clock (µs) when the
    computation began; ``pins``: per kind of what holds it (:class:`Pin`; a kind with nothing has none)."""

    qid: str
    outbox: int = 0
    entries: int = 0
    dead_letters: int = 0
    lowest: int | None = None
    unbuilt: tuple[Unbuilt, ...] = ()
    started_us: int = 0
    pins: tuple[Pin, ...] = ()

    def pin(self, kind: str) -> Pin | None:
        """What of ``kind`` holds it (None: nothing of that kind)."""
        return next((p for p in self.pins if p.kind == kind), None)

    @property
    def holder(self) -> str | None:
        """The kind of what waits with the lowest seq (None: nothing waits)."""
        return next((p.kind for p in self.pins if p.kind in WAITING_KINDS and p.lowest == self.lowest), None)

    @property
    def waiting(self) -> int:
        return self.outbox + self.entries + self.dead_letters

    @property
    def seq(self) -> int | None:
        """The watermark: every commit with a seq up to it (visible when it was computed) is on every built
        destination. None when nothing waits: every visible commit is."""
        return None if self.lowest is None else self.lowest - 1

    def reached(self, seq: int) -> bool:
        """Whether a commit at ``seq`` (visible when this was computed) is on every destination."""
        return not self.unbuilt and (self.lowest is None or self.lowest > seq)

    def describe(self) -> str:
        held = "; ".join(map(str, self.unbuilt))
        if self.lowest is None:
            return f"{held}: it holds every commit" if held else "nothing waits: every commit is on the destinations"
        parts = [f"{n:,} {what}" for n, what in ((self.outbox, "outbox cells not relayed"),
                                                 (self.entries, "queue entries not drained"),
                                                 (self.dead_letters, "dead letters")) if n]
        holder = f", {_KIND_NAMES[self.holder]}" if self.holder else ""
        return (f"watermark seq {self.seq} ({', '.join(parts)}; the lowest waiting seq is {self.lowest}{holder})"
                + (f"; {held}" if held else ""))


def queue_watermark(conn: Connection, queue: QueueConfig) -> Watermark:
    """What waits for ``queue``'s destinations now (see the module's description for the order of the scans).
    ``QueueConfigError`` (one line) when ``queue`` is not a queue ``init`` made with this configuration."""
    require_config(conn, queue)
    return _watermark(conn, queue)


def _watermark(conn: Connection, queue: QueueConfig) -> Watermark:
    for _ in range(_ATTEMPTS):
        token = _requeue_token(conn, queue)
        mark = _scan(conn, queue)
        if _requeue_token(conn, queue) == token:
            return mark
    raise QueueError(f"queue {queue.qid!r} in table {queue.table!r}: dead letters were requeued during each of "
                     f"{_ATTEMPTS} computations of the watermark; try again once the requeues are done")


#: computations of the watermark a requeue running meanwhile may spoil before giving up
_ATTEMPTS = 10


def _requeue_token(conn: Connection, queue: QueueConfig) -> bytes | None:
    """The token every requeue of the queue's dead letters changes (None: never requeued)."""
    for cell in conn.scan(queue.table, Range.exact_row(queue.layout.config_row),
                          columns=[(CONFIG_FAMILY, REQUEUE_QUALIFIER)], batch_size=2):
        return cell.value
    return None


def _scan(conn: Connection, queue: QueueConfig) -> Watermark:
    started_us = time.time_ns() // 1000
    layout = queue.layout
    lowest: dict[str, int] = {}  # kind -> the lowest seq of that kind waiting

    def lower(kind: str, seq: int | None) -> None:
        if seq is not None:
            lowest[kind] = min(lowest.get(kind, seq), seq)

    unbuilt = _unbuilt(conn, queue)  # before the scans: a bootstrap that finishes meanwhile saw all they see
    outbox = 0
    # an export's outbox qualifier: e:<queue table>:<entry row>, and the queue's entry rows start <qid>:
    target = b":".join([EXPORT_KIND, queue.table.encode("ascii"), queue.qid.encode("utf-8")]) + b":"
    for table, tx_layout in recorded_sources(conn, queue.table, layout.config_row).items():
        for page in conn.scan_batches(table, columns=[tx_layout.outbox_family], iterators=[KEYS_ONLY],
                                      batch_size=_PAGE):
            mine = _starts_with(page.column("cq"), target)
            found = pc.sum(mine).as_py() or 0
            if found:
                outbox += found
                lower(OUTBOX, pc.min(page.column("ts").filter(mine)).as_py())
    before, lowest_dead = _dead_letters(conn, queue)  # before the queue too: a requeue moves backwards
    lower(DEAD_LETTER, lowest_dead)
    entries = 0
    for page in conn.scan_batches(queue.table, layout.queue_range(), columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)],
                                  iterators=[KEYS_ONLY], batch_size=_PAGE):
        parsed = layout.parse_rows(page.column("row"))
        entries += page.num_rows
        lower(QUEUE_ENTRY, pc.min(parsed.column("seq")).as_py())
    dead, lowest_dead = _dead_letters(conn, queue)
    lower(DEAD_LETTER, lowest_dead)
    dead = max(before, dead)
    counts = {OUTBOX: outbox, QUEUE_ENTRY: entries, DEAD_LETTER: dead}
    pins = [Pin(kind, counts[kind], lowest[kind]) for kind in WAITING_KINDS if kind in lowest]
    if unbuilt:
        since = [u.since_us for u in unbuilt if u.since_us is not None]
        pins.append(Pin(UNBUILT_DESTINATION, len(unbuilt), min(since) if since else None))
    return Watermark(queue.qid, outbox, entries, dead, min(lowest.values(), default=None), unbuilt, started_us,
                     tuple(pins))


def _dead_letters(conn: Connection, queue: QueueConfig) -> tuple[int, int | None]:
    """How many dead letters the queue has, and the lowest seq among them."""
    layout = queue.layout
    dead, lowest = 0, None
    prefix = len(layout.dead_letter_prefix)
    for page in conn.scan_batches(queue.table, layout.dead_letter_range(), columns=[(DEAD_FAMILY, DEAD_REASON)],
                                  iterators=[KEYS_ONLY], batch_size=_PAGE):
        originals = pc.binary_slice(page.column("row"), prefix, 2**31 - 1)
        dead += page.num_rows
        seq = pc.min(layout.parse_rows(originals).column("seq")).as_py()
        lowest = seq if lowest is None else min(lowest, seq)
    return dead, lowest


#: the cells of a bootstrap's state row that tell whether it finished (:mod:`connector.snapshot.state`, a layer
#: above: tests/test_watermark_races.py checks these are its names)
BOOTSTRAP_FAMILY, BOOTSTRAP_PLAN, BOOTSTRAP_LEASE, BOOTSTRAP_CLOCK = b"b", b"plan", b"lease", b"clock"


def _unbuilt(conn: Connection, queue: QueueConfig) -> tuple[Unbuilt, ...]:
    """Why destinations of the queue are not built yet (see the module's description): two short scans of the
    queue's own rows."""
    registered = {cell.cq.decode("utf-8", "replace"): cell.ts
                  for cell in conn.scan(queue.table, Range.exact_row(queue.layout.config_row),
                                        columns=[DESTINATION_FAMILY], batch_size=100)}
    prefix = queue.layout.bootstrap_row("")
    states: dict[str, dict[bytes, int]] = {}
    for cell in conn.scan(queue.table, Range.prefix(prefix),
                          columns=[(BOOTSTRAP_FAMILY, q) for q in (BOOTSTRAP_PLAN, BOOTSTRAP_LEASE, BOOTSTRAP_CLOCK)]):
        states.setdefault(cell.row[len(prefix):].decode("utf-8", "replace"), {})[cell.cq] = cell.ts
    why: list[Unbuilt] = []
    for name in sorted(set(registered) | set(states)):
        state = states.get(name, {})
        since = _micros(registered.get(name))
        if BOOTSTRAP_PLAN in state:
            why.append(Unbuilt(name, "bootstrap not finished", _micros(state[BOOTSTRAP_PLAN])))
        elif name not in registered:
            continue  # a drain's own destination, or a purge's or repair's lease (table-id:...)
        elif BOOTSTRAP_LEASE in state:
            why.append(Unbuilt(name, "bootstrap running", since))
        elif state.get(BOOTSTRAP_CLOCK, -1) < registered[name]:
            why.append(Unbuilt(name, "registered, and no bootstrap of it finished since", since))
    return tuple(why)


def _micros(ts_ms: int | None) -> int | None:
    """A cell's timestamp (ms) in µs, as seqs are."""
    return None if ts_ms is None else ts_ms * 1000


def _starts_with(values: pa.Array, prefix: bytes) -> pa.Array:
    """Which binary ``values`` start with ``prefix``."""
    return pc.equal(pc.binary_slice(values, 0, len(prefix)), pa.scalar(prefix, pa.binary()))


class WaitTimeout(ConnectorError, TimeoutError):
    """:func:`wait_for_seq` gave up: the commit's exports did not reach the destinations in time (the message
    says how far the watermark got and what waits)."""


def wait_for_seq(conn: Connection, queue: QueueConfig, seq: int, *, timeout: float = 60.0, poll: float = 0.2,
                 progress: Callable[[Watermark], None] | None = None) -> Watermark:
    """Return once a commit at ``seq`` (one that committed before this call) is on every destination of
    ``queue``: nothing at or below ``seq`` waits in the outboxes feeding it, in it or in its dead letters.
    :class:`WaitTimeout` after ``timeout`` seconds, saying how far it got. ``progress(watermark)`` hears each
    look."""
    require_config(conn, queue)
    deadline = time.monotonic() + timeout
    while True:
        mark = _watermark(conn, queue)
        if progress is not None:
            progress(mark)
        if mark.reached(seq):
            return mark
        if time.monotonic() >= deadline:
            stuck = " (a dead letter holds it: see 'accumulo-export queue dead-letters')" if mark.dead_letters else ""
            raise WaitTimeout(f"seq {seq} of queue {queue.qid!r} did not reach its destinations within {timeout:g} s: "
                              f"{mark.describe()}{stuck}")
        time.sleep(poll)
