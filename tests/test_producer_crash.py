"""Transactional producers killed at random points (invariant 7): producer processes of the inverted count
index run row transactions on shared, Zipf-hot words; some are SIGKILLed at points hypothesis chooses and
started again for the rest of their work. Then the outboxes the kills left are relayed and the queue drained
in-process, and: B equals the index recomputed from A's rows, the queue and the outbox are empty, and the
queued exports of each word, in seq order, are exactly the chain of its committed changes (none missing, none
for a change A never made, the last one at the seq of A's count cell)."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from connector.export import AccumuloExporter
from connector.queue import DrainSettings, ExportQueue, QueueConfig, drain_queue, queue_status
from connector.queue.codec import EntryCodec
from connector.queue.reader import read_bucket
from connector.transactions import RowTransactions, outbox_status, relay_table
from examples.demo import ProducerProcess
from examples.inverted_count_index import COUNT_QUALIFIER, COUNTS_FAMILY, actual_index, expected_index

from .conftest import ROOT, unique_table

pytestmark = pytest.mark.cluster

PRODUCERS = 3
SHARE = {1: 150, 20: 600, 100: 1_000}  # transactions per producer, by transactions per run_all (1: run)
WORDS = 200


def _count(update: list[dict]) -> int:
    return int(update[0]["row"]) if update else 0


def _exports_by_word(conn, queue: QueueConfig) -> dict[str, list[tuple[int, int, int]]]:
    """The queued exports per word as (seq, old count, new count), in seq order."""
    codec = EntryCodec(queue)
    out: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for bucket in range(queue.num_buckets):
        for entry in read_bucket(conn, queue, bucket):
            e = codec.decode(entry.row, entry.value)
            out[e.key].append((e.seq, _count(e.value["old"]), _count(e.value["new"])))
    return {w: sorted(xs) for w, xs in out.items()}


# a kill: (which producer, the share of its run it reported committed first). A point in the run, not a time,
# so that a fast machine cannot finish every producer before its kill: the first kill's share stays at or
# under half, which a producer reporting every 50 ms always shows before it ends.
kill_plans = st.tuples(
    st.tuples(st.integers(0, PRODUCERS - 1), st.floats(0.0, 0.5)),
    st.lists(st.tuples(st.integers(0, PRODUCERS - 1), st.floats(0.0, 0.9)), max_size=2),
).map(lambda first_rest: [first_rest[0], *first_rest[1]])


@pytest.mark.parametrize("batch", [1, 20, 100])  # run, and run_all of a few and of many
@settings(max_examples=2, deadline=None, phases=[Phase.generate], derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=kill_plans)
def test_producers_killed_at_random_points_then_restarted(accumulo, cli_env, plan, batch):
    conn_a, conn_b = accumulo["a"].connect(), accumulo["b"].connect()
    queue = QueueConfig(table=unique_table("crashq"), qid="cidx", num_buckets=7)
    counts, index = unique_table("crashcounts"), unique_table("crashindex")
    ExportQueue(conn_a, queue).init()
    RowTransactions(conn_a, counts).init()
    env = dict(cli_env, PYTHONPATH=str(ROOT))
    seeds = iter(range(100, 10_000))

    def start(n: int) -> ProducerProcess:
        return ProducerProcess(f"p{n}", "examples.inverted_count_index", [
            "--cluster", "A", "--table", counts, "--queue-table", queue.table, "--qid", queue.qid,
            "--buckets", str(queue.num_buckets), "--words", str(WORDS), "--transactions", str(n),
            "--seed", str(next(seeds)), "--batch", str(batch), "--progress-seconds", "0.05"], env)

    t0 = time.monotonic()
    procs = [start(SHARE[batch]) for _ in range(PRODUCERS)]
    owed = [SHARE[batch]] * PRODUCERS  # transactions each slot still has to run (by what its processes reported)
    given = list(owed)  # what each slot's current process was started with
    killed_mid_run = 0
    for slot, share in plan:
        p = procs[slot]
        deadline = time.monotonic() + 120
        while (not p.committed or p.committed < share * given[slot]) and p.proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.005)
        if p.proc.poll() is not None:
            continue  # it finished first: nothing to kill
        p.kill()
        killed_mid_run += 1
        owed[slot] -= p.committed
        given[slot] = max(owed[slot], 1)
        procs[slot] = start(given[slot])
    for p in procs:
        assert p.wait() == 0, p.stderr[-3000:]
    assert killed_mid_run, "no producer was killed mid-run: give them more work"
    t_produced = time.monotonic()

    relay_table(conn_a, counts)  # what the killed producers left (relaying twice is harmless: do it)
    relay_table(conn_a, counts)
    assert outbox_status(conn_a, counts).empty

    # every committed change has its export and no export lacks its commit: per word, the exports in seq
    # order continue each other from 0 to A's count, the last one at the seq of A's count cell
    exports = _exports_by_word(conn_a, queue)
    cells = {c.row.decode(): c for c in conn_a.scan(counts, columns=[(COUNTS_FAMILY, COUNT_QUALIFIER)])}
    assert set(exports) == set(cells)
    for word, chain in exports.items():
        assert len({seq for seq, _, _ in chain}) == len(chain), f"{word}: two exports at one seq"
        assert [old for _, old, _ in chain] == [0] + [new for _, _, new in chain[:-1]], f"{word}: broken chain"
        assert chain[-1][2] == int(cells[word].value) and chain[-1][0] == cells[word].ts, f"{word}: stale count"

    exporter = AccumuloExporter(conn_b, index, "difference").ensure_table()
    stats = drain_queue(conn_a, queue, exporter, DrainSettings(buffer_bytes=16_384))
    exporter.close()
    assert stats.dead_lettered == 0
    assert stats.exported == sum(len(c) for c in exports.values())
    assert queue_status(conn_a, queue).empty
    actual = actual_index(conn_b, index)
    assert len(actual) == len(set(actual)), "duplicate index cells"
    expected = expected_index(conn_a, counts)
    assert set(actual) == expected, (f"stale {sorted(set(actual) - expected)[:5]} "
                                     f"missing {sorted(expected - set(actual))[:5]}")
    print(f"batch {batch} kills {plan}: produced in {t_produced - t0:.1f}s, checked and drained in "
          f"{time.monotonic() - t_produced:.1f}s")
    conn_a.close()
    conn_b.close()
