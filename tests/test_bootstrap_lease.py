"""The bootstrap's lease fences (``connector/snapshot/state.py``), on a real cluster A: it expires by the server's
clock only, each renewal writes a new value, a holder is taken for dead only when that is provable (same host,
boot and pid namespace, and its pid gone or now another process's), and a bootstrap that lost its lease writes
nothing more to B: not a range, not a resumed bulk load, not the final check's repairs."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connector.accumulo import Condition, ConditionalMutation, ConditionalWriter, ConnectionLostError, Mutation
from connector.accumulo import bulk as bulk_module
from connector.jobs import LocalEngine
from connector.jobs.bootstrap import BootstrapJob, run_bootstrap
from connector.snapshot import BootstrapError, BootstrapSettings
from connector.snapshot import state as state_module
from connector.snapshot.state import BootstrapState
from connector.transactions import RowTransactions
from examples.inverted_count_index import COUNT_QUALIFIER, COUNTS_FAMILY, count_update

from .conftest import ROOT, Scenario, unique_table

SNAPSHOT = "examples.inverted_count_index:snapshot"
LEASE_CELLS = (b"lease", b"beat")  # the holder and its heartbeat (an older layout had the first only)


def lease_cells(state: BootstrapState) -> dict[bytes, bytes]:
    """The lease's cells as they are now: qualifier -> value."""
    return {c.cq: c.value for c in state.conn.scan(state.queue.table, columns=[(b"b", cq) for cq in LEASE_CELLS])
            if c.row == state.row}


