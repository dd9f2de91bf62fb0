"""The combine queue on a real Accumulo: exactly-once combines, outbox relay, races, crashes, errors."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.accumulo import Range
from connector.combine import (
    CombineConfig,
    CombineConfigError,
    CombineLayout,
    CombineProcessor,
    CombineQueue,
    combine_all,
    combine_buckets,
    combine_status,
)
from connector.combine.layout import OUTBOX_FAMILY, UPDATE_FAMILY
from connector.export import AccumuloExporter
from connector.queue import ExportQueue, QueueConfig, QueueLayout, drain_queue, queue_status
from examples.inverted_count_index import actual_index
from tests.conftest import run_in_threads, unique_table

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.cluster


# --- helpers ------------------------------------------------------------------------------------------------

def index_observer(changes):
    """word count -> inverted index count -> word (the ``difference`` translator's format)."""
    from examples.inverted_count_index import count_update

    return [(c, c.key, count_update(c.key, c.old, c.new)) for c in changes]


def failing_combiner(key, current, deltas):
    if key == "bad":
        raise RuntimeError("refusing to combine this key")
    return (current or 0) + sum(deltas) or None


class Setup:
    """A combine queue and an export queue on A (one table each), an index table on B."""

    def __init__(self, accumulo, buckets: int = 7) -> None:
        self.conn_a = accumulo["a"].connect()
        self.conn_b = accumulo["b"].connect()
        self.combine = CombineConfig(table=unique_table("cq"), cid="wc", num_buckets=buckets)
        self.export = QueueConfig(table=unique_table("eq"), qid="idx", num_buckets=5)
        self.index = unique_table("index")
        CombineQueue(self.conn_a, self.combine).init()
        ExportQueue(self.conn_a, self.export).init()

    def processor(self, conn=None, **kw) -> CombineProcessor:
        return CombineProcessor(conn or self.conn_a, self.combine, kw.pop("combiner", "sum"),
                                kw.pop("observer", index_observer), self.export, **kw)

    def values(self) -> dict:
        return CombineQueue(self.conn_a, self.combine).items()

    def leftover_cells(self) -> list:
        return [c for c in self.conn_a.scan(self.combine.table, self.combine.layout.queue_range(),
                                            columns=[OUTBOX_FAMILY, UPDATE_FAMILY])]

    def drain(self) -> None:
        drain_queue(self.conn_a, self.export, AccumuloExporter(self.conn_b, self.index, "difference").ensure_table())

    def check(self, oracle: Counter) -> None:
        expected = {k: v for k, v in oracle.items() if v}
        assert self.values() == expected
        assert self.leftover_cells() == [], "queued updates or outbox cells left"
        self.drain()
        index = actual_index(self.conn_b, self.index)
        assert sorted(index) == sorted((f"{v:08d}".encode(), k.encode()) for k, v in expected.items())
        assert queue_status(self.conn_a, self.export).empty

    def close(self) -> None:
        self.conn_a.close()
        self.conn_b.close()


@pytest.fixture
def setup(accumulo):
    s = Setup(accumulo)
    s.conn_b.create_table(s.index, exist_ok=True)
    yield s
    s.close()


def zipf_words(rng: random.Random, n: int, vocabulary: int) -> list[str]:
    weights = [1 / (i + 1) for i in range(vocabulary)]
    return rng.choices([f"w{i:04d}" for i in range(vocabulary)], weights, k=n)


# --- layout (no cluster needed, but cheap) --------------------------------------------------------------------

def test_layout_shares_the_export_queues_buckets_and_splits():
    layout = CombineLayout("wc", 13)
    queue = QueueLayout("wc", 13)
    assert layout.key_row(b'"k1"') == queue.bucket_prefix(queue.bucket_of(b'"k1"')) + b'"k1"'
    assert layout.key_row(b"k1").startswith(b"wc:b:")  # "k1" is bucket 11 of 13
    assert layout.key_of(layout.key_row(b"any key")) == b"any key"
    assert layout.split_points(4) == queue.split_points(4)
    with pytest.raises(ValueError, match="not a key row"):
        layout.key_of(b"other:1:x")


# --- basics ---------------------------------------------------------------------------------------------------

def test_combine_sums_relays_and_leaves_nothing(setup):
    oracle: Counter = Counter()
    with CombineQueue(setup.conn_a, setup.combine) as q:
        for word, delta in [("a", 1), ("b", 2), ("a", 3), ("c", 1), ("c", -1), ("a", 1)] * 3:
            q.update(word, delta)
            oracle[word] += delta
    st_before = combine_status(setup.conn_a, setup.combine)
    assert st_before.updates == 18 and st_before.keys == 3
    stats = setup.processor().process_buckets(range(setup.combine.num_buckets))
    assert stats.updates == 18 and stats.keys == 3 and stats.failed == 0
    assert stats.changed == 2 and stats.exports == 2  # "c" sums to 0: never created, nothing exported
    q = CombineQueue(setup.conn_a, setup.combine)
    assert q.get("a") == 15 and q.get("b") == 6 and q.get("c") is None
    assert q.get_many(["a", "b", "c"]) == {"a": 15, "b": 6}
    assert queue_status(setup.conn_a, setup.export).entries == 2
    setup.check(oracle)

    # a second round: a deleted key (sum back to 0), a changed key, a new key
    with CombineQueue(setup.conn_a, setup.combine) as q:
        q.update_all([("a", -15), ("b", 1), ("d", 4)])
    oracle.update({"a": -15, "b": 1, "d": 4})
    stats = combine_all(setup.conn_a, setup.combine, "sum", index_observer, setup.export)
    assert stats.deleted == 1 and stats.changed == 3
    setup.check(oracle)


def test_init_refuses_a_different_configuration_or_an_export_queue_id(setup):
    other = CombineConfig(table=setup.combine.table, cid="wc", num_buckets=setup.combine.num_buckets + 1)
    with pytest.raises(CombineConfigError, match="initialised with buckets"):
        CombineQueue(setup.conn_a, other).init()
    clash = CombineConfig(table=setup.export.table, cid=setup.export.qid, num_buckets=3)
    with pytest.raises(CombineConfigError, match="export queue's id"):
        CombineQueue(setup.conn_a, clash).init()


def test_a_replayed_update_after_its_combine_is_not_counted_again(setup):
    q = CombineQueue(setup.conn_a, setup.combine)
    m = q.mutation("a", 5)
    setup.conn_a.write(setup.combine.table, [m])
    combine_all(setup.conn_a, setup.combine, "sum", index_observer, setup.export)
    setup.conn_a.write(setup.combine.table, [m])  # the writer's replay after a dropped connection: same cell
    assert combine_status(setup.conn_a, setup.combine).updates == 0
    combine_all(setup.conn_a, setup.combine, "sum", index_observer, setup.export)
    setup.check(Counter({"a": 5}))


def test_same_millisecond_updates_of_one_key_are_distinct(setup):
    q = CombineQueue(setup.conn_a, setup.combine)
    mutations = [q.mutation("hot", 1) for _ in range(200)]  # most share a millisecond timestamp
    assert len({m.updates[0].timestamp for m in mutations}) < 200
    setup.conn_a.write(setup.combine.table, mutations)
    combine_all(setup.conn_a, setup.combine, "sum", index_observer, setup.export)
    setup.check(Counter({"hot": 200}))


def test_combiner_error_keeps_that_keys_updates_and_names_it(setup):
    with CombineQueue(setup.conn_a, setup.combine) as q:
        q.update_all([("good", 1), ("bad", 2), ("other", 3), ("bad", 1), ("good", 1)])
    stats = setup.processor(combiner=failing_combiner).process_buckets(range(setup.combine.num_buckets))
    assert stats.failed == 1
    assert stats.errors == ["key 'bad': RuntimeError: refusing to combine this key"]
    assert stats.updates == 3
    values = setup.values()
    assert values == {"good": 2, "other": 3}
    st = combine_status(setup.conn_a, setup.combine)
    assert st.updates == 2 and st.keys == 1  # bad's two updates, still queued
    # once the combiner is fixed, the same updates are combined (once)
    combine_all(setup.conn_a, setup.combine, "sum", index_observer, setup.export)
    setup.check(Counter({"good": 2, "other": 3, "bad": 3}))


def test_observer_error_keeps_only_that_keys_updates(setup):
    def observer(changes):
        for c in changes:
            if c.key == "bad":
                raise ValueError("no export for bad")
        return index_observer(changes)

    with CombineQueue(setup.conn_a, setup.combine) as q:
        q.update_all([("good", 1), ("bad", 2)])
    stats = setup.processor(observer=observer).process_buckets(range(setup.combine.num_buckets))
    assert stats.failed == 1 and "'bad'" in stats.errors[0] and "no export for bad" in stats.errors[0]
    assert setup.values() == {"good": 1}
    assert combine_status(setup.conn_a, setup.combine).updates == 1


def test_a_hot_key_with_more_updates_than_one_mutation_takes(setup, monkeypatch):
    import connector.combine.processor as processor

    monkeypatch.setattr(processor, "MAX_UPDATES_PER_COMBINE", 50)
    with CombineQueue(setup.conn_a, setup.combine) as q:
        q.update_all([("hot", 1)] * 420 + [("cold", 2)])
    stats = setup.processor().process_buckets(range(setup.combine.num_buckets))
    assert stats.updates == 421 and stats.conflicts == 0
    setup.check(Counter({"hot": 420, "cold": 2}))


# --- races and crashes ----------------------------------------------------------------------------------------

def test_concurrent_producers_and_racing_passes(setup, accumulo):
    oracle: Counter = Counter()
    lock = threading.Lock()
    producing = threading.Event()
    producing.set()
    passes = Counter()

    def producer(n: int) -> None:
        rng = random.Random(n)
        local: Counter = Counter()
        with accumulo["a"].connect() as conn, CombineQueue(conn, setup.combine) as q:
            for i, word in enumerate(zipf_words(rng, 1500, 60)):
                delta = rng.choice([1, 1, 2, -1])
                q.update(word, delta)
                local[word] += delta
                if i % 100 == 0:
                    q.flush()
        with lock:
            oracle.update(local)

    def combiner(n: int) -> None:
        # both passes take every bucket, the same order: they race on the same rows
        with accumulo["a"].connect() as conn:
            processor = setup.processor(conn, rows_per_batch=20)
            while producing.is_set():
                stats = processor.process_buckets(range(setup.combine.num_buckets))
                with lock:
                    passes["conflicts"] += stats.conflicts
                    passes["updates"] += stats.updates

    combiners = [threading.Thread(target=combiner, args=(n,)) for n in range(2)]
    for t in combiners:
        t.start()
    errors = run_in_threads(producer, 3)
    producing.clear()
    for t in combiners:
        t.join()
    assert not errors, errors
    final = combine_all(setup.conn_a, setup.combine, "sum", index_observer, setup.export)
    assert passes["updates"] + final.updates == 4500
    # whether these two passes happened to collide depends on timing: the next test forces a collision
    setup.check(oracle)


def test_a_pass_that_loses_the_race_for_a_row_re_reads_it_and_counts_each_update_once(setup, accumulo):
    with CombineQueue(setup.conn_a, setup.combine) as q:
        q.update_all([("w", 1), ("w", 2)])
    slow = setup.processor()
    write = slow._write
    raced: list[bool] = []

    def write_after_another_pass(mutations):  # the other pass wins the row between our read and our write
        if not raced:
            raced.append(True)
            with accumulo["a"].connect() as conn:
                with CombineQueue(conn, setup.combine) as q:
                    q.update("w", 4)
                other = setup.processor(conn).process_buckets(range(setup.combine.num_buckets))
            assert other.updates == 3 and other.conflicts == 0
        return write(mutations)

    slow._write = write_after_another_pass
    stats = slow.process_buckets(range(setup.combine.num_buckets))
    assert raced and stats.conflicts >= 1  # its condition on the version failed, so it re-read the row
    assert stats.updates == 0  # every update it had read was consumed by the other pass
    setup.check(Counter({"w": 7}))


CRASHER = r"""
import os, random, signal, sys
sys.path.insert(0, {root!r})
from connector.accumulo import BatchWriter, ConditionalWriter
from connector.combine import CombineConfig, CombineProcessor
from connector.queue import QueueConfig
from connector.spark import GatewayOptions
from tests.test_combine import index_observer

rng = random.Random({seed})
def crashing(original):
    def wrapped(self, *a, **kw):
        if rng.random() < 0.08:
            os.kill(os.getpid(), signal.SIGKILL)  # before the call
        out = original(self, *a, **kw)
        if rng.random() < 0.08:
            os.kill(os.getpid(), signal.SIGKILL)  # after it returned (e.g. combined but not relayed)
        return out
    return wrapped
ConditionalWriter.write_all = crashing(ConditionalWriter.write_all)
BatchWriter.flush = crashing(BatchWriter.flush)

conn = GatewayOptions({host!r}, {port}, secret_file={secret!r}).connect()
combine = CombineConfig(table={ctable!r}, cid="wc", num_buckets={buckets})
export = QueueConfig(table={etable!r}, qid="idx", num_buckets=5)
p = CombineProcessor(conn, combine, "sum", index_observer, export, rows_per_batch=7)
for _ in range(20):
    p.process_buckets(range({buckets}))
"""


def test_sigkilled_passes_rerun_converge(setup, accumulo):
    rng = random.Random(7)
    oracle: Counter = Counter()
    gw = accumulo["a"].gateway_options()
    killed = 0
    outbox_left = 0  # outbox cells a killed pass left behind: proves a kill hit the combine-to-relay window
    for round_ in range(6):
        with CombineQueue(setup.conn_a, setup.combine) as q:
            for word in zipf_words(rng, 400, 80):
                q.update(word, 1)
                oracle[word] += 1
        script = CRASHER.format(root=str(ROOT), seed=round_, host=gw.host, port=gw.port, secret=gw.secret_file,
                                ctable=setup.combine.table, etable=setup.export.table,
                                buckets=setup.combine.num_buckets)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300)
        if proc.returncode == -signal.SIGKILL:
            killed += 1
            outbox_left += combine_status(setup.conn_a, setup.combine).outbox
        else:
            assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert killed >= 3, f"only {killed} of 6 runs were killed"
    assert outbox_left > 0, "no kill fell between a combine and its relay"
    combine_all(setup.conn_a, setup.combine, "sum", index_observer, setup.export)
    setup.check(oracle)


