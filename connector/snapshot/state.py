"""A bootstrap's state, kept in the queue's own table on A (row ``<qid>#bootstrap:<destination>``), so a
bootstrap that was killed resumes where it stopped, and two bootstraps of one destination never run at once.

    b:lease   the running bootstrap: JSON {"owner": token, "host", "pid"}; its timestamp is the server's time
              of the last heartbeat (renewed every LEASE_RENEW_SECONDS; a lease older than LEASE_SECONDS, or
              held by a process of this host that is gone, is free: its holder was killed)
    b:plan    JSON: the producer table, the snapshot, the tablet ranges of A to read (hex bounds), the
              server time the bootstrap started (the final check waits for the queue's entries older than it)
    r:<n>     range n is done: JSON {"rows", "exports", "cells"}
    k:<n>     range n's bulk load: JSON {"bulk": staging directory id, "phase": "writing" or "loading"}

Taking the lease is one conditional mutation (absent, or the very value of an expired lease), so of two
bootstraps started together exactly one runs; the other is refused with the holder's name. Every write of a
range's progress is conditional on holding the lease, so a bootstrap whose lease was taken over stops.
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
LEASE, PLAN = b"lease", b"plan"
RANGE_FAMILY = b"r"
BULK_FAMILY = b"k"
#: a lease not renewed for this long is free (its bootstrap was killed)
LEASE_SECONDS = 60.0
LEASE_RENEW_SECONDS = 10.0


def _dead_here(holder: dict[str, Any]) -> bool:
    """True for a lease holder on this host whose process is gone (a killed bootstrap: no need to wait)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def destination_id(cluster: str, table: str) -> str:
    """How the state names a destination: ``<cluster>/<table>`` (the cluster's name, or its gateway)."""
    return f"{cluster}/{table}"


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

    def __init__(self, conn: Connection, queue: QueueConfig, destination: str, token: bytes | None = None) -> None:
        """``token``: the lease's value when this state is a task's view of a lease its driver holds."""
        self.conn, self.queue, self.destination = conn, queue, destination
        self.row = queue.layout.bootstrap_row(destination)
        self.token = token or json.dumps({"owner": secrets.token_hex(8), "host": socket.gethostname(),
                                          "pid": os.getpid()}).encode()
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()
        self.lost: str | None = None  # why the lease was lost, if it was

    # --- the lease ---------------------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the lease, or raise ``BootstrapError`` naming the bootstrap that holds it."""
        current = self._cell(STATE_FAMILY, LEASE)
        condition = Condition(STATE_FAMILY, LEASE)  # absent
        if current is not None:
            age = time.time() - current[1] / 1000
            holder = json.loads(current[0])
            if age < LEASE_SECONDS and not _dead_here(holder):
                raise BootstrapError(
                    f"another bootstrap of {self.destination} is running (pid {holder.get('pid')} on "
                    f"{holder.get('host')}, last heard of {age:.0f} s ago); two at once are refused. If it "
                    f"was killed, its lease expires {LEASE_SECONDS - age:.0f} s from now and a rerun resumes")
            condition = Condition(STATE_FAMILY, LEASE, current[0])  # the expired lease, exactly
        if not self._write_if(condition, Mutation(self.row).put(STATE_FAMILY, LEASE, self.token)):
            raise BootstrapError(f"another bootstrap of {self.destination} took the lease just now; two at once "
                                 "are refused")
        self._renewer = threading.Thread(target=self._renew, name="bootstrap-lease", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_RENEW_SECONDS):
            try:
                if not self._write_if(self._held(), Mutation(self.row).put(STATE_FAMILY, LEASE, self.token)):
                    self.lost = "its lease was taken over (was it paused for more than a minute?)"
                    return
            except Exception as exc:  # noqa: BLE001 - retried at the next renewal; the lease lasts a minute
                log.warning("bootstrap of %s: lease not renewed (%s); retrying", self.destination, exc)

    def check(self) -> None:
        """Raise if the lease was lost (another bootstrap took over)."""
        if self.lost:
            raise BootstrapError(f"bootstrap of {self.destination} stopped: {self.lost}")

    def release(self) -> None:
        """Give the lease up (the state's plan and progress stay until :meth:`clear`)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(5)
        self._write_if(self._held(), Mutation(self.row).delete(STATE_FAMILY, LEASE))

    def _held(self) -> Condition:
        return Condition(STATE_FAMILY, LEASE, self.token)

    # --- plan and progress -------------------------------------------------------------------------------

    def plan(self) -> Plan | None:
        """The plan a bootstrap of this destination recorded (None: none started, or the last one finished)."""
        cell = self._cell(STATE_FAMILY, PLAN)
        return None if cell is None else Plan.from_json(cell[0])

    def start(self, plan: Plan) -> None:
        """Record ``plan`` (a fresh bootstrap)."""
        self._must(Mutation(self.row).put(STATE_FAMILY, PLAN, plan.to_json()))

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
        """Range ``index`` is being bulk-loaded from staging directory ``bulk_id``: its files are being
        ``writing`` (never loaded yet) or ``loading`` (all closed; the load may have happened)."""
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
        """The tablet server's clock now (ms): the timestamp it gives a write without one."""
        probe = b"clock"
        self.conn.write(self.queue.table, [Mutation(self.row).put(STATE_FAMILY, probe, b"")])
        cell = self._cell(STATE_FAMILY, probe)
        assert cell is not None
        return cell[1]

    # --- cells ---------------------------------------------------------------------------------------------

    def _cell(self, cf: bytes, cq: bytes) -> tuple[bytes, int] | None:
        for cell in self.conn.scan(self.queue.table, Range.exact_row(self.row), columns=[(cf, cq)], batch_size=2):
            return cell.value, cell.ts
        return None

    def _write_if(self, condition: Condition, mutation: Mutation) -> bool:
        cm = ConditionalMutation(self.row, [condition])
        for u in mutation.updates:
            if u.delete:
                cm.delete(u.cf, u.cq)
            else:
                cm.put(u.cf, u.cq, u.value)
        with self.conn.conditional_writer(self.queue.table) as writer:
            status = writer.write(cm)
        if status == "UNKNOWN":  # the connection dropped: see whether the write took
            wanted = [(u.cf, u.cq, None if u.delete else u.value) for u in mutation.updates]
            return all((self._cell(cf, cq) or (None,))[0] == value for cf, cq, value in wanted)
        return status == "ACCEPTED"

    def _must(self, mutation: Mutation) -> None:
        """Write ``mutation`` if this bootstrap still holds the lease; raise otherwise."""
        self.check()
        if not self._write_if(self._held(), mutation):
            self.lost = "its lease was taken over by another bootstrap"
            self.check()
