"""Destinations registered with a queue: tables every drain of the queue exports to, besides the one it names.

A rebuilt destination (a new cluster, a new translator or layout) runs beside the old one until the switch: it
is registered in the queue's config row (``<qid>#config``, family ``d``, one cell per destination: where its
gateway is (secret *locations* only), its table, translator and delete mode). Every drain of the queue, in any
process, exports each batch to its own destination and to every registered one before deleting the batch's
entries (:class:`RegisteredExporter`), so an entry is deleted only once every destination has it durably.

**Registrations are fenced by an epoch.** Each registration (and removal) raises the queue's registration epoch
(``e:epoch`` in the config row) in the same conditional mutation. A drain process looks the registrations up
again at most every :data:`REFRESH_SECONDS`, *before exporting a batch* (never only when a task starts: a long
task sees a registration at its next batch), and then acknowledges the epoch it now uses in a row of its own
(``<qid>#ack:<process>``: the epoch and a beat that changes with every look-up). A bootstrap of a registered
destination starts reading A only once every drain process has acknowledged its registration's epoch, or has
not looked up for longer than :data:`ACK_SILENT_SECONDS` as the bootstrap itself measures it (its next batch
looks up first: :func:`wait_for_acknowledgements`). The argument needs no clock shared by two machines: a batch
a process exports without the new destination was read before its next look-up was due, hence before the
bootstrap reads A, which therefore sees the commits of every entry such a batch deleted.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from connector.accumulo import Condition, ConditionalMutation, Connection, Mutation, Range
from connector.accumulo.options import GatewayOptions
from connector.export import AccumuloExporter
from connector.export.core import EntryFailure, SequencedExport
from connector.export.fanout import FanoutExporter
from connector.export.shared import shared_exporter
from connector.export.tombstones import DeleteMode, prepare_destination
from connector.export.translators import check_translator_name
from connector.serializers import DEFAULT_SERIALIZER

from .config import QueueConfig
from .errors import QueueConfigError, QueueError
from .feeders import Feeder, feeder_of, record_feeder
from .requeued import SOURCES_FAMILY, BootstrapReading, Requeued, bootstrap_reading, left_out, read_requeued

log = logging.getLogger(__name__)

DESTINATION_FAMILY = b"d"
EPOCH_FAMILY, EPOCH_QUALIFIER = b"e", b"epoch"
ACK_FAMILY, ACK_QUALIFIER = b"a", b"e"
#: how long a drain process may go on exporting with the registrations it looked up (seconds)
REFRESH_SECONDS = 5.0
#: an acknowledgement unchanged for this long (measured by the one waiting) belongs to a drain process that has
#: not looked up since: it looks up before its next batch (more than REFRESH_SECONDS, for the clocks' rates)
ACK_SILENT_SECONDS = 1.5 * REFRESH_SECONDS
#: the epoch an acknowledgement holds while its process looks the registrations up
LOOKING_UP = -1
#: attempts of a registration racing other registrations of the same queue
_REGISTER_ATTEMPTS = 20


@dataclass(frozen=True)
class Destination:
    """A destination table: ``name`` (``<cluster>/<table>``), its cluster's gateway, the table, how exports
    become its cells (``translator``) and how its deletes are written (``delete_mode``: the mode its table
    records, filled in by :func:`register_destination`; None: the table's, whatever it is)."""

    name: str
    gateway: GatewayOptions
    table: str
    translator: str
    delete_mode: str | None = None

    def __post_init__(self) -> None:
        try:
            check_translator_name(self.translator)
            if self.delete_mode is not None:
                DeleteMode(self.delete_mode)
        except ValueError as exc:
            raise QueueConfigError(f"destination {self.name!r}: {exc}") from None

    def to_json(self) -> bytes:
        return json.dumps({"gateway": self.gateway.to_options(""), "table": self.table,
                           "translator": self.translator, "delete_mode": self.delete_mode},
                          sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, name: str, value: bytes) -> Destination:
        try:
            d = json.loads(value)
            return cls(name, GatewayOptions.parse(d["gateway"], ""), d["table"], d["translator"],
                       d.get("delete_mode"))
        except (ValueError, KeyError, TypeError) as exc:
            raise QueueConfigError(f"registered destination {name!r}: unreadable ({exc})") from None


@dataclass(frozen=True)
class Registrations:
    """The destinations registered with a queue, by name, and the queue's registration epoch; as a drain process
    looks them up, also the records of the re-queued entries (:mod:`.requeued`)."""

    epoch: int
    destinations: tuple[Destination, ...]
    requeued: Requeued = field(default_factory=dict)
    #: the tables whose outboxes feed the queue (recorded by their producers)
    sources: tuple[str, ...] = ()


def read_registrations(conn: Connection, queue: QueueConfig) -> Registrations:
    """The queue's registrations and epoch (one scan of its config row)."""
    epoch, found, sources = 0, [], []
    columns = [DESTINATION_FAMILY, (EPOCH_FAMILY, EPOCH_QUALIFIER), SOURCES_FAMILY]
    for cell in conn.scan(queue.table, Range.exact_row(queue.layout.config_row), columns=columns, batch_size=100):
        if cell.cf == EPOCH_FAMILY:
            epoch = int(cell.value)
        elif cell.cf == SOURCES_FAMILY:
            sources.append(cell.cq.decode("utf-8", "replace"))
        else:
            found.append(Destination.from_json(cell.cq.decode(), cell.value))
    return Registrations(epoch, tuple(found), sources=tuple(sorted(sources)))


def registered_destinations(conn: Connection, queue: QueueConfig) -> list[Destination]:
    """The destinations registered with the queue, by name."""
    return list(read_registrations(conn, queue).destinations)


def _change(conn: Connection, queue: QueueConfig, change: Callable[[Registrations, int], Mutation | None]) -> int:
    """Apply ``change(current, new epoch)`` (a mutation of the config row, or None for nothing to do) with the
    epoch raised, conditional on the epoch read; returns the new epoch (0: nothing changed)."""
    row = queue.layout.config_row
    for _ in range(_REGISTER_ATTEMPTS):
        current = read_registrations(conn, queue)
        epoch = current.epoch + 1
        mutation = change(current, epoch)
        if mutation is None:
            return 0
        condition = (Condition(EPOCH_FAMILY, EPOCH_QUALIFIER, str(current.epoch).encode()) if current.epoch
                     else Condition(EPOCH_FAMILY, EPOCH_QUALIFIER))
        cm = ConditionalMutation(row, [condition])
        for u in mutation.updates:
            if u.delete:
                cm.delete(u.cf, u.cq)
            else:
                cm.put(u.cf, u.cq, u.value)
        cm.put(EPOCH_FAMILY, EPOCH_QUALIFIER, str(epoch).encode())
        with conn.conditional_writer(queue.table) as writer:
            status = writer.write(cm)
        if status == "ACCEPTED" or (status == "UNKNOWN" and read_registrations(conn, queue).epoch >= epoch):
            return epoch
        time.sleep(0.05)
    raise QueueError(f"queue {queue.qid!r}: registrations kept changing under this one; try again")


def raise_epoch(conn: Connection, queue: QueueConfig, mutation: Mutation | None = None) -> int:
    """Raise the queue's registration epoch (with ``mutation`` of its config row in the same conditional
    mutation), so that every drain process looks up again what it exports with (:func:`wait_for_acknowledgements`
    tells when they did); returns the new epoch."""
    return _change(conn, queue, lambda current, epoch: mutation or Mutation(queue.layout.config_row))


def register_destination(conn: Connection, queue: QueueConfig, destination: Destination) -> int:
    """Register ``destination`` with the queue (replacing a registration of the same name; registering it again
    as it is raises the epoch all the same); returns the registration's epoch, which the drains acknowledge
    (:func:`wait_for_acknowledgements`). The destination's table (which exists) is prepared for its mode first,
    as a writer does (:func:`~connector.export.tombstones.prepare_destination`: a mode differing from the one the
    table records is refused), and the registration holds the table's mode."""
    with destination.gateway.connect() as dest:
        mode = prepare_destination(dest, destination.table, destination.delete_mode)
    destination = replace(destination, delete_mode=mode.value)

    def put(current: Registrations, epoch: int) -> Mutation:
        return Mutation(queue.layout.config_row).put(DESTINATION_FAMILY, destination.name.encode(),
                                                     destination.to_json())

    return _change(conn, queue, put)


def unregister_destination(conn: Connection, queue: QueueConfig, name: str) -> bool:
    """Remove the registration ``name``; False if there was none."""

    def remove(current: Registrations, epoch: int) -> Mutation | None:
        if name not in {d.name for d in current.destinations}:
            return None
        return Mutation(queue.layout.config_row).delete(DESTINATION_FAMILY, name.encode())

    return _change(conn, queue, remove) > 0


# --- a drain process's view of the registrations, and its acknowledgements ---------------------------------------

_process: tuple[int, str] | None = None


def process_name() -> str:
    """This process's name in acknowledgements: host, pid and a random part (a forked worker gets its own)."""
    global _process
    pid = os.getpid()
    if _process is None or _process[0] != pid:
        _process = (pid, f"{socket.gethostname()}-{pid}-{secrets.token_hex(4)}")
    return _process[1]


class _ProcessView:
    """What one process believes the registrations of one queue are: looked up at most every
    ``REFRESH_SECONDS``, acknowledged after each look-up."""

    def __init__(self, source: GatewayOptions, queue: QueueConfig) -> None:
        self.source, self.queue = source, queue
        self.lock = threading.Lock()
        self.registrations: Registrations | None = None
        self.looked_up = 0.0
        self.beat = 0
        self.pid = os.getpid()
        self.feeder: Feeder | None = None

    def current(self) -> Registrations:
        with self.lock:
            now = time.monotonic()
            if self.registrations is None or now - self.looked_up >= REFRESH_SECONDS:
                conn = self.source.shared()
                # "looking up" first: a look-up that reads the registrations before a bootstrap registers is
                # visible to that bootstrap's wait, even if the acknowledgement after it is slow to come
                self.beat += 1
                acknowledge(conn, self.queue, LOOKING_UP, self.beat)
                registrations = read_registrations(conn, self.queue)
                # after the epoch: a requeue records its entries before it raises the epoch this acknowledges
                self.registrations = replace(registrations, requeued=read_requeued(conn, self.queue))
                acknowledge(conn, self.queue, self.registrations.epoch, self.beat)
                self.looked_up = now  # the batches of the next REFRESH_SECONDS go to these registrations
            return self.registrations

    def queue_feeder(self) -> Feeder:
        with self.lock:
            if self.feeder is None:
                self.feeder = feeder_of(self.source.shared(), self.queue)
            return self.feeder


_views: dict[tuple[GatewayOptions, str, str], _ProcessView] = {}
_views_lock = threading.Lock()


def _view(source: GatewayOptions, queue: QueueConfig) -> _ProcessView:
    key = (source, queue.table, queue.qid)
    with _views_lock:
        view = _views.get(key)
        if view is None or view.pid != os.getpid():  # a forked worker looks up and acknowledges for itself
            view = _views[key] = _ProcessView(source, queue)
        return view


def acknowledge(conn: Connection, queue: QueueConfig, epoch: int, beat: int) -> None:
    """Say, in this process's acknowledgement row, that its batches from now on go to the registrations of
    ``epoch`` (``beat`` changes with every look-up, so a reader can tell a live process from a silent one)."""
    value = json.dumps({"epoch": epoch, "beat": beat, "host": socket.gethostname(), "pid": os.getpid()})
    conn.write(queue.table, [Mutation(queue.layout.ack_row(process_name())).put(ACK_FAMILY, ACK_QUALIFIER,
                                                                                 value.encode())])


def current_destinations(source: GatewayOptions, queue: QueueConfig) -> list[Destination]:
    """The registrations this process exports to now (looked up again when ``REFRESH_SECONDS`` passed)."""
    return list(_view(source, queue).current().destinations)


@dataclass(frozen=True)
class _Target:
    """Where a drain writes besides the registrations: its own destination."""

    dest: GatewayOptions
    table: str
    translator: str
    delete_mode: str | None
    create: bool


class RegisteredExporter:
    """The exporter of a drain task: its own destination and every destination registered with the queue, the
    registrations looked up before a batch is exported (at most every ``REFRESH_SECONDS`` per process), so a
    destination registered while the task runs gets every batch exported after the process acknowledged it.
    The destinations' exporters are shared per process (:func:`~connector.export.shared.shared_exporter`); the
    queue is recorded as a feeder of each of them (:mod:`.feeders`)."""

    def __init__(self, source: GatewayOptions, queue: QueueConfig, target: _Target) -> None:
        self.source, self.queue, self.target = source, queue, target
        self._epoch: int | None = None
        self._names: tuple[str, ...] = ()
        self._exporter: AccumuloExporter | FanoutExporter | None = None
        self._requeued: Requeued = {}
        self._sources: tuple[str, ...] = ()
        #: per exporter of the fan-out: its table's last bootstrap reading of A (None: never bootstrapped)
        self._readings: list[BootstrapReading | None] = []

    def __repr__(self) -> str:
        return f"RegisteredExporter({self.target.table!r}, queue={self.queue.qid!r})"

    @property
    def primary(self) -> AccumuloExporter:
        """The exporter into the drain's own destination."""
        t = self.target
        return shared_exporter(t.dest, t.table, t.translator, t.delete_mode, t.create)

    def current(self) -> AccumuloExporter | FanoutExporter:
        """The exporter for the next batch: the destinations registered as this process now knows them."""
        view = _view(self.source, self.queue)
        registrations = view.current()
        if self._exporter is None or registrations.epoch != self._epoch:
            t = self.target
            primary = self.primary
            others = [d for d in registrations.destinations if not _same(d.gateway, d.table, t.dest, t.table)]
            # a registered table exists (registering it made sure): one dropped since is refused, not made anew
            exporters = [primary, *(shared_exporter(replace(d.gateway, server_wait=t.dest.server_wait), d.table,
                                                    d.translator, d.delete_mode, False) for d in others)]
            feeder = view.queue_feeder()
            for exporter in exporters:
                record_feeder(exporter.connection, exporter.table, feeder)
            # read again with each epoch: a bootstrap records it, then raises the epoch, before it reads A
            self._readings = [bootstrap_reading(e.connection, e.table, feeder.queue_id) for e in exporters]
            bootstrapped = any(r is not None for r in self._readings)
            self._exporter = exporters[0] if len(exporters) == 1 and not bootstrapped else FanoutExporter(exporters)
            self._epoch, self._names = registrations.epoch, tuple(d.name for d in others)
        self._requeued, self._sources = registrations.requeued, registrations.sources
        return self._exporter

    def export_batch(self, exports: pa.RecordBatch, *, key_serializer: str = DEFAULT_SERIALIZER,
                     value_serializer: str = DEFAULT_SERIALIZER) -> list[EntryFailure]:
        exporter = self.current()
        if isinstance(exporter, FanoutExporter):
            # a re-queued export whose dead letter is older than a destination's bootstrap read is already there
            return exporter.export_batch(exports, key_serializer=key_serializer, value_serializer=value_serializer,
                                         left_out=left_out(exports, self._requeued, [
                                             None if r is None else r.covers(self._sources) for r in self._readings]))
        return exporter.export_batch(exports, key_serializer=key_serializer, value_serializer=value_serializer)

    def export(self, exports: Sequence[SequencedExport]) -> None:
        self.current().export(exports)

    def cells_written_by_last_call(self) -> int:
        return 0 if self._exporter is None else self._exporter.cells_written_by_last_call()

    @property
    def registered(self) -> tuple[str, ...]:
        """The registered destinations the last batch went to, by name."""
        return self._names


def drain_exporter(source: GatewayOptions, queue: QueueConfig, dest: GatewayOptions, table: str, translator: str,
                   delete_mode: str | None, create: bool = True) -> RegisteredExporter:
    """The exporter of a drain task of ``queue``: into ``table`` on ``dest`` and every destination registered
    with the queue, looked up as batches come (:class:`RegisteredExporter`)."""
    return RegisteredExporter(source, queue, _Target(dest, table, translator, delete_mode, create))


def _same(a: GatewayOptions, a_table: str, b: GatewayOptions, b_table: str) -> bool:
    return a_table == b_table and (a.hosts or (f"{a.host}:{a.port}",)) == (b.hosts or (f"{b.host}:{b.port}",))


# --- waiting for the drains ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Acknowledgement:
    """A drain process's acknowledgement as read: its name, the epoch it exports to, and the raw value."""

    process: str
    epoch: int
    value: bytes
    describe: str


def read_acknowledgements(conn: Connection, queue: QueueConfig) -> list[Acknowledgement]:
    """Every drain process's acknowledgement of the queue's registrations."""
    out = []
    prefix = queue.layout.ack_prefix
    for cell in conn.scan(queue.table, Range.prefix(prefix), columns=[(ACK_FAMILY, ACK_QUALIFIER)], batch_size=1000):
        try:
            d: dict[str, Any] = json.loads(cell.value)
            epoch, where = int(d["epoch"]), f"pid {d.get('pid')} on {d.get('host')}"
        except (ValueError, KeyError, TypeError):
            epoch, where = -1, "unreadable"
        out.append(Acknowledgement(cell.row[len(prefix):].decode("utf-8", "replace"), epoch, cell.value, where))
    return out


def wait_for_acknowledgements(conn: Connection, queue: QueueConfig, epoch: int, *, timeout: float = 300.0,
                              say: Callable[[str], None] | None = None, poll: float = 0.5) -> int:
    """Return once every drain process of the queue exports to the registrations of ``epoch`` or newer: its
    acknowledgement says so, or it has not changed for ``ACK_SILENT_SECONDS`` of this process's time (that
    process looks up before its next batch). Silent acknowledgements are removed (a live process writes its
    own again at its next look-up). Returns how many processes were waited for; ``QueueError`` after
    ``timeout`` seconds naming those still behind."""
    started = time.monotonic()
    first_seen: dict[str, tuple[bytes, float]] = {}
    waited: set[str] = set()
    told = False
    while True:
        now = time.monotonic()
        behind: list[Acknowledgement] = []
        silent: list[Acknowledgement] = []
        for ack in read_acknowledgements(conn, queue):
            if ack.epoch >= epoch:
                continue
            seen = first_seen.get(ack.process)
            if seen is None or seen[0] != ack.value:
                first_seen[ack.process] = seen = (ack.value, now)
            waited.add(ack.process)
            (silent if now - seen[1] >= ACK_SILENT_SECONDS else behind).append(ack)
        if not behind:
            _forget(conn, queue, silent)
            return len(waited)
        if say is not None and not told:
            say(f"waiting for {len(behind)} drain process(es) to export to registration epoch {epoch} "
                f"(at most {ACK_SILENT_SECONDS:.0f} s each)")
            told = True
        if now - started > timeout:
            raise QueueError(f"queue {queue.qid!r}: drain processes kept exporting without registration epoch "
                             f"{epoch} for {timeout:.0f} s: " + ", ".join(a.describe for a in behind[:5]))
        time.sleep(poll)


def _forget(conn: Connection, queue: QueueConfig, silent: list[Acknowledgement]) -> None:
    """Remove acknowledgements found silent, each only if it is still the value seen."""
    if not silent:
        return
    with conn.conditional_writer(queue.table) as writer:
        for ack in silent:
            cm = ConditionalMutation(queue.layout.ack_row(ack.process),
                                     [Condition(ACK_FAMILY, ACK_QUALIFIER, ack.value)])
            cm.delete(ACK_FAMILY, ACK_QUALIFIER)
            writer.write(cm)
