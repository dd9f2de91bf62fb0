"""B from A on real clusters: a destination built from A's committed rows while producers commit and the
stream drains, ends equal to what A's rows imply, cell for cell, through each hazard of docs/bootstrap-and-cutover.md
("Why B ends exact"): an old export whose successor B never got (a), producers' clocks far apart and a commit visible
only after its row was read (b), a full compaction of B that dropped a delete (c), rows deleted on A (d),
outbox cells not yet relayed (e), a bootstrap killed and resumed or run twice (f). And verify: 0 on a right
destination, exactly the injected damage on a wrong one, 0 after --repair, with the stream running."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from connector.accumulo import Cell, Mutation
from connector.jobs import DrainJob, LocalEngine, stream_drain
from connector.jobs.bootstrap import BootstrapJob, run_bootstrap
from connector.queue import ExportQueue
from connector.queue.destinations import Destination as Registered
from connector.queue.destinations import register_destination
from connector.snapshot import BootstrapError, BootstrapSettings, Destination, snapshot_source, verify_destination
from connector.snapshot.state import BootstrapState, table_key
from connector.transactions import RowTransactions
from examples.inverted_count_index import COUNT_QUALIFIER, COUNTS_FAMILY, actual_index, count_update, expected_index

from .conftest import Scenario, unique_table

SNAPSHOT = "examples.inverted_count_index:snapshot"
GATED = f"{__name__}:gated_snapshot"

# --- a snapshot function that can hold the bootstrap after a row was read ---------------------------------------

_hold: dict[bytes, threading.Event] = {}
_reached: dict[bytes, threading.Event] = {}


def gated_snapshot(row: bytes, cells: Sequence[Cell]) -> list[tuple[str, dict]]:
    """The example's snapshot, but a row in ``_hold`` waits (after it was read) until its event is set."""
    from examples.inverted_count_index import snapshot

    if row in _hold:
        _reached[row].set()
        assert _hold[row].wait(120), "the test never let the row go"
    return snapshot(row, cells)


def slow_snapshot(row: bytes, cells: Sequence[Cell]) -> list[tuple[str, dict]]:
    """The example's snapshot, 0.3 s a row (a bootstrap in another process that can be stopped half way)."""
    from examples.inverted_count_index import snapshot

    time.sleep(0.3)
    return snapshot(row, cells)


#: rows ``tenth_snapshot`` lets pass before it sends this process SIGINT, as Ctrl-C would (None: never)
_interrupt_after: dict[str, int | None] = {"rows": None}


def tenth_snapshot(row: bytes, cells: Sequence[Cell]) -> list[tuple[str, dict]]:
    """The example's snapshot, 0.05 s a row (a range that takes many seconds); once ``_interrupt_after`` rows
    have passed, it interrupts the process (the main thread gets KeyboardInterrupt)."""
    import os
    import signal

    from examples.inverted_count_index import snapshot

    time.sleep(0.05)
    left = _interrupt_after["rows"]
    if left is not None:
        _interrupt_after["rows"] = left - 1
        if left == 1:
            os.kill(os.getpid(), signal.SIGINT)
    return snapshot(row, cells)


def hold(row: bytes) -> tuple[threading.Event, threading.Event]:
    _hold[row], _reached[row] = threading.Event(), threading.Event()
    return _hold[row], _reached[row]


# --- helpers ------------------------------------------------------------------------------------------------------

def commit(txs: RowTransactions, scenario: Scenario, word: str, count: int) -> int:
    """Set ``word``'s count, exporting the change as the example's producers do; returns the commit's seq."""

    def change(tx):
        old = int(tx.get(COUNTS_FAMILY, COUNT_QUALIFIER, default=b"0"))
        if count:
            tx.put(COUNTS_FAMILY, COUNT_QUALIFIER, str(count).encode())
        else:
            tx.delete(COUNTS_FAMILY, COUNT_QUALIFIER)
        tx.export(scenario.queue, word, count_update(word, old or None, count or None))

    seq = txs.run(word, change)
    assert seq is not None
    return seq


