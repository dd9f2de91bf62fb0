"""The runner's in-process engine and the jobs load without Spark (ARCHITECTURE.md: Spark specifics live in
``connector.spark`` only), and the runner's pure logic: bucket groups, counters as Arrow rows, the local
engine's failure handling."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from connector.accumulo import TimedOutError
from connector.combine import CombineStats
from connector.jobs import DrainError, LocalEngine, Round, bucket_groups
from connector.jobs.stats import stats_batch, stats_ddl, stats_from_row
from connector.queue import DrainSettings, DrainStats
from tests.conftest import unique_table
from tests.test_combine_spark import wc  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parent.parent


def test_the_local_engine_and_the_jobs_import_no_pyspark():
    code = ("import sys, connector.jobs, connector.jobs.local, connector.jobs.drain, connector.jobs.combine, "
            "connector.cli.main; print(sorted(m for m in sys.modules if m == 'pyspark' or m.startswith('pyspark.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_bucket_groups_are_consecutive_and_bounded():
    assert bucket_groups([1, 2, 3, 5, 8], 2) == ((1, 2), (3, 5), (8,))
    assert bucket_groups([], 4) == ()


def test_counters_travel_as_one_arrow_row_each():
    assert stats_ddl(DrainStats) == ("entries long, exported long, deleted long, dead_lettered long, batches long, "
                                     "bytes long, seconds double, cells long, abandoned long")
    stats = CombineStats(keys=3, updates=7, seconds=0.5, errors=["key 'a': boom"])
    row = stats_batch(stats).to_pylist()
    assert len(row) == 1 and row[0]["errors"] == '["key \'a\': boom"]'
    assert stats_from_row(CombineStats, {**row[0], "batch_id": 4}) == stats


def _round(work, groups):
    return Round(work, groups, DrainStats, DrainError)


def test_the_local_engine_sums_the_groups_counters():
    seen: list[tuple[int, tuple[int, ...]]] = []
    lock = threading.Lock()

    def work(group_id: int, buckets: tuple[int, ...]) -> DrainStats:
        with lock:
            seen.append((group_id, buckets))
        return DrainStats(entries=len(buckets), exported=sum(buckets))

    total = LocalEngine().run(_round(work, ((1, 2), (3,), (4, 5))))
    assert (total.entries, total.exported) == (5, 15)
    assert sorted(seen) == [(0, (1, 2)), (1, (3,)), (2, (4, 5))]


def test_a_timeout_fails_the_local_round_with_the_jobs_error_and_starts_no_more_groups():
    started: list[int] = []

    def work(group_id: int, buckets: tuple[int, ...]) -> DrainStats:
        started.append(group_id)
        raise TimedOutError("no tablet server of table q served the scan within 1 s")

    with pytest.raises(DrainError, match=r"no tablet server .* \(--server-wait / server_wait sets the bound\)"):
        LocalEngine(threads=1).run(_round(work, tuple((b,) for b in range(20))))
    assert len(started) < 20


def test_an_interrupted_local_round_lets_the_running_group_finish_and_starts_no_other():
    """Ctrl-C (or the CLI's SIGTERM) reaches the main thread while it waits: the group that runs finishes (a
    bootstrap's range is recorded, a drain's batch deleted), the others never start, the interrupt goes on."""
    ran: list[int] = []
    main = threading.main_thread().ident
    assert main is not None

    def work(group_id: int, _buckets: tuple[int, ...]) -> DrainStats:
        if group_id == 0:
            time.sleep(0.2)  # the main thread has submitted the round and waits
            signal.pthread_kill(main, signal.SIGUSR1)
            time.sleep(0.3)
        ran.append(group_id)
        return DrainStats(entries=1)

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            LocalEngine(threads=1).run(_round(work, ((0,), (1,), (2,))))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert ran == [0]


def test_another_error_fails_the_local_round_as_it_is():
    def work(group_id: int, buckets: tuple[int, ...]) -> DrainStats:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        LocalEngine().run(_round(work, ((1,), (2,))))


# --- the same runner, on real clusters, without Spark ------------------------------------------------------

@pytest.mark.cluster
def test_local_engine_streams_and_batches_the_combine_then_drains_its_exports(accumulo, wc):  # noqa: F811
    """The word count of test_combine_spark, with the combine's stream and batch and the drain all on the
    in-process engine: one runner, whatever the engine."""
    from connector.jobs import CombineJob, DrainJob, run_combine, run_drain, stream_combine
    from tests.test_combine_spark import OBSERVER, produce, verify

    conn_a, conn_b, combine, export, docs = wc
    job = CombineJob(source=accumulo["a"].gateway_options(), combine=combine, observer=OBSERVER,
                     export_queue=export, buckets_per_partition=2)
    stop = threading.Event()
    reports = []
    rounds: list[int] = []
    streamer = threading.Thread(target=lambda: reports.append(
        stream_combine(LocalEngine(), job, 0.2, stop, lambda r: rounds.append(r.rounds))))
    streamer.start()
    updates = produce(accumulo, combine, docs, 600)
    stop.set()
    streamer.join()
    final = run_combine(LocalEngine(), job)
    assert reports[0].totals.updates + final.totals.updates == updates
    assert rounds and rounds == sorted(rounds)  # progress after each round, in order
    assert final.remaining == 0 and final.totals.failed == 0
    index = unique_table("index")
    drained = run_drain(LocalEngine(), DrainJob(source=accumulo["a"].gateway_options(),
                                                dest=accumulo["b"].gateway_options(), queue=export,
                                                dest_table=index, settings=DrainSettings(create_dest_table=True)))
    assert drained.remaining == 0 and drained.exported == drained.totals.deleted
    verify(conn_a, conn_b, combine, export, docs, index)