def write_holder(state: BootstrapState, holder: dict, timestamp: int | None = None) -> bytes:
    """Write a lease held by ``holder`` (as another bootstrap would have), at the server's time or ``timestamp``."""
    value = json.dumps(holder).encode()
    state.conn.write(state.queue.table, [Mutation(state.row).put(b"b", b"lease", value, timestamp=timestamp)])
    return value


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def start_ticks(pid: int) -> int:
    """When process ``pid`` started (clock ticks after boot: field 22 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def fill(scenario: Scenario, words: int) -> None:
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(words):
        word = f"w{i:03d}"

        def change(tx, word=word, count=i + 1):
            tx.put(COUNTS_FAMILY, COUNT_QUALIFIER, str(count).encode())
            tx.export(scenario.queue, word, count_update(word, None, count))

        txs.run(word, change)
    txs.close()


def job_for(scenario: Scenario, dest_table: str, **settings) -> BootstrapJob:
    settings.setdefault("snapshot", SNAPSHOT)
    settings.setdefault("final_check", False)
    settings.setdefault("create_dest_table", True)
    return BootstrapJob(source=scenario.a.gateway_options(),
                        dest=dataclasses.replace(scenario.b.gateway_options(), name="B"), queue=scenario.queue,
                        table=scenario.counts, dest_table=dest_table, settings=BootstrapSettings(**settings))


def take_over(scenario: Scenario, job: BootstrapJob) -> None:
    """Another bootstrap takes the lease (as its conditional takeover of an expired lease leaves it)."""
    write_holder(BootstrapState(scenario.conn_a, scenario.queue, job.destination),
                 {"owner": "winner", "host": "elsewhere.invalid", "pid": 1})


# --- expiry by the server's clock ---------------------------------------------------------------------------------

def test_a_lease_stale_by_the_servers_clock_is_taken_over_though_this_hosts_clock_runs_an_hour_behind(
        scenario, monkeypatch):
    state = BootstrapState(scenario.conn_a, scenario.queue, "B/stale")
    ten_minutes_ago = state.server_time_ms() - 600_000
    write_holder(state, {"owner": "gone", "host": "elsewhere.invalid", "pid": 1}, timestamp=ten_minutes_ago)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600)
    state.acquire()
    try:
        assert lease_cells(state)[b"lease"] == state.token
    finally:
        state.release()
    assert lease_cells(state) == {}


def test_a_fresh_lease_is_refused_though_this_hosts_clock_runs_an_hour_ahead(scenario, monkeypatch):
    state = BootstrapState(scenario.conn_a, scenario.queue, "B/fresh")
    held = write_holder(state, {"owner": "alive", "host": "elsewhere.invalid", "pid": 1})
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)
    with pytest.raises(BootstrapError, match=r"another bootstrap of B/fresh is running \(pid 1 on elsewhere"):
        state.acquire()
    assert lease_cells(state)[b"lease"] == held


# --- renewals ------------------------------------------------------------------------------------------------------

def test_each_renewal_writes_a_new_value_so_a_takeover_decided_on_an_earlier_look_fails(scenario, monkeypatch):
    monkeypatch.setattr(state_module, "LEASE_RENEW_SECONDS", 0.05)
    holder = BootstrapState(scenario.conn_a, scenario.queue, "B/renewed")
    holder.acquire()
    try:
        seen = lease_cells(holder)
        deadline = time.monotonic() + 20
        while lease_cells(holder) == seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lease_cells(holder) != seen, "the renewals rewrote the very value they found"
        # a contender that judged the lease expired by what it saw takes it over only if it is still that
        takeover = ConditionalMutation(holder.row, [Condition(b"b", cq, seen.get(cq)) for cq in LEASE_CELLS])
        takeover.put(b"b", b"lease", b"contender")
        with scenario.conn_a.conditional_writer(scenario.queue.table) as writer:
            assert writer.write(takeover) == "REJECTED"
        holder.check()  # still held
        assert lease_cells(holder)[b"lease"] == holder.token
    finally:
        holder.release()


# --- lost answers --------------------------------------------------------------------------------------------------

def lose_answers(monkeypatch, applied: bool, times: int = 1) -> list[bytes]:
    """The next ``times`` conditional writes lose their answers, as a gateway killed during the call does (a
    bootstrap of the chaos run, seed 9644, exited 5 of it): after the mutation was applied (``applied``) or before.
    Returns the rows of the calls whose answers were lost."""
    real_send, real_write = ConditionalWriter.send, ConditionalWriter.write_all
    lost: list[bytes] = []
    rows: list[bytes] = []

    def write_all(self, mutations):
        mutations = list(mutations)
        rows[:] = [m.row for m in mutations]
        return real_write(self, mutations)

    def send(self, call):
        if len(lost) >= times:
            return real_send(self, call)
        lost.extend(rows)
        if applied:
            real_send(self, call)
        raise ConnectionLostError("updateRowsConditionally on 127.0.0.1:1: gateway unreachable after 1 attempts: "
                                  "TSocket read 0 bytes")

    monkeypatch.setattr(ConditionalWriter, "write_all", write_all)
    monkeypatch.setattr(ConditionalWriter, "send", send)
    return lost


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
def test_lease_and_progress_writes_whose_answers_are_lost_are_settled_not_fatal(scenario, monkeypatch, applied):
    """A lost answer leaves the outcome unknown: the state reads its cells back and, when the write did not take
    while the lease is still its own, sends it again; taking the lease, recording progress and letting go all go
    on as if the answer had come."""
    state = BootstrapState(scenario.conn_a, scenario.queue, f"B/lost-{'applied' if applied else 'not-applied'}")
    lost = lose_answers(monkeypatch, applied)
    state.acquire()
    try:
        assert lost == [state.row]
        assert lease_cells(state)[b"lease"] == state.token
        lost = lose_answers(monkeypatch, applied)
        state.mark_done(0, {"written": 1})
        assert lost == [state.row]
        assert state.done() == {0: {"written": 1}}
        state.check_held()
        lost = lose_answers(monkeypatch, applied)
    finally:
        state.release()
    assert lost == [state.row]
    assert lease_cells(state) == {}


# --- who is dead here ----------------------------------------------------------------------------------------------

def test_a_holder_in_another_pid_namespace_of_a_host_of_the_same_name_is_not_taken_for_dead(scenario):
    """Containers that share a hostname: the holder's pid means nothing here, so its absence proves nothing."""
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid is free here now
    state = BootstrapState(scenario.conn_a, scenario.queue, "B/container")
    held = write_holder(state, {"owner": "x", "host": socket.gethostname(), "boot": boot_id(),
                                "pidns": "pid:[1]", "pid": gone.pid, "start": 1})
    with pytest.raises(BootstrapError, match="another bootstrap of B/container is running"):
        state.acquire()
    assert lease_cells(state)[b"lease"] == held


def test_a_holder_whose_pid_now_belongs_to_another_process_is_dead_and_a_live_holder_is_not(scenario):
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        here = {"owner": "x", "host": socket.gethostname(), "boot": boot_id(),
                "pidns": os.readlink("/proc/self/ns/pid"), "pid": sleeper.pid}
        state = BootstrapState(scenario.conn_a, scenario.queue, "B/reused")
        live = write_holder(state, {**here, "start": start_ticks(sleeper.pid)})  # the sleeper holds it
        with pytest.raises(BootstrapError, match="another bootstrap of B/reused is running"):
            state.acquire()
        assert lease_cells(state)[b"lease"] == live
        # the holder started at another time: its pid was reused by the sleeper, the holder is gone
        write_holder(state, {**here, "start": start_ticks(sleeper.pid) - 1})
        state.acquire()
        state.release()
    finally:
        sleeper.kill()
        sleeper.wait()