def bootstrap_job(scenario: Scenario, dest_table: str, **settings) -> BootstrapJob:
    settings.setdefault("snapshot", SNAPSHOT)
    settings.setdefault("settle_seconds", 60.0)
    settings.setdefault("create_dest_table", True)
    return BootstrapJob(source=scenario.a.gateway_options(), dest=scenario.b.gateway_options(), queue=scenario.queue,
                        table=scenario.counts, dest_table=dest_table, settings=BootstrapSettings(**settings))


class Stream:
    """An in-process streaming drain of the scenario's queue into ``dest_table``, on a thread."""

    def __init__(self, scenario: Scenario, dest_table: str, **settings: Any) -> None:
        self.stop = threading.Event()
        job = scenario.job(dest_table=dest_table, trigger_seconds=0.2, relay_seconds=1.0, sweep_seconds=2.0,
                           create_dest_table=True, **settings)
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(job,), daemon=True)
        self.thread.start()

    def _run(self, job: DrainJob) -> None:
        try:
            stream_drain(LocalEngine(), job, stop=self.stop)
        except BaseException as exc:  # noqa: BLE001 - the test asserts on it
            self.errors.append(exc)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.errors, self.errors


def drained(scenario: Scenario, timeout: float = 120) -> None:
    """Wait until the queue and the producers' outboxes are empty, twice in a row a second apart (a relay may
    put an entry back between two looks)."""
    from connector.transactions import outbox_status

    def empty() -> bool:
        return scenario.depth() == 0 and outbox_status(scenario.conn_a, scenario.counts).empty

    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        quiet = quiet + 1 if empty() else 0
        time.sleep(0.5 if quiet else 0.3)
    assert empty(), f"queue depth {scenario.depth()}"


def assert_exact(scenario: Scenario, dest_table: str) -> None:
    """The destination holds exactly what A's rows imply (the inverted index of the counts)."""
    expected = expected_index(scenario.conn_a, scenario.counts)
    actual = actual_index(scenario.conn_b, dest_table)
    assert len(actual) == len(set(actual)), "duplicate index cells"
    stale, missing = set(actual) - expected, expected - set(actual)
    assert not stale and not missing, f"stale {sorted(stale)[:5]}, missing {sorted(missing)[:5]}"


def history(scenario: Scenario, words: int, old_table: str) -> RowTransactions:
    """Rows with history on A whose exports already went to another destination (the queue is empty)."""
    scenario.produce(words * 3, n_words=words, seed=11)
    scenario.conn_b.create_table(old_table, exist_ok=True)
    from connector.jobs import run_drain

    run_drain(LocalEngine(), scenario.job(dest_table=old_table))
    assert scenario.depth() == 0
    return RowTransactions(scenario.conn_a, scenario.counts)


