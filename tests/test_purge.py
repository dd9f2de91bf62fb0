"""Purging a tombstone-mode destination's tombstones (connector/snapshot/purge.py, ``accumulo-export
purge-tombstones``): only what the queue's watermark proves no late export can need, read before the grace and
again near its end, only what was there before the watermark was read, nothing while a bootstrap or a repair of
the destination table runs or is unfinished (whatever name reaches the table), nothing where another queue feeds
the table, no grace shorter than the bound writers are held to. On real Accumulo.

The grace's bound is lowered to nothing here (the ``short_bound`` fixture) so that a purge takes a second; the
test of the bound itself restores it."""

from __future__ import annotations

import json
import threading
import time

import pytest

from connector.accumulo import Mutation
from connector.accumulo.writer import MIN_PURGE_GRACE_SECONDS
from connector.cli.metrics import PurgeMetrics
from connector.export import AccumuloExporter, SequencedExport
from connector.export.tombstones import TOMBSTONE, tombstones_below
from connector.queue import ExportQueue, QueueConfig
from connector.queue.compaction import table_file_keys
from connector.queue.feeders import Feeder, record_feeder
from connector.snapshot import purge as purge_module
from connector.snapshot import state as state_module
from connector.snapshot.auto_purge import BackgroundPurge
from connector.snapshot.errors import BootstrapError, PurgeRefusedError
from connector.snapshot.purge import PurgeReport, purge_destination
from connector.snapshot.state import BootstrapState, Plan, destination_id, table_key, table_lease

from .conftest import run_cli, unique_table

pytestmark = pytest.mark.cluster


def _cell(row: str) -> dict[str, str]:
    return {"row": row, "cf": "f", "cq": "q", "value": "v"}


def _delete(seq: int, row: str) -> SequencedExport:
    return SequencedExport(row, {"old": [_cell(row)], "new": []}, seq)


def _put(seq: int, row: str) -> SequencedExport:
    return SequencedExport(row, {"old": [], "new": [_cell(row)]}, seq)


