"""A bootstrap's state, kept in the queue's own table on A (row ``<qid>#bootstrap:<destination>``), so a
bootstrap that was killed resumes where it stopped, and two bootstraps of one destination never run at once.

    b:lease   the running bootstrap: JSON {"owner": a random token, and the process (:func:`process_identity`):
              "host", "boot", "pidns", "pid", "start"}; the same value as long as it holds the lease
    b:beat    its heartbeat: a count, rewritten with the next one every LEASE_RENEW_SECONDS, conditional on the
              lease and the count it wrote last; its timestamp is the server's time of the last renewal
    b:clock   a probe, written to read the tablet server's clock (:meth:`BootstrapState.server_time_ms`)
    b:plan    JSON: the producer table, the snapshot, the tablet ranges of A to read (hex bounds), the
              server time the bootstrap started (the final check waits for the queue's entries older than it)
    r:<n>     range n is done: JSON {"rows", "exports", "cells"}
    k:<n>     range n's bulk load: JSON {"bulk": staging directory id, "phase": "writing", "loading" or
              "loaded"} (:mod:`connector.snapshot.bulk` says what each means)

**Expiry, by the server's clock only.** A lease is free once its heartbeat is LEASE_SECONDS old: the age is
the timestamp of a probe written to the same row (the same tablet, whose timestamps never go back) minus the
heartbeat's (or the lease's, when newer). This host's clock is never compared with a server timestamp.

**Dead holders.** A lease is free at once when its holder is provably gone: a process of this host (same
hostname, same boot id, same pid namespace: its pid means the same here) whose pid is gone, a zombie, or now
another process (one that started at another time). A holder elsewhere, in another container of the same
hostname, or recorded without that identity (an older release) keeps its lease until it expires.

**Taking over** is one conditional mutation on the very lease and heartbeat the contender judged (absent,
expired or dead), so of two bootstraps started together exactly one runs, and a holder that renewed in between
keeps its lease; the other is refused with the holder's name.

**The table's lease.** A destination's name depends on the connection (the cluster's name, or a gateway address),
so a bootstrap, a tombstone purge and a ``verify --repair`` also take, first, the same lease under the table's
identity (row ``<qid>#bootstrap:table-id:<id>``, :func:`table_key`, :func:`table_lease`): whatever names reach
the table, no two of them run at once. A bootstrap records that identity in its plan, so a purge finds an
unfinished bootstrap of the table under any name (:func:`unfinished_bootstraps`; a plan of an older release,
without it, is found under the purge's own name, as before).

**Fencing.** Every write of the state (plan, progress, bulk records) is conditional on the lease cell holding
this bootstrap's value, so one whose lease was taken over stops. Writes to B cannot be conditional on A: a
bootstrap reads its lease cell before each range it writes (in the task, wherever it runs) and before its final
check, and the bulk path's ``loading`` record, conditional on the lease, comes right before the load. What a
range already being written goes on to write after its lease was lost is not fenced: the lease outlasts six
missed renewals, so that takes a bootstrap paused for most of a minute in the middle of a range.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from connector.accumulo import Condition, ConditionalMutation, Connection, Mutation, Range
from connector.queue import QueueConfig

from .errors import BootstrapError

log = logging.getLogger(__name__)

STATE_FAMILY = b"b"
LEASE, BEAT, CLOCK, PLAN = b"lease", b"beat", b"clock", b"plan"
RANGE_FAMILY = b"r"
BULK_FAMILY = b"k"
#: a lease whose heartbeat is this old by the server's clock is free (its bootstrap was killed or is stuck)
LEASE_SECONDS = 60.0
LEASE_RENEW_SECONDS = 10.0
#: a bootstrap or repair that finds a tombstone purge holding the lease asks it to give way (a ``b:yield`` cell in
#: the lease's row) and tries again for this long; the purge looks every few seconds and, in its grace, gives up
#: without deleting anything (connector.snapshot.purge)
PREEMPT_SECONDS = 30.0
YIELD = b"yield"
#: a write of the state whose outcome stayed unknown and did not take is sent this many times in all
WRITE_ATTEMPTS = 3
PURGE = "a tombstone purge"

Stored = tuple[bytes, int]  # a cell's value and timestamp


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _process(pid: int) -> tuple[str, int] | None:
    """Process ``pid``'s state letter and start time (clock ticks after boot), from ``/proc/<pid>/stat``; None
    when there is no such process. ``OSError`` when it cannot be read (another user's, under hidepid)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) ", whatever comm holds
    return fields[0].decode(), int(fields[19])  # fields 3 and 22 of proc(5)


def process_identity() -> dict[str, Any]:
    """This process as a lease names its holder: ``host`` (the hostname), ``boot`` (the kernel's boot id),
    ``pidns`` (its pid namespace), ``pid`` and ``start`` (its start time in clock ticks after boot). Where
    ``/proc`` does not tell (not Linux), those fields are None and no one takes the holder for dead early."""
    pid = os.getpid()
    try:
        me = _process(pid)
    except OSError:
        me = None
    return {"host": socket.gethostname(), "boot": _read("/proc/sys/kernel/random/boot_id"),
            "pidns": _pid_namespace(), "pid": pid, "start": me[1] if me else None}


def _dead_here(holder: dict[str, Any]) -> bool:
    """True only for a lease holder that is provably gone: a process of this host, this boot and this pid
    namespace whose pid is free, a zombie, or another process's now (see the module's description)."""
    me = process_identity()
    if any(me[k] is None or holder.get(k) != me[k] for k in ("host", "boot", "pidns")):
        return False
    pid, start = holder.get("pid"), holder.get("start")
    if type(pid) is not int or type(start) is not int or pid <= 0:
        return False
    try:
        now = _process(pid)
    except OSError:
        return False  # cannot read it: cannot tell
    return now is None or now[1] != start or now[0] in ("Z", "X")


def _holder(value: bytes) -> dict[str, Any]:
    try:
        holder = json.loads(value)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def destination_id(cluster: str, table: str) -> str:
    """How the state names a destination: ``<cluster>/<table>`` (the cluster's name, or its gateway)."""
    return f"{cluster}/{table}"


#: the prefix of a table's identity (:func:`table_key`); a destination's name always holds a "/", an identity never
TABLE_KEY_PREFIX = "table-id:"


def table_key(dest: Connection, table: str) -> str:
    """How exclusion names a destination table whatever a connection calls its cluster: ``table-id:<id>``, the id
    Accumulo gave it (a table made again under the same name gets another). The gateway does not tell the instance
    id, so two destination clusters whose tables have the same id share a key: they exclude each other, which is
    only ever too careful. ``TableNotFoundError`` for a missing table."""
    return TABLE_KEY_PREFIX + dest.table_id(table)


def table_lease(conn: Connection, queue: QueueConfig, dest: Connection, table: str, what: str) -> BootstrapState:
    """The lease (not yet taken) of the destination table ``table`` on ``dest`` by its identity (:func:`table_key`),
    kept beside ``queue`` on ``conn`` (A): what a bootstrap, a purge and a repair of it all take, so no two of
    them run at once through whatever names. ``what`` names the holder in a refusal ("a repair")."""
    key = table_key(dest, table)
    token = json.dumps({"owner": secrets.token_hex(8), "what": what, "destination": f"{table} ({key})",
                        **process_identity()}).encode()
    return BootstrapState(conn, queue, key, token)


def unfinished_bootstraps(conn: Connection, queue: QueueConfig, destination: str, key: str) -> list[str]:
    """The destinations (as their bootstraps named them) of the unfinished bootstraps fed by ``queue`` that write
    the table ``key`` names (:func:`table_key`), through whatever name: a plan recorded with that key, or under
    ``destination`` itself (a plan recorded before plans carried the key)."""
    prefix = queue.layout.bootstrap_row("")
    found = []
    for cell in conn.scan(queue.table, Range.prefix(prefix), columns=[(STATE_FAMILY, PLAN)]):
        name = cell.row[len(prefix):].decode("utf-8", "replace")
        if name == destination or _plan_key(cell.value) == key:
            found.append(name)
    return found


def _plan_key(value: bytes) -> str | None:
    try:
        recorded = json.loads(value).get(TABLE_KEY)
    except (ValueError, AttributeError):
        return None
    return recorded if isinstance(recorded, str) else None


#: the field of a stored plan naming the destination table's identity (absent from plans of older releases)
TABLE_KEY = "table_key"


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _unhex(s: str | None) -> bytes | None:
    return None if s is None else bytes.fromhex(s)


@dataclass(frozen=True)
class Plan:
    """What a bootstrap reads: ``table`` with ``snapshot``, as tablet ranges [start, stop) of row keys."""

    table: str
    snapshot: str
    ranges: tuple[tuple[bytes | None, bytes | None], ...]
    #: the server's time (ms) when the bootstrap began, after relaying what outboxes held
    started_ms: int

    def to_json(self) -> bytes:
        return json.dumps({"table": self.table, "snapshot": self.snapshot, "started_ms": self.started_ms,
                           "ranges": [[_hex(a), _hex(b)] for a, b in self.ranges]}).encode()

    @classmethod
    def from_json(cls, value: bytes) -> Plan:
        d = json.loads(value)
        return cls(d["table"], d["snapshot"], tuple((_unhex(a), _unhex(b)) for a, b in d["ranges"]),
                   int(d["started_ms"]))


class BootstrapState:
    """The state row of one bootstrap of ``destination`` fed by ``queue`` (see the module's description)."""

    def __init__(self, conn: Connection, queue: QueueConfig, destination: str, token: bytes | None = None, *,
                 table_key: str | None = None) -> None:
        """``token``: the lease's value when this state is a task's view of a lease its driver holds.
        ``table_key``: the destination table's identity (:func:`table_key`); :meth:`acquire` then takes the lease of
        that identity too (first), which is what excludes a purge or a repair reaching the table through another
        name, and :meth:`start` records it in the plan."""
        self.conn, self.queue, self.destination = conn, queue, destination
        self.row = queue.layout.bootstrap_row(destination)
        self.token = token or json.dumps({"owner": secrets.token_hex(8), "destination": destination,
                                          **process_identity()}).encode()
        self._table = None if table_key is None else BootstrapState(conn, queue, table_key, self.token)
        self._beat = 0  # the heartbeat count this bootstrap wrote last
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()
        self.lost: str | None = None  # why the lease was lost, if it was

    # --- the lease ---------------------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the lease (and the table's, first, when this state has a ``table_key``), or raise
        ``BootstrapError`` naming what holds it."""
        if self._table is not None:
            self._table.acquire()
        try:
            self._acquire_own()
        except BaseException:
            if self._table is not None:
                self._table.release()
            raise

    def _acquire_own(self) -> None:
        lease, beat = self._lease()
        deadline = time.monotonic() + PREEMPT_SECONDS
        while (lease is not None and self._preempts(_holder(lease[0])) and self._age(lease, beat) < LEASE_SECONDS
               and not _dead_here(_holder(lease[0])) and time.monotonic() < deadline):
            # a purge in its grace gives way: ask, and look again until it let go (or the wait ran out)
            self._write_if([Condition(STATE_FAMILY, LEASE, lease[0])],
                           Mutation(self.row).put(STATE_FAMILY, YIELD, self.token))
            time.sleep(0.5)
            lease, beat = self._lease()
        if lease is not None:
            holder = _holder(lease[0])
            age = self._age(lease, beat)
            if age < LEASE_SECONDS and not _dead_here(holder):
                shown = holder.get("destination") or self.destination
                raise BootstrapError(
                    f"{holder.get('what', 'another bootstrap')} of {shown} is running (pid "
                    f"{holder.get('pid')} on {holder.get('host')}, last heard of {max(age, 0):.0f} s ago); two at "
                    f"once are refused. If it was killed, its lease expires {LEASE_SECONDS - age:.0f} s from now "
                    "and a rerun resumes")
        # exactly what was judged free: a holder that renewed since, or a contender that took it first, wins
        judged = [Condition(STATE_FAMILY, LEASE, lease[0] if lease else None),
                  Condition(STATE_FAMILY, BEAT, beat[0] if beat else None)]
        if not self._write_if(judged, Mutation(self.row).put(STATE_FAMILY, LEASE, self.token)
                              .put(STATE_FAMILY, BEAT, b"0").delete(STATE_FAMILY, YIELD)):
            raise BootstrapError(f"another bootstrap of {self.destination} took the lease just now; two at once "
                                 "are refused")
        self._beat = 0
        self._renewer = threading.Thread(target=self._renew, name="bootstrap-lease", daemon=True)
        self._renewer.start()

    def _age(self, lease: Stored, beat: Stored | None) -> float:
        """Seconds since the lease was last renewed, by A's clock."""
        return (self.server_time_ms() - max(lease[1], beat[1] if beat else 0)) / 1000

    def _preempts(self, holder: dict[str, Any]) -> bool:
        """Whether this lease's taker makes ``holder`` give way: a purge does, for anything but another purge."""
        return holder.get("what") == PURGE and _holder(self.token).get("what") != PURGE

    def asked_to_yield(self) -> bool:
        """Whether a bootstrap or repair asked this lease's holder (a purge) to give way, in its row or the
        table's (one read of A each)."""
        if self._table is not None and self._table.asked_to_yield():
            return True
        return self._cell(STATE_FAMILY, YIELD) is not None

    def renew(self) -> bool:
        """Write the next heartbeat, conditional on the lease and the heartbeat this bootstrap wrote last (the
        lease's renewer thread calls it every LEASE_RENEW_SECONDS). False, with :attr:`lost` saying why, when
        the lease is no longer this bootstrap's."""
        if self.lost:
            return False
        last, following = str(self._beat).encode(), str(self._beat + 1).encode()
        if self._write_if([self._held(), Condition(STATE_FAMILY, BEAT, last)],
                          Mutation(self.row).put(STATE_FAMILY, BEAT, following)):
            self._beat += 1
            return True
        lease, beat = self._lease()
        if lease is not None and lease[0] == self.token and beat is not None and beat[0] == last:
            return True  # the write's outcome was unknown and it did not take: still held, renewed next time
        self.lost = self._taken(lease) + " (was this bootstrap paused for more than a minute?)"
        return False

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_RENEW_SECONDS):
            try:
                if not self.renew():
                    return
            except Exception as exc:  # noqa: BLE001 - retried at the next renewal; the lease lasts a minute
                log.warning("bootstrap of %s: lease not renewed (%s); retrying", self.destination, exc)

    def check(self) -> None:
        """Raise if the lease was found lost (another bootstrap took over), without asking A."""
        if self._table is not None:
            self._table.check()
        if self.lost:
            raise BootstrapError(f"bootstrap of {self.destination} stopped: {self.lost}")

    def check_held(self) -> None:
        """Raise ``BootstrapError`` unless the lease cell holds this bootstrap's value now, as read from A: a
        task calls it before each range it writes to B (wherever it runs), the driver before its final check."""
        self.check()
        if self._table is not None:
            self._table.check_held()
        lease = self._cell(STATE_FAMILY, LEASE)
        if lease is None or lease[0] != self.token:
            self.lost = self._taken(lease)
            self.check()

    def release(self) -> None:
        """Give the lease up, and the table's (the state's plan and progress stay until :meth:`clear`)."""
        try:
            self._release_own()
        finally:
            if self._table is not None:
                self._table.release()

    def _release_own(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(5)
        self._write_if([self._held()], Mutation(self.row).delete(STATE_FAMILY, LEASE).delete(STATE_FAMILY, BEAT))

    def _held(self) -> Condition:
        return Condition(STATE_FAMILY, LEASE, self.token)

    def _lease(self) -> tuple[Stored | None, Stored | None]:
        """The lease and heartbeat cells as they are now."""
        cells: dict[bytes, Stored] = {}
        for cell in self.conn.scan(self.queue.table, Range.exact_row(self.row),
                                   columns=[(STATE_FAMILY, LEASE), (STATE_FAMILY, BEAT)]):
            cells[cell.cq] = (cell.value, cell.ts)
        return cells.get(LEASE), cells.get(BEAT)

    @staticmethod
    def _taken(lease: Stored | None) -> str:
        """Why a lease that is not ours any more was lost, naming who holds it now."""
        if lease is None:
            return "its lease was taken over (no bootstrap holds it now)"
        holder = _holder(lease[0])
        return f"its lease was taken over by another bootstrap (pid {holder.get('pid')} on {holder.get('host')})"

    # --- plan and progress -------------------------------------------------------------------------------

    def plan(self) -> Plan | None:
        """The plan a bootstrap of this destination recorded (None: none started, or the last one finished)."""
        cell = self._cell(STATE_FAMILY, PLAN)
        return None if cell is None else Plan.from_json(cell[0])

    def start(self, plan: Plan) -> None:
        """Record ``plan`` (a fresh bootstrap), with the table's identity when this state has one (what
        :func:`unfinished_bootstraps` finds it by)."""
        value = plan.to_json()
        if self._table is not None:
            value = json.dumps({**json.loads(value), TABLE_KEY: self._table.destination}).encode()
        self._must(Mutation(self.row).put(STATE_FAMILY, PLAN, value))

    def done(self) -> dict[int, dict[str, Any]]:
        """The ranges done so far, with their counters."""
        out = {}
        for cell in self.conn.scan(self.queue.table, Range.exact_row(self.row), columns=[RANGE_FAMILY]):
            out[int(cell.cq)] = json.loads(cell.value)
        return out

    def mark_done(self, index: int, counters: dict[str, Any]) -> None:
        """Range ``index`` is written (durably) on the destination."""
        self._must(Mutation(self.row).put(RANGE_FAMILY, str(index).encode(), json.dumps(counters).encode()))

    def mark_bulk(self, index: int, bulk_id: str, phase: str) -> None:
        """Range ``index`` is bulk-loaded from staging directory ``bulk_id``, now in ``phase``: ``writing`` (its
        files are being written: never loaded), ``loading`` (all closed; the load may have happened) or
        ``loaded`` (the load returned). Conditional on the lease, as every write of the state."""
        self._must(Mutation(self.row).put(BULK_FAMILY, str(index).encode(),
                                          json.dumps({"bulk": bulk_id, "phase": phase}).encode()))

    def bulks(self) -> dict[int, tuple[str, str]]:
        """Range -> (staging directory id, phase) of the bulk loads recorded."""
        out = {}
        for cell in self.conn.scan(self.queue.table, Range.exact_row(self.row), columns=[BULK_FAMILY]):
            record = json.loads(cell.value)
            out[int(cell.cq)] = (record["bulk"], record["phase"])
        return out

    def clear(self) -> None:
        """Forget plan and progress: the bootstrap finished."""
        mutation = Mutation(self.row).delete(STATE_FAMILY, PLAN)
        for index in self.done():
            mutation.delete(RANGE_FAMILY, str(index).encode())
        for index in self.bulks():
            mutation.delete(BULK_FAMILY, str(index).encode())
        self._must(mutation)

    def server_time_ms(self) -> int:
        """The tablet server's clock now (ms): the timestamp it gives a write without one (a probe written to
        this row, so the clock of the tablet that stamps the lease's heartbeats)."""
        self.conn.write(self.queue.table, [Mutation(self.row).put(STATE_FAMILY, CLOCK, b"")])
        cell = self._cell(STATE_FAMILY, CLOCK)
        assert cell is not None
        return cell[1]

    # --- cells ---------------------------------------------------------------------------------------------

    def _cell(self, cf: bytes, cq: bytes) -> Stored | None:
        for cell in self.conn.scan(self.queue.table, Range.exact_row(self.row), columns=[(cf, cq)], batch_size=2):
            return cell.value, cell.ts
        return None

    def _write_if(self, conditions: list[Condition], mutation: Mutation) -> bool:
        """Apply ``mutation`` to this state's row if ``conditions`` hold; whether it is applied now. An unknown
        outcome (its answer was lost with the gateway) is settled by reading the cells back; a write that did not
        take is sent again, up to WRITE_ATTEMPTS times, with the same conditions, so a late copy of an earlier
        attempt cannot apply twice."""
        cm = ConditionalMutation(self.row, conditions)
        for u in mutation.updates:
            if u.delete:
                cm.delete(u.cf, u.cq)
            else:
                cm.put(u.cf, u.cq, u.value)
        wanted = [(u.cf, u.cq, None if u.delete else u.value) for u in mutation.updates]
        unknown = False  # an earlier attempt's outcome is unknown: it may be what a rejection ran into
        for _ in range(WRITE_ATTEMPTS):
            with self.conn.conditional_writer(self.queue.table) as writer:
                status = writer.write(cm)
            if status == "ACCEPTED":
                return True
            if status != "UNKNOWN" and not unknown:
                return False
            if all((self._cell(cf, cq) or (None,))[0] == value for cf, cq, value in wanted):
                return True
            if status != "UNKNOWN":
                return False
            unknown = True
        return False

    def _must(self, mutation: Mutation) -> None:
        """Write ``mutation`` if this bootstrap still holds the lease; raise otherwise."""
        self.check()
        if not self._write_if([self._held()], mutation):
            lease = self._cell(STATE_FAMILY, LEASE)
            self.lost = self._taken(lease) if lease is None or lease[0] != self.token else (
                f"its state could not be written in {WRITE_ATTEMPTS} attempts (the gateways of the queue's cluster "
                "did not answer)")
            self.check()
