"""Bucket marks and the streaming drain that plans from them (issue 9), on the real clusters."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from connector.accumulo import Mutation, Range
from connector.queue import ExportQueue, QueueConfig, queue_status
from connector.queue.marks import read_marks, settle_marks
from examples.inverted_count_index import actual_index

from .conftest import ROOT, drain_args, unique_table

pytestmark = pytest.mark.spark


def test_producer_marks_after_flush_and_settling_never_loses_a_newer_mark(conn_a):
    config = QueueConfig(table=unique_table("marks"), qid="m", num_buckets=7)
    with ExportQueue(conn_a, config) as q:
        q.init()
        q.add("k1", 1, 1)
        assert read_marks(conn_a, config) == {}  # not durable yet: no mark
        q.flush()
        first = read_marks(conn_a, config)
        bucket = config.layout.bucket_of(b'"k1"')
        assert list(first) == [bucket]
        q.add("k1", 2, 2)  # a second mark of the same bucket gets a new token, even within one millisecond
        q.flush()
        second = read_marks(conn_a, config)
    assert second[bucket] != first[bucket]
    assert queue_status(conn_a, config).marked == (bucket,)
    # a drain planned with the first token: the producer marked again meanwhile, so the mark stays
    assert settle_marks(conn_a, config, first) == {bucket: "kept"}
    # planned with the current token while entries are left: renewed (planned again), not cleared
    assert settle_marks(conn_a, config, second) == {bucket: "renewed"}
    renewed = read_marks(conn_a, config)[bucket]
    conn_a.write(config.table, [Mutation(r).delete("e", "v") for r in
                                (config.layout.entry_row(b'"k1"', 1), config.layout.entry_row(b'"k1"', 2))])
    assert settle_marks(conn_a, config, {bucket: renewed}) == {bucket: "cleared"}
    assert read_marks(conn_a, config) == {}


def test_stream_finds_marked_entries_fast_and_unmarked_ones_by_the_sweep(spark, scenario, tmp_path):
    job = scenario.job()
    reader = (spark.readStream.format("export-queue").options(**job.source_options())
              .option("sweep_seconds", "8").load())
    query = (reader.writeStream.format("accumulo-export").options(**job.export_options(str(tmp_path / "r")))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="0.5 seconds").start())
    try:
        time.sleep(12)  # past the first sweep of an empty queue
        scenario.produce(200, seed=61)  # the producers mark their buckets when they flush
        deadline = time.monotonic() + 60
        while scenario.depth() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert scenario.depth() == 0
        deadline = time.monotonic() + 10  # the next trigger settles the drained buckets' marks
        while read_marks(scenario.conn_a, scenario.queue) and time.monotonic() < deadline:
            time.sleep(0.5)
        # a row in the queue layout written by another program: no mark, found by the sweep
        row = scenario.queue.layout.entry_row(b'"unmarked"', 5)
        with scenario.conn_a.batch_writer(scenario.queue.table) as w:
            w.add_mutation(Mutation(row).put("e", "v", b'{"new": [{"row": "unmarked", "cf": "c", "cq": "", '
                                                       b'"value": "1"}]}'))
        assert read_marks(scenario.conn_a, scenario.queue) == {}
        deadline = time.monotonic() + 40  # sweep interval 8 s, plus a micro-batch
        while scenario.depth() and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.5)
        assert scenario.depth() == 0
    finally:
        query.stop()
    with scenario.conn_b.batch_writer(scenario.index) as w:  # the stray row is not part of the oracle
        w.add_mutation(Mutation("unmarked").delete("c", ""))
    scenario.verify()
    assert queue_status(scenario.conn_a, scenario.queue).marked == ()


@contextlib.contextmanager
def _producing(scenario, seed: int, per_round: int) -> Iterator[None]:
    """Producers add ``per_round`` transactions after another while the block runs."""
    stop = threading.Event()

    def produce() -> None:
        n = seed
        while not stop.is_set():
            scenario.produce(per_round, producers=1, seed=n)
            n += 1

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        yield
    finally:
        stop.set()
        producer.join()


@pytest.mark.slow  # 69 s in a fresh `make test`
def test_stream_killed_and_restarted_from_its_checkpoint_while_producers_add(scenario, cli_env, tmp_path):
    checkpoint = str(tmp_path / "ckpt")
    rng = random.Random(5)
    with _producing(scenario, seed=71, per_round=200):
        for _ in range(2):
            proc = subprocess.Popen([sys.executable, "-m", "connector.cli", *drain_args(scenario), "--stream",
                                     "--trigger-seconds", "0.5", "--checkpoint", checkpoint], env=cli_env, cwd=ROOT,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            _wait_until_b_changes(scenario, proc, 180)  # Spark started and exported in this run
            time.sleep(rng.uniform(1, 5))
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # a last run from the same checkpoint drains what is left
    proc = subprocess.Popen([sys.executable, "-m", "connector.cli", *drain_args(scenario), "--stream",
                             "--trigger-seconds", "0.5", "--checkpoint", checkpoint], env=cli_env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # a restart from the checkpoint is slow on a loaded 2-core machine
        while scenario.depth() and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(2)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    scenario.verify()


def _wait_until_b_changes(scenario, proc: subprocess.Popen, seconds: float) -> None:
    """Wait until B's index holds other cells than now (the stream exported something; the drain creates the
    table)."""
    def cells() -> set:
        if not scenario.conn_b.table_exists(scenario.index):
            return set()
        return set(actual_index(scenario.conn_b, scenario.index))

    before = cells()
    deadline = time.monotonic() + seconds
    while cells() == before:
        assert proc.poll() is None, f"the stream ended (rc {proc.returncode}) before it exported anything"
        assert time.monotonic() < deadline, f"the stream exported nothing within {seconds} s"
        time.sleep(0.5)


def _local_stream(scenario, cli_env, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "connector.cli", *drain_args(scenario), "--stream", "--engine",
                             "local", "--trigger-seconds", "0.2", *extra], env=cli_env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_until_drained(scenario, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while scenario.depth() and time.monotonic() < deadline:
        time.sleep(0.3)
    assert scenario.depth() == 0


def test_local_stream_killed_and_restarted_drains_marked_and_unmarked_entries(scenario, cli_env):
    with _producing(scenario, seed=81, per_round=150):
        proc = _local_stream(scenario, cli_env)
        time.sleep(8)
        os.killpg(proc.pid, signal.SIGKILL)  # mid-micro-batch, most likely: producers keep it busy
        proc.wait()
    # the in-process stream has no checkpoint: a new one resumes from the marks and its first sweep
    proc = _local_stream(scenario, cli_env, "--sweep-seconds", "3")
    try:
        _wait_until_drained(scenario, 120)
        # a row in the queue layout written by another program: no mark, found by the next sweep
        row = scenario.queue.layout.entry_row(b'"unmarked"', 5)
        with scenario.conn_a.batch_writer(scenario.queue.table) as w:
            w.add_mutation(Mutation(row).put("e", "v", b'{"new": [{"row": "unmarked", "cf": "c", "cq": "", '
                                                       b'"value": "1"}]}'))
        assert read_marks(scenario.conn_a, scenario.queue) == {}
        _wait_until_drained(scenario, 30)
        assert len(list(scenario.conn_b.scan(scenario.index, Range.rows("unmarked", "unmarked")))) == 1
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "in this process" in err and "Traceback" not in err
    assert json.loads(out.strip().splitlines()[-1])["exported"] > 0
    with scenario.conn_b.batch_writer(scenario.index) as w:  # the stray row is not part of the oracle
        w.add_mutation(Mutation("unmarked").delete("c", ""))
    scenario.verify()
    assert queue_status(scenario.conn_a, scenario.queue).marked == ()


def test_a_byte_read_limit_drains_a_backlog_in_bounded_micro_batches(spark, scenario, tmp_path):
    scenario.produce(600, seed=91)  # a backlog before the stream starts
    status = queue_status(scenario.conn_a, scenario.queue)
    largest = max(b.bytes for b in status.buckets)
    limit = max(2000, status.bytes // 8)
    job = scenario.job()
    query = (spark.readStream.format("export-queue").options(**job.source_options())
             .option("max_bytes_per_trigger", str(limit)).load()
             .writeStream.format("accumulo-export").options(**job.export_options(str(tmp_path / "r")))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="0.2 seconds").start())
    try:
        deadline = time.monotonic() + 180
        while scenario.depth() and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.5)
        assert scenario.depth() == 0
        batches = [p for p in query.recentProgress if p.numInputRows]
    finally:
        query.stop()
    scenario.verify()
    # each micro-batch read about its byte share per bucket (at least one entry each), never the whole backlog
    assert len(batches) >= 4, [p.numInputRows for p in batches]
    assert max(p.numInputRows for p in batches) < status.entries
    assert largest > limit // status.num_buckets  # the limit did cut inside buckets


def test_the_drain_source_refuses_a_batch_read(spark, scenario):
    scenario.produce(20, seed=111)
    with pytest.raises(Exception, match="export-queue-drain is a streaming source"):
        spark.read.format("export-queue-drain").options(**scenario.job().sink_options("")).load().collect()
    assert scenario.depth() > 0  # nothing was drained