HOLDER = """
import sys, time
from connector.accumulo import Connection
from connector.queue import QueueConfig
from connector.snapshot.state import BootstrapState
host, port, secret, table, qid, buckets, dest = sys.argv[1:]
state = BootstrapState(Connection(host, int(port), secret_file=secret), QueueConfig(table, qid, int(buckets)), dest)
state.acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_bootstrap_process_killed_on_this_host_frees_its_lease_at_once(scenario):
    """The shortcut that stays: a killed bootstrap resumes without waiting out the lease."""
    a, q = scenario.a, scenario.queue
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, a.gateway_host, str(a.gateway_port), a.secret_file,
                             q.table, q.qid, str(q.num_buckets), "B/killed"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        state = BootstrapState(scenario.conn_a, scenario.queue, "B/killed")
        with pytest.raises(BootstrapError, match=f"another bootstrap of B/killed is running \\(pid {proc.pid} "):
            state.acquire()
    finally:
        proc.kill()
        proc.wait()
    state.acquire()
    state.release()


# --- a bootstrap that lost its lease writes nothing more ---------------------------------------------------------

class TakeOverFirst(LocalEngine):
    """Runs a round's tasks after another bootstrap took the lease (a driver paused for minutes, say)."""

    def __init__(self, scenario: Scenario, job: BootstrapJob) -> None:
        super().__init__(threads=1)
        self.scenario, self.job = scenario, job

    def run(self, round):  # noqa: ANN001, ANN201
        take_over(self.scenario, self.job)
        return super().run(round)


class TakeOverAfter(TakeOverFirst):
    """Runs a round's tasks, then another bootstrap takes the lease (before the final check)."""

    def run(self, round):  # noqa: ANN001, ANN201
        out = LocalEngine.run(self, round)
        take_over(self.scenario, self.job)
        return out


def test_tasks_of_a_bootstrap_whose_lease_was_taken_over_write_nothing_to_b(scenario):
    fill(scenario, 20)
    scenario.conn_a.add_splits(scenario.counts, [b"w010"])
    dest = unique_table("fenced")
    scenario.conn_b.create_table(dest)
    job = job_for(scenario, dest, method="live")
    with pytest.raises(BootstrapError, match="lease was taken over") as info:
        run_bootstrap(TakeOverFirst(scenario, job), job)
    assert "\n" not in str(info.value)
    assert list(scenario.conn_b.scan(dest)) == []
    assert BootstrapState(scenario.conn_a, scenario.queue, job.destination).done() == {}


def test_a_resumed_bulk_load_of_a_bootstrap_whose_lease_was_taken_over_loads_nothing(scenario, monkeypatch):
    fill(scenario, 20)
    dest = unique_table("fenced")
    scenario.conn_b.create_table(dest)
    job = job_for(scenario, dest, method="bulk")
    real_call = bulk_module.BulkImport._call
    kills: list[str] = []

    def killed_in_the_load(self, method, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if method == "importBulk" and not kills:
            kills.append(self.bulk_id)
            raise SystemExit("killed")  # the range recorded as loading, its files not loaded
        return real_call(self, method, *args, **kwargs)

    monkeypatch.setattr(bulk_module.BulkImport, "_call", killed_in_the_load)
    with pytest.raises(SystemExit):
        run_bootstrap(LocalEngine(threads=1), job)
    state = BootstrapState(scenario.conn_a, scenario.queue, job.destination)
    assert state.bulks() == {0: (kills[0], "loading")}
    with pytest.raises(BootstrapError, match="lease was taken over"):
        run_bootstrap(TakeOverFirst(scenario, job), job)
    assert list(scenario.conn_b.scan(dest)) == []
    assert scenario.conn_b.bulk_import(dest, bulk_id=kills[0]).files_left() > 0  # still there, for the winner


def test_a_bootstrap_whose_lease_was_taken_over_after_its_ranges_stops_before_the_final_check(scenario):
    fill(scenario, 10)
    dest = unique_table("fenced")
    job = job_for(scenario, dest, method="live", final_check=True, settle_seconds=5.0)
    said: list[str] = []
    with pytest.raises(BootstrapError, match="lease was taken over") as info:
        run_bootstrap(TakeOverAfter(scenario, job), job, said.append)
    assert "\n" not in str(info.value)
    assert not [line for line in said if line.startswith("final check")], said
