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
    return DrainJob(source=accumulo["a"].gateway_options(), dest=accumulo["b"].gateway_options(), queue=queue,
                    dest_table=dest, settings=DrainSettings(**settings))


def _wait_until(condition, seconds: float = 60.0) -> None:
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


def _keys_before_the_queue(conn_a, queue: QueueConfig) -> int:
    """Keys in the files of the table's tablet that ends at the queue's first split point."""
    row = conn_a.table_id(queue.table).encode() + b";" + queue.layout.outer_splits()[0]
    return sum(int(c.value.split(b",")[1]) for c in conn_a.scan(METADATA_TABLE, Range.exact_row(row),
                                                                   columns=[FILE_FAMILY]))


def test_a_drain_finds_a_late_entry_behind_many_delete_markers_then_compacts_them_away(accumulo, conn_a, conn_b):
    queue, dest = _drained_queue(accumulo, conn_a)
    # a row of the user's beside the queue (before its tablets), put and deleted: a marker in its tablet's file
    conn_a.write(queue.table, [Mutation("a-user-row").put("f", "q", b"x")])
    conn_a.write(queue.table, [Mutation("a-user-row").delete("f", "q")])
    conn_a.flush_table(queue.table, wait=True)
    user_keys = _keys_before_the_queue(conn_a, queue)
    assert user_keys >= 1
    before = queue_files(conn_a, queue)
    assert before.keys >= DRAINED  # one delete marker per drained entry, in the files now
    # a late entry: an older seq than every drained one, its row after all of theirs in the bucket
    with ExportQueue(conn_a, queue) as q:
        q.add("z-late", _cell("late"), 7)
    report = run_drain(LocalEngine(), _job(accumulo, queue, dest, compact_dead_keys=1000))
    assert report.totals.exported == 1 and report.remaining == 0
    [late] = list(conn_b.scan(dest, Range.exact_row("late")))
    assert late.ts == 7
    # the drain emptied the queue, found the markers due and asked for a compaction: they go
    assert _wait_for_few_keys(conn_a, queue, most=10) <= 10
    # the table's other tablets were not in the compaction's range: the user's marker is still in its file
    assert _keys_before_the_queue(conn_a, queue) == user_keys


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
    assert _wait_for_few_keys(conn_a, queue, most=10) <= 10
    # at most one request per interval, whatever is found or deleted meanwhile
    assert not planner.compactor.check(conn_a, 0) and not planner.compactor.deleted(conn_a, 10 * DRAINED)


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
    assert [r.message for r in caplog.records if "may not compact" in r.message]


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_compact_dead_keys_takes_a_whole_number_from_zero(value):
    with pytest.raises(ValueError, match="compact_dead_keys"):
        DrainSettings(compact_dead_keys=value)