# --- the tests ---------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_bootstrap_while_producers_commit_and_the_stream_drains_ends_exact(scenario):
    txs = history(scenario, 400, unique_table("old"))
    dest = unique_table("fresh")
    stream = Stream(scenario, dest)
    stop = threading.Event()
    skewed = [RowTransactions(scenario.a.connect(), scenario.counts, clock_us=lambda d=d: time.time_ns() // 1000 + d)
              for d in (-30_000_000, 30_000_000)]  # producers' clocks 30 s behind and ahead

    def produce(n: int) -> None:
        k = 0
        while not stop.is_set():
            commit(skewed[n], scenario, f"word{(k * 7 + n) % 60:05d}", 1 + (k % 9))  # hot rows
            k += 1

    producers = [threading.Thread(target=produce, args=(n,), daemon=True) for n in range(2)]
    for p in producers:
        p.start()
    hot = {f"word{i:05d}".encode() for i in range(60)}
    try:
        report = run_bootstrap(LocalEngine(), bootstrap_job(scenario, dest))
        assert report.totals.rows >= 300 and report.check is not None
    finally:
        stop.set()
        for p in producers:
            p.join(60)
    drained(scenario)
    stream.close()
    assert_exact(scenario, dest)
    # a row no producer touched during the bootstrap: its cell was written by the snapshot, at its version
    version_cells = scenario.conn_a.scan(scenario.counts, columns=[(b"!tx", b"v")])
    versions = {c.row: int(c.value.split(b" ")[0]) for c in version_cells}
    cells = list(scenario.conn_b.scan(dest))
    quiet = [c for c in cells if c.cq not in hot]
    assert len(quiet) > 100 and all(c.ts == versions[c.cq] for c in quiet)
    assert all(c.ts <= versions[c.cq] for c in cells)
    txs.close()


def test_an_old_export_whose_successor_went_elsewhere_leaves_no_stale_cell(scenario):
    """(a) and (e): an export older than the snapshot arrives after its successor was drained to another
    destination (a relay repeated late, say); the final check removes what it puts."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    first = commit(txs, scenario, "apple", 1)
    commit(txs, scenario, "apple", 2)
    old = unique_table("old")
    scenario.conn_b.create_table(old)
    from connector.jobs import run_drain

    run_drain(LocalEngine(), scenario.job(dest_table=old))
    with ExportQueue(scenario.conn_a, scenario.queue) as q:  # the late repeat of the first commit's export
        q.add("apple", count_update("apple", None, 1), first)
    dest = unique_table("fresh")
    stream = Stream(scenario, dest)
    try:
        report = run_bootstrap(LocalEngine(), bootstrap_job(scenario, dest))
        drained(scenario)
    finally:
        stream.close()
    assert_exact(scenario, dest)
    assert report.check is not None and report.check.repaired == 1  # the stale (1, apple) deleted at its own ts
    txs.close()


def test_a_commit_visible_only_after_its_row_was_read_wins_and_rows_deleted_on_a_go(scenario):
    """(b) and (d): a producer whose clock is far behind commits to a row after the bootstrap read it (its seq
    is the row's version + 1); another row is deleted on A during the bootstrap."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for word, count in (("apple", 3), ("pear", 4), ("plum", 5)):
        commit(txs, scenario, word, count)
    dest = unique_table("fresh")
    stream = Stream(scenario, dest)
    released, reached = hold(b"apple")
    behind = RowTransactions(scenario.a.connect(), scenario.counts, clock_us=lambda: 1)  # a clock in 1970
    box: dict[str, object] = {}
    worker = threading.Thread(target=lambda: box.update(
        report=run_bootstrap(LocalEngine(), bootstrap_job(scenario, dest, snapshot=GATED))), daemon=True)
    worker.start()
    try:
        assert reached.wait(120)
        late = commit(behind, scenario, "apple", 9)  # seq = apple's version + 1
        commit(txs, scenario, "pear", 0)  # pear deleted on A
        drained(scenario)
        released.set()
        worker.join(300)
        drained(scenario)
    finally:
        released.set()
        stream.close()
    assert "report" in box
    assert_exact(scenario, dest)
    (apple,) = [c for c in scenario.conn_b.scan(dest) if c.cq == b"apple"]
    assert (apple.row, apple.ts) == (b"00000009", late)
    txs.close()


def test_a_compaction_that_dropped_a_delete_cannot_resurrect_a_snapshot_cell(scenario):
    """(c): the snapshot read a row at count n; the stream then delivered 'count n -> n+1' and a full major
    compaction of B followed; the snapshot's older (n, apple) arrives after it. In delete mode the compaction
    dropped the delete marker: without the final check the old cell shows, with it (the default) it is deleted
    at its own timestamp. In tombstone mode (the default) the tombstone survives the compaction and hides it."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    commit(txs, scenario, "apple", 1)
    dest = unique_table("fresh")
    outcomes = {}
    for count, (mode, final_check) in enumerate((("delete", False), ("delete", True), ("tombstone", False)), 2):
        table = f"{dest}_{mode}_{int(final_check)}"
        stream = Stream(scenario, table, delete_mode=mode)
        released, reached = hold(b"apple")
        box: dict[str, object] = {}
        job = bootstrap_job(scenario, table, snapshot=GATED, final_check=final_check, delete_mode=mode)
        worker = threading.Thread(target=lambda j=job, out=box: out.update(report=run_bootstrap(LocalEngine(), j)),
                                  daemon=True)
        worker.start()
        try:
            assert reached.wait(120)
            commit(txs, scenario, "apple", count)
            drained(scenario)
            scenario.conn_b.compact_table(table, wait=True)  # in delete mode: drops the delete of the old cell
            released.set()
            worker.join(300)
            drained(scenario)
        finally:
            released.set()
            stream.close()
        outcomes[mode, final_check] = sorted(actual_index(scenario.conn_b, table))
    assert outcomes["delete", False] == [(b"00000001", b"apple"), (b"00000002", b"apple")]  # the hazard, shown
    assert outcomes["delete", True] == [(b"00000003", b"apple")]
    assert outcomes["tombstone", False] == [(b"00000004", b"apple")]
    txs.close()


def test_outbox_cells_not_yet_relayed_reach_the_destination(scenario, monkeypatch):
    """(e): a producer died after its commit, before its relay; the bootstrap relays first."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    commit(txs, scenario, "apple", 1)
    monkeypatch.setattr(txs._relayer, "submit", lambda cells, read_at=None: None)  # the relay never happens
    commit(txs, scenario, "apple", 4)  # committed, its outbox left in the row
    monkeypatch.undo()
    dest = unique_table("fresh")
    stream = Stream(scenario, dest)
    try:
        report = run_bootstrap(LocalEngine(), bootstrap_job(scenario, dest))
        drained(scenario)
    finally:
        stream.close()
    assert report.relayed >= 1 or report.totals.outbox == 0
    assert_exact(scenario, dest)
    txs.close()


def test_two_bootstraps_at_once_are_refused_and_a_killed_one_resumes(scenario):
    """(f): a second bootstrap of the same destination while one runs is refused naming it; a bootstrap that
    stopped half way resumes: it writes only the ranges left."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    words = [f"w{i:03d}" for i in range(40)]
    for i, w in enumerate(words):
        commit(txs, scenario, w, i + 1)
    scenario.conn_a.add_splits(scenario.counts, [b"w010", b"w020", b"w030"])
    dest = unique_table("fresh")
    stream = Stream(scenario, dest)
    try:
        released, reached = hold(b"w025")
        box: dict[str, object] = {}
        job = bootstrap_job(scenario, dest, snapshot=GATED)
        def first_run() -> None:
            try:
                box["report"] = run_bootstrap(LocalEngine(), job)
            except BootstrapError as exc:  # it lost its lease to the resumed run: as a killed one would
                box["error"] = exc

        worker = threading.Thread(target=first_run, daemon=True)
        worker.start()
        assert reached.wait(120)
        with pytest.raises(BootstrapError, match="another bootstrap of .* is running"):
            run_bootstrap(LocalEngine(), job)
        # "kill" it: its lease vanishes (as when its process is gone) and its thread never finishes a range
        state = BootstrapState(scenario.conn_a, scenario.queue, job.destination)
        done_before = set(state.done())
        assert done_before and len(done_before) < 4
        table = BootstrapState(scenario.conn_a, scenario.queue, table_key(scenario.conn_b, dest))  # the table's too
        scenario.conn_a.write(scenario.queue.table, [Mutation(row).delete(b"b", b"lease") for row in (state.row,
                                                                                                       table.row)])
        _hold.pop(b"w025")
        report = run_bootstrap(LocalEngine(), job)
        assert len(done_before) <= report.resumed < 4 and report.ranges == 4
        released.set()
        worker.join(120)
        assert "lease was taken over" in str(box.get("error"))
        drained(scenario)
    finally:
        released.set()
        stream.close()
    assert_exact(scenario, dest)
    txs.close()


def test_verify_reports_exactly_the_injected_damage_and_repair_makes_it_right(scenario):
    """With the stream running and a producer committing on other rows throughout."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(30):
        commit(txs, scenario, f"v{i:03d}", i + 1)
    dest = scenario.index
    stream = Stream(scenario, dest)
    stop = threading.Event()
    others = RowTransactions(scenario.a.connect(), scenario.counts)

    def keep_committing() -> None:
        k = 0
        while not stop.is_set():
            commit(others, scenario, f"busy{k % 5}", 1 + k % 4)
            k += 1

    busy = threading.Thread(target=keep_committing, daemon=True)
    try:
        drained(scenario)
        busy.start()
        a, b = scenario.conn_a, scenario.conn_b
        dest_spec = Destination(b, dest, "difference")
        source = snapshot_source(a, scenario.counts, SNAPSHOT)
        clean = verify_destination(a, scenario.counts, source, scenario.queue, dest_spec, settle_seconds=30)
        assert clean.differences == 0 and clean.expected >= 30
        version = {c.row: int(c.value.split(b" ")[0]) for c in a.scan(scenario.counts, columns=[(b"!tx", b"v")])}
        # damage as a restore from an old backup leaves it: a cell lost, a stale one, an old value
        b.write(dest, [Mutation(b"00000006").delete(b"w", b"v005", timestamp=version[b"v005"]),
                       Mutation(b"00000010").delete(b"w", b"v009", timestamp=version[b"v009"])])
        b.compact_table(dest, wait=True)  # gone without a trace (no delete marker left)
        b.write(dest, [Mutation(b"00000099").put(b"w", b"ghost", b"", timestamp=5),
                       Mutation(b"00000010").put(b"w", b"v009", b"changed", timestamp=version[b"v009"] - 1)])
        damaged = verify_destination(a, scenario.counts, source, scenario.queue, dest_spec, settle_seconds=30)
        kinds = sorted((d.kind, d.cq) for r in damaged.results for d in r.diffs)
        assert kinds == [("different", b"v009"), ("missing", b"v005"), ("unexpected", b"ghost")], kinds
        assert damaged.repaired == 0
        repaired = verify_destination(a, scenario.counts, source, scenario.queue, dest_spec, repair=True,
                                      settle_seconds=30)
        found = [(d.kind, d.cq) for r in repaired.results for d in r.diffs]
        assert (repaired.differences, repaired.repaired, repaired.unrepaired) == (3, 3, 0), found
        after = verify_destination(a, scenario.counts, source, scenario.queue, dest_spec, settle_seconds=30)
        assert after.differences == 0
        # later exports still win over the repair: change v005 and ghost stays gone
        commit(txs, scenario, "v005", 42)
    finally:
        stop.set()
        if busy.is_alive():
            busy.join(60)
        drained(scenario)
        stream.close()
    assert_exact(scenario, dest)
    txs.close()


def test_a_second_destination_is_built_beside_the_first_while_it_keeps_receiving(scenario):
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(20):
        commit(txs, scenario, f"s{i:03d}", i + 1)
    first = scenario.index
    stream = Stream(scenario, first)
    second = unique_table("second")
    try:
        drained(scenario)
        scenario.conn_b.create_table(second)  # a registered table exists: no drain creates it
        register_destination(scenario.conn_a, scenario.queue, Registered(
            f"B/{second}", scenario.b.gateway_options(), second, "difference"))
        job = bootstrap_job(scenario, second)
        job = dataclasses.replace(job, dest=dataclasses.replace(job.dest, name="B"))
        report = run_bootstrap(LocalEngine(), job)
        assert report.check is not None and report.check.differences == 0
        commit(txs, scenario, "s003", 77)  # reaches both
        drained(scenario)
    finally:
        stream.close()
    assert_exact(scenario, first)
    assert_exact(scenario, second)
    txs.close()


@pytest.mark.slow
def test_the_commands_bootstrap_with_spark_then_verify_and_repair(scenario, cli_env):
    """``accumulo-export bootstrap --engine spark`` (one Spark task per tablet of A), then ``verify``: exit 0 on
    a right destination, 1 naming the damage, 0 after ``--repair``."""
    import json

    from .conftest import run_cli

    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(50):
        commit(txs, scenario, f"c{i:03d}", i + 1)
    scenario.conn_a.add_splits(scenario.counts, [b"c020", b"c040"])
    common = ["--source", "A", "--table", scenario.queue.table, "--queue", scenario.queue.qid,
              "--producer-table", scenario.counts, "--dest", "B", "--dest-table", scenario.index,
              "--snapshot", SNAPSHOT]
    stream = Stream(scenario, scenario.index)
    try:
        out = run_cli(cli_env, "bootstrap", *common, "--engine", "spark", "--master", "local[2]", "--json",
                      timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        assert (summary["ranges"], summary["rows"], summary["cells"]) == (3, 50, 50)
        assert summary["final_check"]["differences"] == 0
        right = run_cli(cli_env, "verify", *common, "--json")
        assert right.returncode == 0 and json.loads(right.stdout)["differences"] == 0, right.stderr[-2000:]
        scenario.conn_b.write(scenario.index, [Mutation(b"00000077").put(b"w", b"nobody", b"", timestamp=3)])
        wrong = run_cli(cli_env, "verify", *common, "--settle-seconds", "10")
        assert wrong.returncode == 1 and "1 unexpected" in wrong.stdout and "nobody" in wrong.stdout, wrong.stdout
        fixed = run_cli(cli_env, "verify", *common, "--repair", "--json")
        assert fixed.returncode == 0 and json.loads(fixed.stdout)["repaired"] == 1
        assert run_cli(cli_env, "verify", *common).returncode == 0
    finally:
        stream.close()
    assert_exact(scenario, scenario.index)
    txs.close()


def test_sigterm_stops_a_bootstrap_after_its_running_ranges_freeing_its_lease_and_a_rerun_resumes(scenario, cli_env):
    import json
    import os
    import signal
    import subprocess
    import sys

    from .conftest import ROOT, run_cli

    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(40):
        commit(txs, scenario, f"t{i:03d}", i + 1)
    scenario.conn_a.add_splits(scenario.counts, [f"t{i:03d}".encode() for i in range(4, 40, 5)])  # 9 tablets
    common = ["bootstrap", "--source", "A", "--table", scenario.queue.table, "--queue", scenario.queue.qid,
              "--producer-table", scenario.counts, "--dest", "B", "--dest-table", scenario.index,
              "--snapshot", f"{__name__}:slow_snapshot", "--method", "live"]
    stream = Stream(scenario, scenario.index)
    try:
        drained(scenario)
        proc = subprocess.Popen([sys.executable, "-m", "connector.cli", *common, "--json"], env=cli_env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        state = BootstrapState(scenario.conn_a, scenario.queue, f"B/{scenario.index}")
        deadline = time.monotonic() + 180
        while not state.done() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, err[-3000:]
        assert "run the same command again to resume" in err and "stopped by SIGTERM" in err, err[-3000:]
        done = len(state.done())
        assert 1 <= done < 9  # the running ranges finished, the others did not start
        lease = scenario.conn_a.scan(scenario.queue.table, columns=[(b"b", b"lease")])
        assert [c for c in lease if c.row == state.row] == []  # freed at once, not left to expire
        rerun = run_cli(cli_env, *common, "--json", timeout=600)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        summary = json.loads(rerun.stdout.strip().splitlines()[-1])
        assert summary["resumed_ranges"] == done and summary["ranges"] == 9
        assert summary["final_check"]["differences"] == 0
    finally:
        stream.close()
    assert_exact(scenario, scenario.index)
    txs.close()


def test_the_bulk_path_keeps_each_rows_version_and_loads_nothing_twice_after_a_kill(scenario, monkeypatch):
    """Sorted RFiles, cut at the destination's splits and bulk-loaded, keep every cell's timestamp (all
    versions scanned); a bootstrap killed between a range's load and its record resumes without loading it
    again."""
    from connector.accumulo import bulk as bulk_module

    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(60):
        commit(txs, scenario, f"b{i:03d}", i + 1)
    scenario.conn_a.add_splits(scenario.counts, [b"b029"])
    dest = unique_table("bulk")
    scenario.conn_b.create_table(dest)
    scenario.conn_b.add_splits(dest, [b"00000020", b"00000040"])
    loads: list[str] = []
    real_load = bulk_module.BulkImport.load
    monkeypatch.setattr(bulk_module.BulkImport, "load", lambda self: (loads.append(self.bulk_id), real_load(self)))
    real_done = BootstrapState.mark_done

    def killed_after_the_first_load(self, index, counters):
        if loads and "killed" not in loads:
            loads.append("killed")
            raise SystemExit("killed")  # the process dies between the load and its record
        real_done(self, index, counters)

    monkeypatch.setattr(BootstrapState, "mark_done", killed_after_the_first_load)
    job = bootstrap_job(scenario, dest, method="bulk", final_check=False)
    with pytest.raises(SystemExit):
        run_bootstrap(LocalEngine(threads=1), job)
    scenario.conn_a.write(scenario.queue.table, [Mutation(BootstrapState(scenario.conn_a, scenario.queue,
                                                                         job.destination).row).delete(b"b", b"lease")])
    report = run_bootstrap(LocalEngine(threads=1), job)
    assert report.ranges == 2 and loads.count("killed") == 1
    assert len([x for x in loads if x != "killed"]) == 2  # each range's files loaded once, the first before the kill
    assert_exact(scenario, dest)
    version_cells = scenario.conn_a.scan(scenario.counts, columns=[(b"!tx", b"v")])
    versions = {c.row: int(c.value.split(b" ")[0]) for c in version_cells}
    every_version = list(scenario.conn_b.scan(dest))
    assert len(every_version) == 60 and all(c.ts == versions[c.cq] for c in every_version)
    assert len(scenario.conn_b.list_splits(dest)) == 2
    txs.close()


def test_an_interrupted_bootstrap_of_one_tablet_stops_within_a_chunk_and_a_rerun_ends_exact(scenario, monkeypatch):
    """The new user's finding: a bootstrap of a table with one tablet took 19 s to stop after Ctrl-C (its only
    range ran to its end). It now stops between two chunks of rows; the range is not recorded as done, and a
    rerun writes it whole."""
    from connector.jobs import run_drain
    from connector.snapshot import rows as rows_module

    scenario.produce(300, n_words=300, seed=5)  # about 170 rows in the producers' one tablet
    history_dest = unique_table("first")
    scenario.conn_b.create_table(history_dest)
    run_drain(LocalEngine(), scenario.job(dest_table=history_dest))  # the queue empty: a final check needs no wait
    monkeypatch.setattr(rows_module, "CHUNK_CELLS", 40)  # chunks of a dozen rows or so
    monkeypatch.setitem(_interrupt_after, "rows", 30)  # Ctrl-C at the 30th row of the range
    dest = unique_table("stopped")
    job = bootstrap_job(scenario, dest, snapshot=f"{__name__}:tenth_snapshot", method="live", final_check=False)
    with pytest.raises(KeyboardInterrupt):
        run_bootstrap(LocalEngine(), job)
    rows_snapshotted = 30 - (_interrupt_after["rows"] or 0)
    state = BootstrapState(scenario.conn_a, scenario.queue, job.destination)
    # it stopped inside its only range (before, the range ran to its end and was recorded): part of what A
    # implies is on B, nothing is recorded, and the rerun writes the range whole
    assert state.done() == {}, f"the range ran to its end ({rows_snapshotted} rows snapshotted)"
    expected = len(expected_index(scenario.conn_a, scenario.counts))
    assert len(actual_index(scenario.conn_b, dest)) < expected, "the whole range was written"
    monkeypatch.setitem(_interrupt_after, "rows", None)
    report = run_bootstrap(LocalEngine(), bootstrap_job(scenario, dest, snapshot=f"{__name__}:tenth_snapshot",
                                                        method="live"))
    assert report.resumed == 0 and report.check is not None and report.check.differences == 0
    assert_exact(scenario, dest)