@pytest.fixture(autouse=True)
def short_bound(monkeypatch):
    """Writers held to no bound, so a purge may wait a fraction of a second (its logic is unchanged)."""
    monkeypatch.setattr(purge_module, "MIN_PURGE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(purge_module, "LATE_WRITE_SECONDS", 0.0)


@pytest.fixture
def setup(conn_a, conn_b):
    """A queue on A holding one entry at seq 5, and a tombstone-mode destination on B holding tombstones at seqs
    3 ("low") and 9 ("high") over older puts, and a live cell "kept" at seq 4."""
    queue = QueueConfig(table=unique_table("purgeq"), qid="p", num_buckets=2)
    ExportQueue(conn_a, queue).init()
    with ExportQueue(conn_a, queue) as q:
        q.add("waiting", {"old": [], "new": []}, seq=5)
    table = unique_table("purged")
    with AccumuloExporter(conn_b, table, "difference").ensure_table(create=True) as exporter:  # default mode
        exporter.export([_put(1, "low"), _put(2, "high"), _put(4, "kept"), _delete(3, "low"), _delete(9, "high")])
    yield queue, table
    conn_b.delete_table(table)
    conn_a.delete_table(queue.table)


def _tombstones(conn, table) -> list[tuple[bytes, int]]:
    return sorted((row, ts) for page in tombstones_below(conn, table, None)
                  for row, ts in zip(page.column("row").to_pylist(), page.column("ts").to_pylist(), strict=True))


def _visible(conn, table) -> list[bytes]:
    return sorted(c.row for c in conn.scan(table))


def test_the_default_mode_writes_tombstones_and_a_purge_turns_those_below_the_watermark_into_deletes(
        setup, conn_a, conn_b):
    queue, table = setup
    assert _tombstones(conn_b, table) == [(b"high", 9), (b"low", 3)]
    report = purge_destination(conn_a, queue, conn_b, table, "B", grace=0)
    assert (report.horizon, report.listed, report.deleted) == (5, 1, 1)
    assert _tombstones(conn_b, table) == [(b"high", 9)], "the tombstone above the waiting seq 5 must stay"
    assert _visible(conn_b, table) == [b"kept"]
    conn_b.compact_table(table, wait=True)  # the delete and what it hid are gone for good
    raw = sorted((c.row, c.ts) for c in conn_b.scan(table, iterators=[]))
    assert (b"low", 3) not in raw and (b"low", 1) not in raw
    assert _visible(conn_b, table) == [b"kept"]


def test_a_purge_compacts_the_tablets_it_deleted_in_so_the_files_keep_only_what_a_reader_can_see(
        setup, conn_a, conn_b):
    """Months of purges must not leave every tombstone and its delete in B's files, walked by every full scan,
    until Accumulo's own compactions happen to merge the largest file (issue 47's soak)."""
    queue, table = setup
    report = purge_destination(conn_a, queue, conn_b, table, "B", grace=0)
    assert report.deleted == 1 and report.compacted
    deadline = time.monotonic() + 60
    while table_file_keys(conn_b, table) != 2 and time.monotonic() < deadline:  # kept@4 and the tombstone high@9
        time.sleep(0.5)
    assert table_file_keys(conn_b, table) == 2, "the files hold the purged tombstone, its delete, or what they hid"
    assert _tombstones(conn_b, table) == [(b"high", 9)] and _visible(conn_b, table) == [b"kept"]


def test_a_dry_run_changes_nothing_and_says_what_it_would_purge(setup, conn_a, conn_b):
    queue, table = setup
    report = purge_destination(conn_a, queue, conn_b, table, "B", grace=3600, dry_run=True)
    assert (report.listed, report.deleted, report.dry_run) == (1, 0, True)
    assert "would turn 1 into real deletes" in report.describe()
    assert _tombstones(conn_b, table) == [(b"high", 9), (b"low", 3)]


def test_only_tombstones_that_were_there_before_the_watermark_was_read_are_purged(setup, conn_a, conn_b):
    """A tombstone written during the grace, below the horizon (a producer whose clock runs behind), may guard an
    export a writer read after the watermark: it waits for the next purge."""
    queue, table = setup

    def during_the_grace(line: str) -> None:
        if "for writers" in line:
            conn_b.write(table, [Mutation("late").put("f", "q", "v", timestamp=1),
                                 Mutation("late").put("f", "q", TOMBSTONE, timestamp=2)])

    report = purge_destination(conn_a, queue, conn_b, table, "B", grace=0.5, progress=during_the_grace)
    assert report.deleted == 1
    assert _tombstones(conn_b, table) == [(b"high", 9), (b"late", 2)]


def test_a_purge_refuses_a_table_another_queue_feeds(setup, conn_a, conn_b):
    queue, table = setup
    record_feeder(conn_b, table, Feeder("another-queue-id", "othertable", "o"))
    with pytest.raises(PurgeRefusedError, match="also fed by queue 'o' of table 'othertable'"):
        purge_destination(conn_a, queue, conn_b, table, "B", grace=0)
    assert len(_tombstones(conn_b, table)) == 2


def test_a_purge_waits_for_no_bootstrap_of_its_destination(setup, conn_a, conn_b):
    """A bootstrap writes cells at old row versions: none may run during a purge, nor be left unfinished."""
    queue, table = setup
    state = BootstrapState(conn_a, queue, destination_id("B", table))
    state.acquire()
    try:
        with pytest.raises(BootstrapError, match="another bootstrap of B/.* is running"):
            purge_destination(conn_a, queue, conn_b, table, "B", grace=0)
        state.start(Plan(table="producer", snapshot="m:f", ranges=((None, None),), started_ms=0))
    finally:
        state.release()
    with pytest.raises(PurgeRefusedError, match="a bootstrap of B/.* is unfinished"):
        purge_destination(conn_a, queue, conn_b, table, "B", grace=0)
    assert len(_tombstones(conn_b, table)) == 2
    state.acquire()
    state.clear()
    state.release()
    assert purge_destination(conn_a, queue, conn_b, table, "B", grace=0).deleted == 1


def test_a_bootstrap_started_during_a_purge_is_refused_naming_it_when_the_purge_does_not_give_way(
        setup, conn_a, conn_b, monkeypatch):
    queue, table = setup
    monkeypatch.setattr(state_module, "PREEMPT_SECONDS", 0.0)  # the bootstrap asks once, the purge has no time
    refused: list[str] = []

    def during_the_grace(line: str) -> None:
        if "for writers" in line:
            try:
                BootstrapState(conn_a, queue, destination_id("B", table)).acquire()
            except BootstrapError as exc:
                refused.append(str(exc))

    purge_destination(conn_a, queue, conn_b, table, "B", grace=0.2, progress=during_the_grace)
    assert len(refused) == 1 and refused[0].startswith("a tombstone purge of B/"), refused


def test_a_bootstrap_started_during_a_purges_grace_makes_it_give_way_within_seconds(setup, conn_a, conn_b):
    """Issue 47: a purge in its grace (here 600 s) gives its lease up to a bootstrap at once, deleting nothing
    (its tombstones wait for the next purge)."""
    queue, table = setup
    in_grace = threading.Event()
    reports: list[PurgeReport] = []

    def during_the_grace(line: str) -> None:
        if "for writers" in line:
            in_grace.set()

    purge = threading.Thread(target=lambda: reports.append(purge_destination(
        conn_a, queue, conn_b, table, "B", grace=600, progress=during_the_grace)), daemon=True)
    purge.start()
    assert in_grace.wait(60)
    started = time.monotonic()
    bootstrap = BootstrapState(conn_a, queue, destination_id("B", table), table_key=table_key(conn_b, table))
    bootstrap.acquire()  # before issue 47: refused ("a tombstone purge of B/... is running")
    took = time.monotonic() - started
    bootstrap.release()
    purge.join(30)
    assert took < 15, f"the bootstrap waited {took:.0f} s for the purge"
    (report,) = reports
    assert (report.gave_way, report.stopped, report.deleted, report.listed) == (True, True, 0, 1)
    assert "gave way to a bootstrap" in report.describe()
    assert _tombstones(conn_b, table) == [(b"high", 9), (b"low", 3)]
    # the request went with the bootstrap's lease: the next purge is not asked to give way
    assert purge_destination(conn_a, queue, conn_b, table, "B", grace=0).deleted == 1


def test_the_command_purges_and_reports_as_json(setup, cli_env, conn_b):
    queue, table = setup
    args = ["purge-tombstones", "--source", "A", "--table", queue.table, "--queue", queue.qid, "--dest", "B",
            "--dest-table", table]
    dry = run_cli(cli_env, *args, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout) | {"seconds": 0} == {
        "destination": f"B/{table}", "horizon": 5, "listed": 1, "deleted": 0, "grace_seconds": 0.0, "seconds": 0,
        "dry_run": True, "stopped": False, "gave_way": False, "tombstones": 2, "waiting_outbox_cells": 0,
        "waiting_entries": 1, "waiting_dead_letters": 0, "compacted": False}
    short = run_cli(cli_env, *args, "--grace", "10")
    assert short.returncode == 2 and short.stderr.count("\n") == 1, short.stderr
    assert f"below the {MIN_PURGE_GRACE_SECONDS:g} s a purge needs" in short.stderr, short.stderr
    missing = run_cli(cli_env, *args[:-1], table + "x", "--dry-run")
    assert missing.returncode == 2 and "does not exist" in missing.stderr, missing.stderr
    assert run_cli(cli_env, *args, "--grace", "-1").returncode == 2
    assert len(_tombstones(conn_b, table)) == 2


# --- issue 45: the purge's second reading, its exclusion by the table's identity, its bound -----------------------

def test_an_old_export_a_late_relay_puts_back_during_the_grace_keeps_its_tombstone(setup, conn_a, conn_b):
    """Finding 4: a one-shot relay scanned a producer's outbox cell (an export of "low" at seq 2) before the
    producer's own relay moved it and a drain exported it; it adds the export to the queue again during the grace.
    The first reading (lowest 5) made the tombstone at 3 a candidate; the second sees seq 2 waiting: it stays."""
    queue, table = setup

    def late_relay(line: str) -> None:
        if "for writers" in line:
            with ExportQueue(conn_a, queue) as q:
                q.add("low", {"old": [], "new": [_cell("low")]}, seq=2)

    report = purge_destination(conn_a, queue, conn_b, table, "B", grace=0.5, progress=late_relay)
    assert report.watermark.lowest == 5 and report.second is not None and report.second.lowest == 2
    assert (report.horizon, report.listed, report.deleted) == (2, 0, 0), report.to_json()
    assert _tombstones(conn_b, table) == [(b"high", 9), (b"low", 3)]


def test_a_feeder_recorded_during_the_grace_stops_the_purge_before_its_deletes(setup, conn_a, conn_b):
    """Another queue starting to feed the table while the purge waits: checked again right before the deletes."""
    queue, table = setup

    def another_queue_starts(line: str) -> None:
        if "for writers" in line:
            record_feeder(conn_b, table, Feeder("another-queue-id", "othertable", "o"))

    with pytest.raises(PurgeRefusedError, match="also fed by queue 'o' of table 'othertable'"):
        purge_destination(conn_a, queue, conn_b, table, "B", grace=0.2, progress=another_queue_starts)
    assert len(_tombstones(conn_b, table)) == 2


def test_a_bootstrap_through_an_unnamed_connection_and_a_purge_through_a_named_one_exclude_each_other(
        setup, conn_a, conn_b):
    """Finding 5: a bootstrap through a gateway address ("127.0.0.1:<port>/<table>") and a purge through the
    cluster's name ("B/<table>") name the destination differently; both key their exclusion on the table's id."""
    queue, table = setup
    key = table_key(conn_b, table)
    unnamed = destination_id(f"127.0.0.1:{conn_b.port}", table)
    state = BootstrapState(conn_a, queue, unnamed, table_key=key)
    state.acquire()
    try:
        with pytest.raises(BootstrapError, match=f"another bootstrap of {unnamed} is running"):
            purge_destination(conn_a, queue, conn_b, table, "B", grace=0)
        state.start(Plan(table="producer", snapshot="m:f", ranges=((None, None),), started_ms=0))
    finally:
        state.release()
    with pytest.raises(PurgeRefusedError, match=f"a bootstrap of {unnamed} is unfinished"):
        purge_destination(conn_a, queue, conn_b, table, "B", grace=0)
    assert len(_tombstones(conn_b, table)) == 2
    state.acquire()
    state.clear()
    state.release()

    refused: list[str] = []

    def bootstrap_during_the_grace(line: str) -> None:
        if "for writers" in line:
            try:
                BootstrapState(conn_a, queue, unnamed, table_key=key).acquire()
            except BootstrapError as exc:
                refused.append(str(exc))

    assert purge_destination(conn_a, queue, conn_b, table, "B", grace=0.2,
                             progress=bootstrap_during_the_grace).deleted == 1
    assert len(refused) == 1 and refused[0].startswith(f"a tombstone purge of B/{table} is running"), refused


def test_a_repair_of_the_table_holds_off_a_purge_and_a_purge_holds_off_a_repair(setup, conn_a, conn_b):
    """The lease a ``verify --repair`` takes (tests/test_verify_repair.py runs the real one) and a purge's are one."""
    queue, table = setup
    repair = table_lease(conn_a, queue, conn_b, table, "a repair")
    repair.acquire()
    try:
        with pytest.raises(BootstrapError, match=f"a repair of {table} .* is running"):
            purge_destination(conn_a, queue, conn_b, table, "B", grace=0)
    finally:
        repair.release()
    refused: list[str] = []

    def repair_during_the_grace(line: str) -> None:
        if "for writers" in line:
            try:
                table_lease(conn_a, queue, conn_b, table, "a repair").acquire()
            except BootstrapError as exc:
                refused.append(str(exc))

    assert purge_destination(conn_a, queue, conn_b, table, "B", grace=0.2,
                             progress=repair_during_the_grace).deleted == 1
    assert len(refused) == 1 and refused[0].startswith(f"a tombstone purge of B/{table}"), refused


def test_a_grace_below_the_bound_writers_are_held_to_is_refused(setup, conn_a, conn_b, monkeypatch):
    queue, table = setup
    monkeypatch.setattr(purge_module, "MIN_PURGE_GRACE_SECONDS", MIN_PURGE_GRACE_SECONDS)
    with pytest.raises(PurgeRefusedError, match=f"a grace of 10 s is below the {MIN_PURGE_GRACE_SECONDS:g} s"):
        purge_destination(conn_a, queue, conn_b, table, "B", grace=10)
    assert purge_destination(conn_a, queue, conn_b, table, "B", grace=10, dry_run=True).listed == 1
    assert len(_tombstones(conn_b, table)) == 2


# --- issue 47: the purge on its own (a stream's background purger), and a purge stopped during its grace ---


def test_a_purge_stopped_during_its_grace_deletes_nothing_releases_its_lease_and_says_so(setup, conn_a, conn_b):
    queue, table = setup
    stop = threading.Event()

    def during_the_grace(line: str) -> None:
        if "for writers" in line:
            stop.set()

    started = time.monotonic()
    report = purge_destination(conn_a, queue, conn_b, table, "B", grace=600, progress=during_the_grace, stop=stop)
    assert time.monotonic() - started < 30, "a stopped purge gives up within seconds, not after its grace"
    assert (report.stopped, report.listed, report.deleted) == (True, 1, 0)
    assert "stopped during the grace" in report.describe()
    assert _tombstones(conn_b, table) == [(b"high", 9), (b"low", 3)]
    state = BootstrapState(conn_a, queue, destination_id("B", table))
    state.acquire()  # the purge let go of the lease
    state.release()


def test_the_background_purger_purges_each_period_and_stops_promptly(setup, accumulo, conn_a, conn_b):
    queue, table = setup
    a, b = accumulo["a"].gateway_options(), accumulo["b"].gateway_options()
    purger = BackgroundPurge(a, queue, b, table, period=0.5, grace=0).start()
    try:
        deadline = time.monotonic() + 60
        while not purger.outcomes and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        started = time.monotonic()
        purger.stop()
    assert time.monotonic() - started < 30
    name = f"{b.label}/{table}"
    assert purger.outcomes[(name, "purged")] == 1, purger.outcomes
    assert _tombstones(conn_b, table) == [(b"high", 9)]
    served = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for family in PurgeMetrics(purger).collect() for s in family.samples}
    assert served[("accumulo_export_purge_runs_total", (("destination", name), ("outcome", "purged")))] == 1
    assert served[("accumulo_export_destination_tombstones", (("destination", name),))] == 2
    # the seqs here are tiny (3, 5, 9 µs after the epoch): the ages are about the clock's
    age = served[("accumulo_export_destination_oldest_tombstone_age_seconds", (("destination", name),))]
    assert abs(age - time.time()) < 60
    assert served[("accumulo_export_purge_horizon_age_seconds", (("destination", name),))] > 0


