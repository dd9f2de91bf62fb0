"""The delete markers a drain leaves in the queue's tablets, and the compaction that drops them (issue: flat
latency; ``connector.queue.compaction``). On the real clusters."""

from __future__ import annotations

import threading
import time

import pytest

from connector.accumulo import AccumuloSecurityError, Mutation, Range
from connector.jobs import DrainJob, LocalEngine, run_drain, stream_drain
from connector.queue import DrainSettings, ExportQueue, QueueConfig
from connector.queue.compaction import FILE_FAMILY, METADATA_TABLE, QueueCompactor, queue_files
from connector.queue.planner import StreamPlanner

from .conftest import unique_table

DRAINED = 3000


def _cell(row: str) -> dict:
    return {"new": [{"row": row, "cf": "f", "cq": "q", "value": "v"}]}


def _drained_queue(accumulo, conn_a, buckets: int = 1) -> tuple[QueueConfig, str]:
    """A queue whose ``DRAINED`` entries were drained (to a fresh table on B) with compaction off, and whose
    tablets were flushed: their files hold the delete markers."""
    queue = QueueConfig(table=unique_table("cq"), qid="cq", num_buckets=buckets)
    dest = unique_table("dest")
    with ExportQueue(conn_a, queue) as q:
        q.init()
        for i in range(DRAINED):
            q.add(f"k{i:05d}", _cell(f"r{i:05d}"), 1000 + i)
    report = run_drain(LocalEngine(), _job(accumulo, queue, dest, compact_dead_keys=0))
    assert report.totals.deleted == DRAINED
    conn_a.flush_table(queue.table, wait=True)
    return queue, dest


def _job(accumulo, queue: QueueConfig, dest: str, **settings) -> DrainJob:
    settings.setdefault("create_dest_table", True)
    return DrainJob(source=accumulo["a"].gateway_options(), dest=accumulo["b"].gateway_options(), queue=queue,
                    dest_table=dest, settings=DrainSettings(**settings))


