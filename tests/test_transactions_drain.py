"""What a crashed producer left in an outbox reaches cluster B: a batch drain relays it before it starts, a
streaming drain (in-process and Spark) within its relay period, and ``accumulo-export tx relay`` on demand;
relaying twice changes nothing on B (invariant 7)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from connector.jobs import LocalEngine, stream_drain
from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status
from connector.spark import DrainJob
from connector.spark.drain_job import run_batch, start_stream
from connector.transactions import PeriodicRelay, RowTransactions, outbox_status, relay_table
from connector.transactions import relay as relay_module
from connector.transactions.layout import clock_us
from connector.transactions.relay import relay_sources
from examples.inverted_count_index import actual_index, count_update

from .conftest import run_cli, unique_table
from .test_metrics import free_port, popen, scrape, stop, value, watch

pytestmark = pytest.mark.cluster

#: how far ahead the clock of a producer in the clock-skew tests runs (its seqs are in our future)
AHEAD_US = 90_000_000


def bump(queue):
    def fn(tx):
        word = tx.row.decode()
        old = int(tx.get(b"c", b"n", default=b"0"))
        tx.put(b"c", b"n", str(old + 1).encode())
        tx.export(queue, word, count_update(word, old or None, old + 1))
    return fn


class Setup:
    def __init__(self, accumulo) -> None:
        self.a, self.b = accumulo["a"], accumulo["b"]
        self.conn_a, self.conn_b = self.a.connect(), self.b.connect()
        self.queue = QueueConfig(table=unique_table("txdq"), qid="q", num_buckets=4)
        ExportQueue(self.conn_a, self.queue).init()
        self.txs = RowTransactions(self.conn_a, unique_table("txd"))
        self.txs.init()
        self.index = unique_table("txdidx")
        self.conn_b.create_table(self.index)  # a drain creates none unless asked

    def crash_after_commit(self, words: list[str], monkeypatch, clock_ahead_us: int = 0) -> None:
        """Commit one transaction per word, each producer 'killed' between its commit and its relay (with
        ``clock_ahead_us``, a producer whose clock runs that far ahead of ours)."""
        def killed(items, read_at=None):
            raise SystemExit("killed after the commit")

        txs = self.txs
        if clock_ahead_us:
            txs = RowTransactions(self.conn_a, self.txs.table, clock_us=lambda: clock_us() + clock_ahead_us)
        before = queue_status(self.conn_a, self.queue).entries
        # this producer's relay only: a stream's periodic relay running meanwhile (on a loaded machine the
        # commits take long enough for it to look) must not be 'killed' too
        monkeypatch.setattr(txs._relayer, "submit", killed)
        for word in words:
            with pytest.raises(SystemExit):
                txs.run(word, bump(self.queue))
        monkeypatch.undo()
        if txs is not self.txs:
            txs.close()  # it has nothing to relay: its relayer thread stops
        assert outbox_status(self.conn_a, self.txs.table).cells == len(words)
        assert queue_status(self.conn_a, self.queue).entries == before, "nothing was relayed"

    def job(self, **settings) -> DrainJob:
        return DrainJob(source=self.a.gateway_options(), dest=self.b.gateway_options(), queue=self.queue,
                        dest_table=self.index, settings=DrainSettings(**settings))

    def index_on_b(self) -> set:
        return set(actual_index(self.conn_b, self.index)) if self.conn_b.table_exists(self.index) else set()

    def expected(self, counts: dict[str, int]) -> set:
        return {(f"{n:08d}".encode(), w.encode()) for w, n in counts.items()}


@pytest.fixture
def setup(accumulo):
    return Setup(accumulo)


def test_batch_drain_relays_leftovers_first(setup, monkeypatch):
    setup.txs.run("a", bump(setup.queue))  # a normal commit, relayed by its producer
    setup.txs.close()
    setup.crash_after_commit(["b", "c", "a"], monkeypatch)
    report = run_batch(None, setup.job())
    assert report.relayed == 3 and report.exported == 4
    assert setup.index_on_b() == setup.expected({"a": 2, "b": 1, "c": 1})
    assert outbox_status(setup.conn_a, setup.txs.table).empty and queue_status(setup.conn_a, setup.queue).empty
    # relaying again (nothing left) and draining again change nothing on B
    assert relay_table(setup.conn_a, setup.txs.table).relayed == 0
    assert run_batch(None, setup.job()).relayed == 0
    assert setup.index_on_b() == setup.expected({"a": 2, "b": 1, "c": 1})


def test_repeated_relay_is_harmless_on_b(setup, monkeypatch):
    setup.crash_after_commit(["x", "y"], monkeypatch)
    cells = [(row, c) for row, c in _outbox(setup)]
    with relay_module.Relay(setup.conn_a, setup.txs.table, setup.txs.layout) as relay:
        relay.relay(cells)
    run_batch(None, setup.job())
    first = setup.index_on_b()
    with relay_module.Relay(setup.conn_a, setup.txs.table, setup.txs.layout) as relay:
        relay.relay(cells)  # a relay that crashed before its deletes, repeated: the same entries again
    assert queue_status(setup.conn_a, setup.queue).entries == 2
    run_batch(None, setup.job())
    assert setup.index_on_b() == first == setup.expected({"x": 1, "y": 1})


def _outbox(setup):
    from connector.transactions.layout import parse_outbox
    from connector.transactions.relay import pending_outbox

    return [(row, parse_outbox(q, v, ts)) for row, q, ts, v in pending_outbox(setup.conn_a, setup.txs.table)]


def _stream_relays(setup, monkeypatch, words: list[str], within: float, clock_ahead_us: int = 0) -> float:
    """Run a local stream (relay every 2 s), crash a producer after it committed ``words`` (its clock
    ``clock_ahead_us`` ahead), and wait up to ``within`` seconds for the words on B; the seconds it took."""
    stop = threading.Event()
    reports = []
    runner = threading.Thread(target=lambda: reports.append(
        stream_drain(LocalEngine(), setup.job(relay_seconds=2.0, trigger_seconds=0.2), stop=stop)))
    runner.start()
    expected = setup.expected(dict.fromkeys(words, 1))
    try:
        setup.crash_after_commit(words, monkeypatch, clock_ahead_us=clock_ahead_us)
        crashed = time.monotonic()
        deadline = crashed + within
        while setup.index_on_b() != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        waited = time.monotonic() - crashed
    finally:
        stop.set()
        runner.join()
    assert setup.index_on_b() == expected, "the stream did not relay the outbox"
    assert reports[0].relayed == len(words) and outbox_status(setup.conn_a, setup.txs.table).empty
    return waited


def test_local_stream_relays_within_relay_seconds(setup, monkeypatch):
    waited = _stream_relays(setup, monkeypatch, ["p", "q"], within=120)
    print(f"relayed and exported {waited:.1f} s after the crash (relay_seconds=2)")


def test_one_shot_relays_relay_a_producer_whose_clock_runs_ahead(setup, monkeypatch):
    """Issue 36 (4): a crashed producer whose clock ran 90 s ahead left seqs in our future. A one-shot relay
    (relay_table, relay_sources: a batch drain's, a bootstrap's, ``tx relay``) relays them at once, whatever
    their seqs, and the drain takes them to B."""
    setup.crash_after_commit(["f1"], monkeypatch, clock_ahead_us=AHEAD_US)
    assert relay_table(setup.conn_a, setup.txs.table).relayed == 1
    setup.crash_after_commit(["f2", "f3"], monkeypatch, clock_ahead_us=AHEAD_US)
    stats = relay_sources(setup.conn_a, setup.queue.table, setup.queue.layout.config_row)
    assert (stats.relayed, stats.fresh) == (2, 0)
    assert outbox_status(setup.conn_a, setup.txs.table).empty
    report = run_batch(None, setup.job())
    assert report.exported == 3
    assert setup.index_on_b() == setup.expected({"f1": 1, "f2": 1, "f3": 1})


def test_periodic_relay_relays_a_clock_ahead_producer_at_its_second_look(setup, monkeypatch):
    """Issue 36 (4): a periodic relay leaves a cell to its producer until it finds it again half its period
    (of its own monotonic clock) after it first saw it, then relays it, however far ahead the seq is."""
    setup.crash_after_commit(["g1", "g2"], monkeypatch, clock_ahead_us=AHEAD_US)
    relay = PeriodicRelay(lambda: setup.conn_a, setup.queue.table, setup.queue.layout.config_row, seconds=1.0)
    first = relay.run_once()
    time.sleep(0.5)
    second = relay.run_once()
    assert (first.relayed, second.relayed) == (0, 2), "seen, then relayed half a period later"
    assert (first.fresh, second.fresh) == (2, 0)
    assert outbox_status(setup.conn_a, setup.txs.table).empty
    assert queue_status(setup.conn_a, setup.queue).entries == 2
    assert relay.run_once().relayed == 0


def test_local_stream_relays_a_clock_ahead_producer_within_its_periods(setup, monkeypatch):
    """Issue 36 (4): a streaming drain relays what a crashed producer whose clock ran 90 s ahead left within
    a couple of its relay periods (2 s), not once our clock has caught up with its seqs, and exports it."""
    # a third of the skew: the rule this replaces waited until our clock passed the seqs
    waited = _stream_relays(setup, monkeypatch, ["h1", "h2"], within=AHEAD_US / 3e6, clock_ahead_us=AHEAD_US)
    print(f"relayed and exported {waited:.1f} s after the crash of a producer 90 s ahead (relay_seconds=2)")


@pytest.mark.spark
def test_spark_stream_relays_leftovers(setup, spark, monkeypatch, tmp_path):
    setup.crash_after_commit(["s1", "s2"], monkeypatch)
    query = start_stream(spark, setup.job(relay_seconds=2.0, trigger_seconds=0.5), str(tmp_path / "ckpt"),
                         str(tmp_path / "rep"))
    try:
        deadline = time.monotonic() + 180
        while setup.index_on_b() != setup.expected({"s1": 1, "s2": 1}) and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.5)
    finally:
        query.stop()
    assert setup.index_on_b() == setup.expected({"s1": 1, "s2": 1})
    assert outbox_status(setup.conn_a, setup.txs.table).empty


def test_tx_status_and_relay_commands(setup, monkeypatch, cli_env):
    setup.crash_after_commit(["k1", "k2", "k3"], monkeypatch)
    out = run_cli(cli_env, "tx", "status", "--cluster", "A", "--table", setup.txs.table, "--json")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["cells"] == 3 and status["rows"] == 3 and status["by_target"] == {setup.queue.table: 3}
    text = run_cli(cli_env, "tx", "status", "--cluster", "A", "--table", setup.txs.table)
    assert "3 outbox cells waiting in 3 rows" in text.stdout and setup.queue.table in text.stdout
    out = run_cli(cli_env, "tx", "relay", "--cluster", "A", "--table", setup.txs.table)
    assert out.returncode == 0 and json.loads(out.stdout)["relayed"] == 3, out.stderr
    assert queue_status(setup.conn_a, setup.queue).entries == 3
    again = run_cli(cli_env, "tx", "relay", "--cluster", "A", "--table", setup.txs.table)
    assert json.loads(again.stdout)["relayed"] == 0
    missing = run_cli(cli_env, "tx", "relay", "--cluster", "A", "--table", "no_such_table")
    assert missing.returncode == 2 and "no_such_table" in missing.stderr and "does not exist" in missing.stderr


RELAYED = "accumulo_export_outbox_cells_relayed_total"
EXPORTED = "accumulo_export_entries_exported_total"


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_stream_command_counts_what_its_relay_relayed(setup, monkeypatch, cli_env, engine):
    """Issue 27: ``drain --stream`` reports the outbox cells its relay moved, in its summary and on /metrics,
    on either engine (the Spark stream's relay runs in the planner's Python process, not the command's)."""
    setup.crash_after_commit(["r1", "r2"], monkeypatch)
    port = free_port()
    args = ["drain", "--source", "A", "--dest", "B", "--table", setup.queue.table, "--queue", setup.queue.qid,
            "--dest-table", setup.index, "--stream", "--trigger-seconds", "0.5", "--relay-seconds", "2",
            "--metrics-port", str(port), *(["--engine", "local"] if engine == "local" else [])]
    proc = popen(cli_env, *args)
    seen = watch(proc, port, lambda s: value(s, EXPORTED) == 2 and value(s, RELAYED) == 2, seconds=240)
    stdout, stderr = stop(proc)
    assert proc.returncode == 0, stderr[-3000:]
    assert setup.index_on_b() == setup.expected({"r1": 1, "r2": 1}), stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert (summary["relayed"], summary["exported"]) == (2, 2), summary
    assert seen and value(seen[-1], RELAYED) == 2 and value(seen[-1], EXPORTED) == 2, seen[-1:]
    assert outbox_status(setup.conn_a, setup.txs.table).empty


def test_combine_command_counts_what_its_relay_relayed(accumulo, monkeypatch, cli_env):
    """Issue 27: ``combine run --stream`` reports the updates its relay moved (summary and /metrics)."""
    from connector.combine import CombineConfig, CombineQueue

    conn = accumulo["a"].connect()
    combine = CombineConfig(table=unique_table("txdc"), cid="wc", num_buckets=4)
    CombineQueue(conn, combine).init()
    txs = RowTransactions(conn, unique_table("txdocs"))
    txs.init()
    monkeypatch.setattr(txs._relayer, "submit", lambda items, read_at=None: (_ for _ in ()).throw(SystemExit))
    with pytest.raises(SystemExit):
        txs.run("doc", lambda tx: [tx.update(combine, word, 1) for word in ("a", "b", "a")])
    monkeypatch.undo()
    assert outbox_status(conn, txs.table).cells == 3
    port = free_port()
    proc = popen(cli_env, "combine", "run", "--cluster", "A", "--table", combine.table, "--queue", combine.cid,
                 "--stream", "--engine", "local", "--interval", "0.5", "--metrics-port", str(port))
    seen = watch(proc, port, lambda s: value(s, "accumulo_export_updates_combined_total") == 3
                 and value(s, RELAYED) == 3, seconds=120)
    stdout, stderr = stop(proc)
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert (summary["relayed"], summary["updates"]) == (3, 3), summary
    assert seen and value(seen[-1], RELAYED) == 3, seen[-1:]
    assert CombineQueue(conn, combine).items() == {"a": 2, "b": 1}
    assert scrape(port) is None
    conn.close()


def test_tx_commands_refuse_a_table_without_row_transactions(setup, cli_env, accumulo):
    """Issue 27: ``tx relay``/``tx status`` on a table that holds no row transactions (a queue's, say) say so
    (exit 2, naming the table and what a producer table looks like) instead of relaying 0; an initialised
    producer table with no transaction yet, and one whose producer never ran ``init``, are accepted."""
    from connector.combine import CombineConfig, CombineQueue

    def tx(command: str, table: str, *extra: str):
        return run_cli(cli_env, "tx", command, "--cluster", "A", "--table", table, *extra)

    for command in ("relay", "status"):
        out = tx(command, setup.queue.table)
        assert out.returncode == 2 and out.stdout == "", (command, out.stdout, out.stderr)
        message = out.stderr.strip()
        assert message.startswith(f"accumulo-export: error: table {setup.queue.table!r} on cluster 'A'"), message
        assert "holds no row transactions" in message and "'!txo'" in message and "'!tx:v'" in message
        assert "RowTransactions.init" in message and f"export queue {setup.queue.qid!r}" in message
    # initialised, no transaction yet (setup.txs ran init only): accepted
    relayed = tx("relay", setup.txs.table)
    assert relayed.returncode == 0 and json.loads(relayed.stdout)["relayed"] == 0, relayed.stderr
    status = tx("status", setup.txs.table, "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["cells"] == 0, status.stderr
    # a producer that never ran init (no locality group): its version cells say what the table is
    bare = RowTransactions(setup.conn_a, unique_table("txbare"))
    setup.conn_a.create_table(bare.table)
    assert tx("status", bare.table).returncode == 2  # nothing in it yet: nothing says it is a producer's
    bare.run("row", lambda t: t.put(b"c", b"n", b"1"))
    bare.close()
    assert tx("relay", bare.table).returncode == 0
    # a combine queue's table: its row transactions' outbox family is another one, which the message names
    combine = CombineConfig(table=unique_table("txdc"), cid="wc", num_buckets=4)
    CombineQueue(setup.conn_a, combine).init()
    out = tx("relay", combine.table)
    assert out.returncode == 2 and "combine queue 'wc'" in out.stderr and "--outbox-family o" in out.stderr
    assert tx("relay", combine.table, "--outbox-family", "o").returncode == 0


def test_combine_relays_updates_a_crashed_producer_left(accumulo, monkeypatch):
    from connector.combine import CombineConfig, CombineQueue, combine_all

    conn = accumulo["a"].connect()
    combine = CombineConfig(table=unique_table("txdc"), cid="wc", num_buckets=4)
    CombineQueue(conn, combine).init()
    txs = RowTransactions(conn, unique_table("txdocs"))
    txs.init()

    def write_doc(text):
        def fn(tx):
            tx.put(b"d", b"text", text.encode())
            for word in text.split():
                tx.update(combine, word, 1)
        return fn

    txs.run("doc1", write_doc("a b a"))
    txs.close()
    monkeypatch.setattr(txs._relayer, "submit", lambda items, read_at=None: (_ for _ in ()).throw(SystemExit))
    with pytest.raises(SystemExit):
        txs.run("doc2", write_doc("b c"))
    monkeypatch.undo()
    assert outbox_status(conn, txs.table).cells == 2
    combine_all(conn, combine)
    assert CombineQueue(conn, combine).items() == {"a": 2, "b": 2, "c": 1}
    assert outbox_status(conn, txs.table).empty
