"""Relaying outboxes: copy committed outbox cells into their queues, then delete them (see
:mod:`connector.transactions.layout` for what a relay writes).

Delivery: at least once, and repeats are harmless. An export entry row holds key and seq, and an update holds
its id and timestamp, so a relay that crashed after copying and before deleting, or two relays of the same
cell at once, write the same entry or update again. The order is fixed: the copies are durable before the
bucket marks, and the marks before the outbox cells are deleted, so nothing a crash interrupts is lost.

Finding what crashed producers left: the outbox family is a locality group of its own
(:meth:`RowTransactions.init`), so :func:`relay_table` reads only the outbox's files, whose size is the
outbox cells not yet relayed plus the deletes of relayed ones until the next major compaction, not the
table. A table without that locality group costs a scan of the table (the server filters the family).

No relay compares a cell's seq with a clock: a seq is its producer's wall clock, which may run ahead of ours
or behind it. A one-shot relay (:func:`relay_table`, :func:`relay_sources`: a batch drain's, a bootstrap's,
``accumulo-export tx relay``) relays every cell it finds. A relay that leaves a live producer's fresh cells to
that producer (:class:`PeriodicRelay`, a producer relaying other producers' leftovers) tells them by what it
saw itself (:class:`Sightings`): a cell is left over once it is still there ``grace`` seconds, of this
process's monotonic clock, after this process first saw it.

Every relay is held to the bound a tombstone purge relies on (:mod:`connector.snapshot.purge`, DESIGN.md: "The
purge's bound"): it copies an outbox cell to its queue only within :data:`RELAY_HOLD_SECONDS` of reading it (a
producer's own cells: of sending their commit). A relay that stalled longer (a GC pause, a suspended VM, a relay
failing and retried) reads the cells again and copies only those still in their outboxes: one another relay moved
meanwhile may have been exported and deleted since, and its old copy would come back to the queue after a purge's
readings. The outbox deletes still follow a copy that returned late: the queue holds the entries then, so the
export waits there, where the watermark sees it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from connector.accumulo import BatchWriter, Connection, Mutation, Range
from connector.accumulo.errors import SendDeadlinePassedError
from connector.accumulo.writer import EXPORT_HOLD_SECONDS, send_deadline
from connector.counters import FieldCounters
from connector.queue.layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from connector.queue.marks import marks_for_entry_rows
from connector.queue.settings import DEFAULT_RELAY_SECONDS

from .layout import UPDATE_FAMILY, UPDATE_KIND, MalformedOutboxError, OutboxCell, TxLayout, parse_outbox
from .targets import recorded_sources

log = logging.getLogger(__name__)

#: outbox cells copied per round of flushes by relay_table
RELAY_CHUNK = 2_000
#: a relay copies an outbox cell to its queue only within this long after reading it (seconds): the drain's hold,
#: so that the copy, flushed by a writer that times out, lands within the bound a purge waits for
RELAY_HOLD_SECONDS = EXPORT_HOLD_SECONDS


@dataclass
class RelayStats(FieldCounters):
    """What relays did: ``relayed`` outbox cells copied and deleted (``exports`` + ``updates``), ``fresh``
    cells a :class:`PeriodicRelay` left to their producer because it had not yet seen them there for its grace
    period (a one-shot relay leaves none), ``malformed`` cells left in place (named in ``errors``), ``tables``
    source tables looked at, ``held`` cells read again because more than ``RELAY_HOLD_SECONDS`` passed between their
    read and their copy, ``gone`` of those no longer in their outbox then (another relay moved them: not copied)."""

    relayed: int = 0
    exports: int = 0
    updates: int = 0
    fresh: int = 0
    malformed: int = 0
    tables: int = 0
    held: int = 0
    gone: int = 0
    errors: list[str] = field(default_factory=list)


class Relay:
    """Relays outbox cells of one source table. Writers are opened on first use and kept until ``close()``.

    ``delete_every``: the deletes of relayed outbox cells are made durable at most this often (seconds; 0:
    with every relay) and always by ``close()``. A delete lost in a crash only means the cell is relayed
    again, which is harmless; until its flush, the cell is listed in ``unflushed`` so that its producer does
    not take it for a leftover and relay it twice."""

    def __init__(self, conn: Connection, source_table: str, layout: TxLayout,
                 writer_options: Mapping[str, Any] | None = None, *, delete_every: float = 0.0) -> None:
        self.conn, self.source_table, self.layout = conn, source_table, layout
        self._options = dict(writer_options or {})
        self._writers: dict[str, BatchWriter] = {}
        self.delete_every = delete_every
        self.unflushed: set[tuple[bytes, bytes]] = set()  # (row, outbox qualifier) deleted, not yet durable
        self._deletes_flushed = time.monotonic()

    def relay(self, items: Sequence[tuple[bytes, OutboxCell]], read_at: float | None = None) -> RelayStats:
        """Copy ``(source row, outbox cell)`` items to their queues, flush, mark, then delete them.

        ``read_at``: the moment (``time.monotonic()``) before the items were read from their outboxes, or before
        their commit was sent (a producer's own cells); None: now. Items held longer than ``RELAY_HOLD_SECONDS``
        by the time they would be copied are read again first, and only those still in their outboxes are copied
        (counted in ``held`` and ``gone``)."""
        stats = RelayStats()
        read_at = time.monotonic() if read_at is None else read_at
        while True:
            if items and time.monotonic() - read_at > RELAY_HOLD_SECONDS:
                read_at = time.monotonic()
                still = self._still_waiting(items)
                stats.held += len(items)
                stats.gone += len(items) - len(still)
                log.warning("relay of %s: %d outbox cells were held over the bound of %.0f s since their read: read "
                            "again, %d still wait (the others were moved by another relay)", self.source_table,
                            len(items), RELAY_HOLD_SECONDS, len(still))
                items = still
            if not items:
                return stats
            entry_rows = self._copy(items, read_at)
            if entry_rows is not None:
                break
        for _, cell in items:
            if cell.kind == UPDATE_KIND:
                stats.updates += 1
            else:
                stats.exports += 1
        for table, rows in entry_rows.items():
            self._writers[table].add_mutations(marks_for_entry_rows(rows))
            self._writers[table].flush()
        source = self._writer(self.source_table)
        for row, cell in items:
            source.add_mutation(Mutation(row).delete(self.layout.outbox_family, cell.qualifier, timestamp=cell.ts))
            self.unflushed.add((row, cell.qualifier))
        if time.monotonic() - self._deletes_flushed >= self.delete_every:
            self.flush_deletes()
        stats.relayed = len(items)
        return stats

    def _copy(self, items: Sequence[tuple[bytes, OutboxCell]], read_at: float) -> dict[str, list[bytes]] | None:
        """Write the items' copies to their queues and flush them (durable before the marks and the outbox
        deletes); the export entry rows written, per queue table. The writers send no copy, first or replayed after
        a reconnect, later than the hold (``send_deadline``): past it, what was not sent is dropped and None
        returned, nothing deleted from the outboxes, and the caller reads the items again (what was sent went
        within the hold, and lands within the writer's timeout)."""
        targets = {cell.table for _, cell in items}
        if self.source_table in targets and self.unflushed:
            self.flush_deletes()  # the combine's rows: outbox and queue share a writer, which an abort would drop
        entry_rows: dict[str, list[bytes]] = defaultdict(list)
        try:
            with send_deadline(read_at + RELAY_HOLD_SECONDS):
                for _, cell in items:
                    writer = self._writer(cell.table)
                    if cell.kind == UPDATE_KIND:
                        writer.add_mutation(Mutation(cell.row).put(UPDATE_FAMILY, cell.uid, cell.value,
                                                                   timestamp=cell.ts))
                    else:
                        # no timestamp: an export queue entry carries the server's time (the drain deletes at it)
                        writer.add_mutation(Mutation(cell.row).put(ENTRY_FAMILY, ENTRY_QUALIFIER, cell.value))
                        entry_rows[cell.table].append(cell.row)
                for table in targets:
                    self._writers[table].flush()
        except SendDeadlinePassedError:
            for table in targets:  # what the other targets' writers hold was never sent either
                dropped = self._writers.pop(table, None)
                if dropped is not None:
                    dropped.abort()
            return None
        return entry_rows

    def _still_waiting(self, items: Sequence[tuple[bytes, OutboxCell]]) -> list[tuple[bytes, OutboxCell]]:
        """The items still in their rows' outboxes (same qualifier and timestamp), read now."""
        rows = sorted({row for row, _ in items})
        present = {(cell.row, cell.cq, cell.ts)
                   for cell in self.conn.batch_read(self.source_table, [Range.exact_row(r) for r in rows],
                                                    columns=[self.layout.outbox_family])}
        return [(row, cell) for row, cell in items if (row, cell.qualifier, cell.ts) in present]

    def flush_deletes(self) -> None:
        """Make the deletes of relayed outbox cells durable."""
        writer = self._writers.get(self.source_table)
        if writer is not None:
            writer.flush()
        self.unflushed.clear()
        self._deletes_flushed = time.monotonic()

    def _writer(self, table: str) -> BatchWriter:
        writer = self._writers.get(table)
        if writer is None:
            writer = self._writers[table] = self.conn.batch_writer(table, **self._options)
        return writer

    def close(self) -> None:
        self.flush_deletes()
        writers, self._writers = self._writers, {}
        for writer in writers.values():
            writer.close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pending_outbox(conn: Connection, table: str, layout: TxLayout | None = None,
                   batch_size: int = 1_000) -> Iterable[tuple[bytes, bytes, int, bytes]]:
    """The outbox cells of ``table`` as ``(row, qualifier, ts, value)``, in key order."""
    layout = layout or TxLayout()
    for cell in conn.scan(table, columns=[layout.outbox_family], batch_size=batch_size):
        yield cell.row, cell.cq, cell.ts, cell.value


def _timed_outbox(conn: Connection, table: str, layout: TxLayout,
                  batch_size: int = 1_000) -> Iterator[tuple[float, tuple[bytes, bytes, int, bytes]]]:
    """:func:`pending_outbox`'s cells, each with the moment (``time.monotonic()``) before the page holding it was
    asked for: no later than the server read it, which is where a relay's hold starts."""
    pages = iter(conn.scan_batches(table, columns=[layout.outbox_family], batch_size=batch_size))
    while True:
        asked_at = time.monotonic()
        page = next(pages, None)
        if page is None:
            return
        columns = [page.column(name).to_pylist() for name in ("row", "cq", "ts", "value")]
        for cell in zip(*columns, strict=True):
            yield asked_at, cell


class Sightings:
    """When this process first saw each outbox cell, by its own monotonic clock: how a relay that leaves a
    live producer's fresh cells to that producer tells a leftover (a cell still there at least ``grace``
    seconds after this process first saw it) without comparing a cell's seq, another machine's clock, with a
    clock of ours.

    Cells are seen in groups (a table for a periodic relay, a row for a producer): a :meth:`look` at a group
    replaces what is remembered of it by what that look saw, so cells relayed or deleted meanwhile are
    forgotten. At most ``max_groups`` groups are remembered (the least recently looked at go first: their
    cells count as new again, which only delays their relay). Not thread-safe: callers take turns."""

    def __init__(self, grace: float, *, max_groups: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if grace < 0:
            raise ValueError(f"grace must be >= 0 seconds, got {grace!r}")
        if max_groups < 1:
            raise ValueError(f"max_groups must be >= 1, got {max_groups!r}")
        self.grace, self.max_groups, self._clock = grace, max_groups, clock
        self._groups: OrderedDict[Hashable, dict[Hashable, float]] = OrderedDict()

    def look(self, group: Hashable) -> Look:
        """A look at ``group``'s cells now: ask :meth:`Look.ready` of each cell present, then
        :meth:`Look.close` (a look abandoned half way changes nothing)."""
        return Look(self, group, self._clock())

    def __len__(self) -> int:
        """Cells remembered."""
        return sum(len(seen) for seen in self._groups.values())


class Look:
    """One look at a group's cells, at one instant of :class:`Sightings`' clock."""

    def __init__(self, sightings: Sightings, group: Hashable, now: float) -> None:
        self._sightings, self._group, self._now = sightings, group, now
        self._before = sightings._groups.get(group, {})
        self._seen: dict[Hashable, float] = {}

    def ready(self, key: Hashable) -> bool:
        """Whether the cell ``key`` (present now) was first seen at least ``grace`` seconds before this look."""
        first = self._seen[key] = self._before.get(key, self._now)
        return self._now - first >= self._sightings.grace

    def close(self) -> None:
        """Remember what this look saw of the group, and only that."""
        groups = self._sightings._groups
        groups.pop(self._group, None)
        if self._seen:
            groups[self._group] = self._seen
            while len(groups) > self._sightings.max_groups:
                groups.popitem(last=False)


def relay_table(conn: Connection, table: str, layout: TxLayout | None = None, *,
                writer_options: Mapping[str, Any] | None = None) -> RelayStats:
    """Relay every outbox cell of ``table``, whatever its seq (a producer's clock may run ahead of ours: its
    cells are relayed all the same). Repeating it is harmless; a live producer's cell relayed here as well
    as by its producer only reaches its queue twice, which the queue's entry rows make harmless. Malformed
    cells are left in place, counted and named in the stats."""
    return _relay_outbox(conn, table, layout or TxLayout(), writer_options, None)


def _relay_outbox(conn: Connection, table: str, layout: TxLayout, writer_options: Mapping[str, Any] | None,
                  look: Look | None) -> RelayStats:
    """Relay ``table``'s outbox cells; with ``look``, only those it saw before (the rest are ``fresh``)."""
    stats = RelayStats(tables=1)
    chunk: list[tuple[bytes, OutboxCell]] = []
    chunk_read_at = 0.0  # when the page holding the chunk's first cell was asked for
    with Relay(conn, table, layout, writer_options) as relay:
        for asked_at, (row, qualifier, ts, value) in _timed_outbox(conn, table, layout):
            try:
                cell = parse_outbox(qualifier, value, ts)
            except MalformedOutboxError as exc:
                stats.malformed += 1
                if len(stats.errors) < 20:
                    stats.errors.append(f"table {table!r} row {row[:100]!r}: {exc}")
                log.warning("relay of %s: row %r: %s (left in place)", table, row[:100], exc)
                continue
            if look is not None and not look.ready((row, qualifier, ts)):
                stats.fresh += 1
                continue
            if not chunk:
                chunk_read_at = asked_at
            chunk.append((row, cell))
            if len(chunk) >= RELAY_CHUNK:
                stats += relay.relay(chunk, chunk_read_at)
                chunk = []
        stats += relay.relay(chunk, chunk_read_at)
    if look is not None:
        look.close()
    return stats


def relay_sources(conn: Connection, queue_table: str, config_row: bytes, **options: Any) -> RelayStats:
    """Relay every outbox cell of every table recorded as feeding the queue with this config row (as
    :func:`relay_table` does; ``options`` are its)."""
    stats = RelayStats()
    for table, layout in recorded_sources(conn, queue_table, config_row).items():
        stats += relay_table(conn, table, layout, **options)
    return stats


class PeriodicRelay:
    """Relays what producers left in the outboxes of the tables recorded as feeding a queue, a pass every
    ``seconds / 2`` (the first at :meth:`start`), on a thread of its own (a streaming drain runs one).

    A live producer relays its own cells within about its ``relay_delay``, so a pass leaves a cell to its
    producer until this relay has seen it there for half the period: it relays a cell at the first pass
    that finds it again at least ``seconds / 2`` (of this process's monotonic clock) after the pass that
    first saw it. An outbox a crash left is therefore relayed within about ``seconds``, however far its
    producer's clock, and so its seqs, ran ahead of ours. Errors are logged and retried at the next pass;
    ``stats`` keeps the totals, and ``on_relay(stats)`` (when given) is told of each pass that relayed
    something, as it happens (how a job's report and metrics count them while it runs)."""

    def __init__(self, connect: Callable[[], Connection], queue_table: str, config_row: bytes,
                 seconds: float = DEFAULT_RELAY_SECONDS, *,
                 on_relay: Callable[[RelayStats], None] | None = None) -> None:
        if seconds <= 0:
            raise ValueError(f"relay period must be > 0 seconds, got {seconds!r}")
        self.connect, self.queue_table, self.config_row, self.seconds = connect, queue_table, config_row, seconds
        self.on_relay = on_relay
        self.stats = RelayStats()
        self.failures = 0
        self._sightings = Sightings(seconds / 2)
        self._pass = threading.Lock()  # run_once called while the thread runs: the passes take turns
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PeriodicRelay:
        self._thread = threading.Thread(target=self._run, name="outbox-relay", daemon=True)
        self._thread.start()
        return self

    def run_once(self) -> RelayStats:
        """One pass: relay the cells an earlier pass saw at least ``seconds / 2`` ago, note the others."""
        with self._pass:
            conn = self.connect()
            stats = RelayStats()
            for table, layout in recorded_sources(conn, self.queue_table, self.config_row).items():
                stats += _relay_outbox(conn, table, layout, None, self._sightings.look(table))
        self.stats += stats
        if stats.relayed:
            log.info("relayed %d outbox cells that producers left (%d exports, %d updates)", stats.relayed,
                     stats.exports, stats.updates)
            if self.on_relay is not None:
                try:
                    self.on_relay(stats)
                except Exception as exc:  # noqa: BLE001 - the relay happened; only its report is lost
                    log.warning("relayed %d outbox cells but could not report them (%s: %s)", stats.relayed,
                                type(exc).__name__, exc)
        return stats

    def _run(self) -> None:
        while True:
            try:
                self.run_once()
            except Exception as exc:  # noqa: BLE001 - a relay failing must not stop the drain; retried next pass
                self.failures += 1
                log.warning("outbox relay failed (%s: %s); retrying in %.1f s", type(exc).__name__, exc,
                            self.seconds / 2)
            if self._stop.wait(self.seconds / 2):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    close = stop