# --- any interleaving converges ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shared_setup(accumulo):
    s = Setup(accumulo, buckets=3)
    s.conn_b.create_table(s.index, exist_ok=True)
    yield s
    s.close()


operation = st.one_of(
    st.tuples(st.just("update"), st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(-3, 5)),
    st.tuples(st.just("pass"), st.sets(st.integers(0, 2), min_size=1), st.integers(1, 4)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(operation, max_size=25))
def test_any_interleaving_converges_to_the_sum(shared_setup, ops):
    s = shared_setup
    before = s.values()
    expected = Counter(before)
    q = CombineQueue(s.conn_a, s.combine)
    for op in ops:
        if op[0] == "update":
            _, key, delta = op
            q.update(key, delta)
            q.flush()
            expected[key] += delta
        else:
            _, buckets, rows = op
            combine_buckets(s.conn_a, s.combine, sorted(buckets), "sum", index_observer, s.export,
                            rows_per_batch=rows)
    q.close()
    combine_all(s.conn_a, s.combine, "sum", index_observer, s.export)
    s.check(expected)


def test_status_counts_queued_updates_per_bucket(setup):
    with CombineQueue(setup.conn_a, setup.combine) as q:
        q.update_all([(f"k{i}", 1) for i in range(30)] + [("k1", 1)])
    st_ = combine_status(setup.conn_a, setup.combine)
    assert st_.updates == 31 and st_.keys == 30 and st_.outbox == 0
    layout = setup.combine.layout
    expected = Counter(layout.bucket_of(f'"k{i}"'.encode()) for i in range(30))
    assert {b.bucket: b.keys for b in st_.buckets} == dict(expected)
    rows = list(setup.conn_a.scan(setup.combine.table, Range.prefix(b"wc:")))
    assert all(c.cf == UPDATE_FAMILY for c in rows)


def test_every_reader_of_a_stored_combine_configuration_gets_all_of_it(setup):
    """``resolve_combine_config`` (the CLI, ``combine run``) and the combine snapshot (bootstrap, verify) make the
    configuration from what ``init`` stored in one way: buckets per tablet included (the snapshot once dropped
    them), the serializers' default where an old stored configuration has none."""
    from connector.combine.config import read_combine_config, resolve_combine_config
    from connector.snapshot.functions import snapshot_source

    config = CombineConfig(table=unique_table("cq"), cid="bpt", num_buckets=9, buckets_per_tablet=2,
                           value_serializer="bytes")
    CombineQueue(setup.conn_a, config).init()
    assert read_combine_config(setup.conn_a, config.table, "bpt") == config.stored_fields()
    assert resolve_combine_config(setup.conn_a, config.table, "bpt") == config
    assert snapshot_source(setup.conn_a, config.table, "combine=bpt").snapshot.config == config
    old = {"num_buckets": 4}  # stored before the other fields were
    assert CombineConfig.from_stored("t", "c", old) == CombineConfig(table="t", cid="c", num_buckets=4)
    assert QueueConfig.from_stored("t", "q", old) == QueueConfig(table="t", qid="q", num_buckets=4)


@pytest.mark.parametrize("awkward", [[], ['é "q"']], ids=["plain keys", "a key with an escape"])
def test_a_combine_tables_bootstrap_builds_what_draining_its_exports_built(setup, accumulo, awkward):
    """Issue 37 item 2: ``--snapshot combine=wc`` (the ``changes`` observer in its batch form, no Python per
    key: with plain keys it writes the ``value`` translator's cells itself, with a key whose JSON has an escape
    it gives exports to that translator) and the same observer named by module (the per-row form) each build,
    on a new table, the cells that draining the combine's exports built, at the same timestamps; a key whose
    value was deleted implies nothing."""
    from connector.jobs import LocalEngine
    from connector.jobs.bootstrap import BootstrapJob, run_bootstrap
    from connector.snapshot import BootstrapSettings

    rng = random.Random(37)
    with CombineQueue(setup.conn_a, setup.combine) as q:
        q.update_all([(w, 1) for w in zipf_words(rng, 2000, 150)] + [("gone", 1), ("ü", 2)] + [(k, 3) for k in awkward])
    combine_all(setup.conn_a, setup.combine, "sum", "changes", setup.export)
    with CombineQueue(setup.conn_a, setup.combine) as q:
        q.update_all([("gone", -1), ("w0001", 5)])
    combine_all(setup.conn_a, setup.combine, "sum", "changes", setup.export)
    drained = unique_table("drained")
    drain_queue(setup.conn_a, setup.export, AccumuloExporter(setup.conn_b, drained, "value=count").ensure_table())

    def visible(table: str) -> list[tuple]:
        return sorted((c.row, c.cf, c.cq, c.ts, c.value) for c in setup.conn_b.scan(table))

    expected = visible(drained)
    assert len(expected) == len(setup.values()) and b"gone" not in {c[0] for c in expected}
    for snapshot in ("combine=wc", "combine=wc:connector.combine.functions:changes_observer"):
        dest = unique_table("boot")
        settings = BootstrapSettings(snapshot=snapshot, translator="value=count", create_dest_table=True)
        report = run_bootstrap(LocalEngine(), BootstrapJob(
            source=accumulo["a"].gateway_options(), dest=accumulo["b"].gateway_options(), queue=setup.export,
            table=setup.combine.table, dest_table=dest, settings=settings))
        assert report.totals.failed == 0, report.totals.errors
        assert visible(dest) == expected, snapshot
