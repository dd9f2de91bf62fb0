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
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from connector.accumulo import BatchWriter, Connection, Mutation
from connector.counters import FieldCounters
from connector.queue.layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from connector.queue.marks import marks_for_entry_rows
from connector.queue.settings import DEFAULT_RELAY_SECONDS

from .layout import UPDATE_FAMILY, UPDATE_KIND, MalformedOutboxError, OutboxCell, TxLayout, clock_us, parse_outbox
from .targets import recorded_sources

log = logging.getLogger(__name__)

#: outbox cells copied per round of flushes by relay_table
RELAY_CHUNK = 2_000


@dataclass
class RelayStats(FieldCounters):
    """What relays did: ``relayed`` outbox cells copied and deleted (``exports`` + ``updates``), ``young``
    cells left because they were younger than the minimum age (a live producer relays them itself),
    ``malformed`` cells left in place (named in ``errors``), ``tables`` source tables looked at."""

    relayed: int = 0
    exports: int = 0
    updates: int = 0
    young: int = 0
    malformed: int = 0
    tables: int = 0
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

    def relay(self, items: Sequence[tuple[bytes, OutboxCell]]) -> RelayStats:
        """Copy ``(source row, outbox cell)`` items to their queues, flush, mark, then delete them."""
        stats = RelayStats()
        if not items:
            return stats
        entry_rows: dict[str, list[bytes]] = defaultdict(list)
        for _, cell in items:
            writer = self._writer(cell.table)
            if cell.kind == UPDATE_KIND:
                writer.add_mutation(Mutation(cell.row).put(UPDATE_FAMILY, cell.uid, cell.value, timestamp=cell.ts))
                stats.updates += 1
            else:
                # no timestamp: an export queue entry carries the server's time (the drain deletes at it)
                writer.add_mutation(Mutation(cell.row).put(ENTRY_FAMILY, ENTRY_QUALIFIER, cell.value))
                entry_rows[cell.table].append(cell.row)
                stats.exports += 1
        targets = {cell.table for _, cell in items}
        for table in targets:
            self._writers[table].flush()  # durable in the queues before the marks and the outbox deletes
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


def relay_table(conn: Connection, table: str, layout: TxLayout | None = None, min_age_seconds: float = 0.0, *,
                writer_options: Mapping[str, Any] | None = None,
                clock: Callable[[], int] = clock_us) -> RelayStats:
    """Relay every outbox cell of ``table`` whose seq is at least ``min_age_seconds`` old (seqs are wall-clock
    microseconds; younger cells are most likely a live producer's, which relays them itself). Repeating it
    is harmless. Malformed cells are left in place, counted and named in the stats."""
    layout = layout or TxLayout()
    stats = RelayStats(tables=1)
    cutoff = clock() - int(min_age_seconds * 1e6)
    chunk: list[tuple[bytes, OutboxCell]] = []
    with Relay(conn, table, layout, writer_options) as relay:
        for row, qualifier, ts, value in pending_outbox(conn, table, layout):
            if ts > cutoff:
                stats.young += 1
                continue
            try:
                chunk.append((row, parse_outbox(qualifier, value, ts)))
            except MalformedOutboxError as exc:
                stats.malformed += 1
                if len(stats.errors) < 20:
                    stats.errors.append(f"table {table!r} row {row[:100]!r}: {exc}")
                log.warning("relay of %s: row %r: %s (left in place)", table, row[:100], exc)
                continue
            if len(chunk) >= RELAY_CHUNK:
                stats += relay.relay(chunk)
                chunk = []
        stats += relay.relay(chunk)
    return stats


def relay_sources(conn: Connection, queue_table: str, config_row: bytes, min_age_seconds: float = 0.0,
                  **options: Any) -> RelayStats:
    """Relay the outboxes of every table recorded as feeding the queue with this config row."""
    stats = RelayStats()
    for table, layout in recorded_sources(conn, queue_table, config_row).items():
        stats += relay_table(conn, table, layout, min_age_seconds, **options)
    return stats


class PeriodicRelay:
    """Relays, every ``seconds``, what crashed producers left in the tables recorded as feeding a queue, on a
    thread of its own (a streaming drain runs one). Cells younger than half the period are left for their
    producer, so an outbox a crash left is relayed within about ``seconds``. Errors are logged and retried at
    the next period; ``stats`` keeps the totals, and ``on_relay(stats)`` (when given) is told of each pass
    that relayed something, as it happens (how a job's report and metrics count them while it runs)."""

    def __init__(self, connect: Callable[[], Connection], queue_table: str, config_row: bytes,
                 seconds: float = DEFAULT_RELAY_SECONDS, *,
                 on_relay: Callable[[RelayStats], None] | None = None) -> None:
        if seconds <= 0:
            raise ValueError(f"relay period must be > 0 seconds, got {seconds!r}")
        self.connect, self.queue_table, self.config_row, self.seconds = connect, queue_table, config_row, seconds
        self.on_relay = on_relay
        self.stats = RelayStats()
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PeriodicRelay:
        self._thread = threading.Thread(target=self._run, name="outbox-relay", daemon=True)
        self._thread.start()
        return self

    def run_once(self) -> RelayStats:
        stats = relay_sources(self.connect(), self.queue_table, self.config_row, self.seconds / 2)
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
        while not self._stop.wait(self.seconds / 2):
            try:
                self.run_once()
            except Exception as exc:  # noqa: BLE001 - a relay failing must not stop the drain; retried next period
                self.failures += 1
                log.warning("outbox relay failed (%s: %s); retrying in %.0f s", type(exc).__name__, exc,
                            self.seconds / 2)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    close = stop