def _wait_until(condition, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _flushed_keys(conn_a, queue: QueueConfig) -> int:
    conn_a.flush_table(queue.table, wait=True)
    return queue_files(conn_a, queue).keys


def _wait_for_few_keys(conn_a, queue: QueueConfig, most: int, seconds: float = 60.0) -> int:
    deadline = time.monotonic() + seconds
    while (keys := queue_files(conn_a, queue).keys) > most and time.monotonic() < deadline:
        time.sleep(0.5)
    return keys


def _user_tablet_keys(conn_a, queue: QueueConfig) -> tuple[int, int]:
    """Keys in the files of the table's two tablets around the queue's: the one ending at its first split
    point and the one after its last (the table's last tablet)."""
    table_id = conn_a.table_id(queue.table).encode()
    before = Range.exact_row(table_id + b";" + queue.layout.outer_splits()[0])
    after = Range.exact_row(table_id + b"<")
    return tuple(sum(int(c.value.split(b",")[1]) for c in conn_a.scan(METADATA_TABLE, rng, columns=[FILE_FAMILY]))
                 for rng in (before, after))  # type: ignore[return-value]


def test_a_drain_finds_a_late_entry_behind_many_delete_markers_then_compacts_them_away(accumulo, conn_a, conn_b):
    queue, dest = _drained_queue(accumulo, conn_a)
    # the user's rows on both sides of the queue, put and deleted: markers in their tablets' files
    for rows in ([f"a-user-{i:02d}" for i in range(50)], [f"zz-user-{i:02d}" for i in range(50)]):
        conn_a.write(queue.table, [Mutation(r).put("f", "q", b"x") for r in rows])
        conn_a.write(queue.table, [Mutation(r).delete("f", "q") for r in rows])
    conn_a.flush_table(queue.table, wait=True)
    user_keys = _user_tablet_keys(conn_a, queue)
    assert min(user_keys) >= 50
    before = queue_files(conn_a, queue)
    assert DRAINED <= before.keys < DRAINED + 50  # one marker per drained entry; none of the user's keys
    # a late entry: an older seq than every drained one, its row after all of theirs in the bucket
    with ExportQueue(conn_a, queue) as q:
        q.add("z-late", _cell("late"), 7)
    report = run_drain(LocalEngine(), _job(accumulo, queue, dest, compact_dead_keys=1000))
    assert report.totals.exported == 1 and report.remaining == 0
    [late] = list(conn_b.scan(dest, Range.exact_row("late")))
    assert late.ts == 7
    # the drain emptied the queue, found the markers due and asked for a compaction: they go
    assert _wait_for_few_keys(conn_a, queue, most=10) <= 10
    # the table's other tablets were not in the compaction's range: the user's markers are still in their files
    assert _user_tablet_keys(conn_a, queue) == user_keys


def _markers(conn_a, queue: QueueConfig, n: int, start: int = 0) -> None:
    """``n`` delete markers in bucket 0's range, flushed to a file (as drained entries leave them)."""
    rows = [queue.layout.bucket_prefix(0) + f"k{i:06d}".encode() for i in range(start, start + n)]
    conn_a.write(queue.table, [Mutation(r).put("e", "v", b"x") for r in rows])
    conn_a.write(queue.table, [Mutation(r).delete("e", "v") for r in rows])
    conn_a.flush_table(queue.table, wait=True)


def test_rows_that_are_not_entries_cost_one_compaction_at_most(accumulo, conn_a):
    queue = QueueConfig(table=unique_table("cq"), qid="cq", num_buckets=2)
    ExportQueue(conn_a, queue).init()
    conn_a.write(queue.table, [Mutation(queue.layout.dead_letter_row(f"x{i:05d}".encode())).put("d", "reason", b"r")
                               for i in range(2000)])  # dead letters: live keys, but no entries
    _markers(conn_a, queue, 1500)
    compactor = QueueCompactor(queue, 1000, min_interval=0)
    assert compactor.check(conn_a, 0)  # 3500 keys for no entry: all look dead
    _wait_until(lambda: queue_files(conn_a, queue).keys < 2500)  # the markers went, the dead letters stayed
    for _ in range(3):  # they are not counted again: only growth over them is
        assert not compactor.check(conn_a, 0)
    assert compactor.requested == 1 and queue_files(conn_a, queue).keys >= 2000
    _markers(conn_a, queue, 1500, start=1500)
    assert compactor.check(conn_a, 0) and compactor.requested == 2


def test_a_stream_planner_compacts_at_its_sweep_only_past_the_threshold(accumulo, conn_a):
    queue, _ = _drained_queue(accumulo, conn_a, buckets=4)
    keys = queue_files(conn_a, queue).keys
    shy = StreamPlanner(accumulo["a"].gateway_options().shared, queue, sweep_seconds=60,
                        compact_dead_keys=10 * DRAINED)
    shy.pending({})
    shy._sweeper.join(30)
    assert shy.compactor.requested == 0 and queue_files(conn_a, queue).keys == keys
    planner = StreamPlanner(accumulo["a"].gateway_options().shared, queue, sweep_seconds=60,
                            compact_dead_keys=DRAINED // 2)
    planner.pending({})
    planner._sweeper.join(30)
    assert planner.compactor.requested == 1
    # at most one request per interval, whatever is found or deleted meanwhile
    assert not planner.compactor.check(conn_a, 0) and not planner.compactor.deleted(conn_a, 10 * DRAINED)
    assert _wait_for_few_keys(conn_a, queue, most=10) <= 10


def test_a_stream_compacts_after_deleting_enough_and_still_finds_a_late_entry(accumulo, conn_a, conn_b):
    queue = QueueConfig(table=unique_table("cq"), qid="cq", num_buckets=1)
    dest = unique_table("dest")
    conn_b.create_table(dest)
    with ExportQueue(conn_a, queue) as q:
        q.init()
        for i in range(DRAINED):
            q.add(f"k{i:05d}", _cell(f"r{i:05d}"), 1000 + i)
    stop = threading.Event()
    streaming = threading.Thread(target=stream_drain, args=(LocalEngine(), _job(
        accumulo, queue, dest, compact_dead_keys=1000, trigger_seconds=0.2)), kwargs={"stop": stop})
    streaming.start()
    try:
        _wait_until(lambda: len(list(conn_b.scan(dest))) == DRAINED)
        # the stream deleted 3000 entries (their markers in memory: no file shows them) and asked for a
        # compaction, which flushed them first and dropped them: a flush now writes next to nothing
        _wait_until(lambda: _flushed_keys(conn_a, queue) <= 10)
        with ExportQueue(conn_a, queue) as q:
            q.add("z-late", _cell("late"), 7)  # older than every drained seq, its row after all of theirs
        _wait_until(lambda: any(c.ts == 7 for c in conn_b.scan(dest, Range.exact_row("late"))))
    finally:
        stop.set()
        streaming.join(60)


def test_compaction_off_leaves_the_markers(accumulo, conn_a):
    queue, _ = _drained_queue(accumulo, conn_a)
    compactor = QueueCompactor(queue, 0)
    assert not compactor.check(conn_a, 0) and not compactor.deleted(conn_a, 10 * DRAINED)
    assert queue_files(conn_a, queue).keys >= DRAINED


class _Refusing:
    """A connection whose user may not read accumulo.metadata (a pure-logic stand-in)."""

    calls = 0

    def table_id(self, table: str) -> str:
        self.calls += 1
        raise AccumuloSecurityError("permission denied")


def test_a_refused_check_warns_once_and_never_fails_the_drain(caplog):
    compactor = QueueCompactor(QueueConfig(table="t", qid="q", num_buckets=2), 10, min_interval=0)
    conn = _Refusing()
    with caplog.at_level("WARNING"):
        assert not compactor.check(conn, 0)  # type: ignore[arg-type]
        assert not compactor.check(conn, 0)  # type: ignore[arg-type]
    assert conn.calls == 1 and compactor.requested == 0
    assert [r.message for r in caplog.records if "may not read accumulo.metadata" in r.message]


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_compact_dead_keys_takes_a_whole_number_from_zero(value):
    with pytest.raises(ValueError, match="compact_dead_keys"):
        DrainSettings(compact_dead_keys=value)


def test_any_error_of_a_check_is_logged_not_raised(caplog):
    class Broken:
        def table_id(self, table: str) -> str:
            raise ValueError("an unexpected metadata value")

    compactor = QueueCompactor(QueueConfig(table="t", qid="q", num_buckets=2), 10, min_interval=0)
    with caplog.at_level("WARNING"):
        assert not compactor.check(Broken(), 0)  # type: ignore[arg-type]
    assert any("ValueError: an unexpected metadata value" in r.message for r in caplog.records)
