"""The watermark and read-your-writes across clusters, on real clusters: ``wait_for_seq`` returns only once a
commit is on the destination (read back right after), stops at an outbox a SIGKILLed producer left until a relay
moves it, at a dead letter until it is requeued; ``accumulo-export wait`` says how far it got; a drain's metrics
give each destination its watermark, none while a bootstrap builds it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from connector.cli.metrics import drain_watermarks
from connector.jobs import LocalEngine, run_drain
from connector.queue import ExportQueue
from connector.queue.destinations import Destination, register_destination
from connector.snapshot.state import BootstrapState, Plan
from connector.transactions import RowTransactions, WaitTimeout, queue_watermark, relay_table, wait_for_seq
from examples.inverted_count_index import count_update

from .conftest import ROOT, Scenario, run_cli, unique_table
from .test_bootstrap import Stream, commit, drained

# a producer that commits one transaction, prints its seq and waits to be killed: its relayer waits an hour
_KILLED_PRODUCER = """
import sys, time
from connector.clusters_config import cluster
from connector.queue import QueueConfig
from connector.transactions import RowTransactions
from examples.inverted_count_index import count_update
queue = QueueConfig(table=sys.argv[2], qid=sys.argv[3], num_buckets=int(sys.argv[4]))
conn = cluster("A").connect()
txs = RowTransactions(conn, sys.argv[1], relay_delay=3600)
def change(tx):
    tx.put(b"c", b"n", b"5")
    tx.export(queue, "killed", count_update("killed", None, 5))
print(txs.run("killed", change), flush=True)
time.sleep(3600)
"""


def index_holds(scenario: Scenario, word: str, count: int) -> bool:
    return any(c.row == f"{count:08d}".encode() and c.cq == word.encode()
               for c in scenario.conn_b.scan(scenario.index))



def commit_and_kill_producer(scenario, cli_env) -> int:
    """A producer that commits one row transaction and is SIGKILLed before its relayer moves the outbox cell: the
    commit's seq (its export waits in the row's outbox)."""
    q = scenario.queue
    producer = subprocess.Popen([sys.executable, "-c", _KILLED_PRODUCER, scenario.counts, q.table, q.qid,
                                 str(q.num_buckets)], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=cli_env)
    try:
        return int(producer.stdout.readline())  # type: ignore[union-attr]
    finally:
        os.kill(producer.pid, signal.SIGKILL)
        producer.wait()

def test_wait_returns_once_the_commit_is_on_the_destination_and_the_change_reads_back(scenario):
    stream = Stream(scenario, scenario.index)
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    try:
        for n in range(1, 6):
            seq = commit(txs, scenario, "mine", n)
            mark = wait_for_seq(scenario.conn_a, scenario.queue, seq, timeout=60)
            assert mark.reached(seq)
            assert index_holds(scenario, "mine", n), f"wait returned before count {n} was on B"
    finally:
        stream.close()
        txs.close()


def test_the_watermark_stops_below_an_outbox_a_killed_producer_left_until_a_relay_moves_it(scenario, cli_env):
    q = scenario.queue
    seq = commit_and_kill_producer(scenario, cli_env)
    mark = queue_watermark(scenario.conn_a, q)
    assert (mark.outbox, mark.entries, mark.lowest, mark.seq) == (1, 0, seq, seq - 1)
    with pytest.raises(WaitTimeout, match="1 outbox cells not relayed"):
        wait_for_seq(scenario.conn_a, q, seq, timeout=1)
    wait = ["wait", "--cluster", "A", "--table", q.table, "--queue", q.qid, "--seq", str(seq)]
    out = run_cli(cli_env, *wait, "--timeout", "1")
    assert out.returncode == 4 and f"seq {seq}" in out.stderr and "outbox" in out.stderr, out
    assert wait_for_seq(scenario.conn_a, q, seq - 1, timeout=1).seq == seq - 1  # what came before is there

    assert relay_table(scenario.conn_a, scenario.counts).relayed == 1
    mark = queue_watermark(scenario.conn_a, q)
    assert (mark.outbox, mark.entries, mark.lowest) == (0, 1, seq)
    run_drain(LocalEngine(), scenario.job())
    out = run_cli(cli_env, *wait, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["reached"], out
    assert index_holds(scenario, "killed", 5)


def test_a_dead_letter_holds_the_watermark_until_it_is_requeued(scenario):
    q = scenario.queue
    with ExportQueue(scenario.conn_a, q) as queue:
        queue.add("ok", count_update("ok", None, 1), 100)
        queue.add("bad", {"new": "not a list of cells"}, 200)  # the translator refuses it: a dead letter
        queue.add("late", count_update("late", None, 2), 300)
    run_drain(LocalEngine(), scenario.job())
    mark = queue_watermark(scenario.conn_a, q)
    assert (mark.entries, mark.dead_letters, mark.seq) == (0, 1, 199), mark
    assert mark.reached(150) and not mark.reached(300)
    with pytest.raises(WaitTimeout, match="dead letter"):
        wait_for_seq(scenario.conn_a, q, 300, timeout=0.5)


def test_a_drains_metrics_give_no_watermark_to_a_destination_a_bootstrap_is_building(scenario):
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    seq = commit(txs, scenario, "w1", 3)
    txs.flush()
    second = unique_table("second")
    scenario.conn_b.create_table(second)
    name = f"B/{second}"
    register_destination(scenario.conn_a, scenario.queue,
                         Destination(name, scenario.b.gateway_options(), second, "difference"))
    job = scenario.job(dest=scenario.b.gateway_options())
    watermarks = drain_watermarks(job)
    state = BootstrapState(scenario.conn_a, scenario.queue, name)
    state.acquire()
    try:
        state.server_time_ms()  # as a bootstrap does when it plans (what tells the watermark one ran since)
        state.start(Plan(scenario.counts, "examples.inverted_count_index:snapshot", (), 0))
        marks = watermarks(scenario.conn_a)
        assert marks[name] is None
        (primary,) = [n for n in marks if n != name]
        assert marks[primary] is not None and marks[primary].lowest == seq
        state.clear()
    finally:
        state.release()
    run_drain(LocalEngine(), scenario.job())
    marks = watermarks(scenario.conn_a)
    assert marks[name] is not None and marks[name].lowest is None  # nothing waits for either
    drained(scenario)
    txs.close()