def test_a_failing_background_purge_is_counted_and_never_raises(setup, accumulo, conn_a, conn_b):
    queue, table = setup
    record_feeder(conn_b, table, Feeder("another-queue-id", "othertable", "o"))  # the purge refuses the table
    a, b = accumulo["a"].gateway_options(), accumulo["b"].gateway_options()
    purger = BackgroundPurge(a, queue, b, table, period=3600, grace=0)
    purger.run_once()
    assert purger.outcomes == {(f"{b.label}/{table}", "failed"): 1}
    assert len(_tombstones(conn_b, table)) == 2


def test_a_delete_mode_destination_is_not_purged(accumulo, conn_a, conn_b):
    queue = QueueConfig(table=unique_table("purgeq"), qid="p", num_buckets=2)
    ExportQueue(conn_a, queue).init()
    table = unique_table("deletemode")
    with AccumuloExporter(conn_b, table, "difference", delete_mode="delete").ensure_table(create=True) as exporter:
        exporter.export([_put(1, "x"), _delete(3, "x")])
    try:
        purger = BackgroundPurge(accumulo["a"].gateway_options(), queue, accumulo["b"].gateway_options(), table,
                                 period=3600, grace=0)
        purger.run_once()
        assert not purger.outcomes and not purger.reports
    finally:
        conn_b.delete_table(table)
        conn_a.delete_table(queue.table)
