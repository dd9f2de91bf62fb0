"""Java producers on a real Accumulo: ``RowTransactionExample`` (the harness module of integration/gateway,
package ``exportconnector.examples``) commits row transactions with Accumulo's own ConditionalWriter, following the
protocol of ``connector/transactions/layout.py``; its exports drain to B like a Python producer's.

Two Java processes increment the same few words at once (so their commits collide and retry), into a queue of
json or of packed values; then every counter, every queue entry and B's index are checked against each other.
A run with ``--no-relay`` (a crash between commit and relay) leaves its outboxes, which the Python relay copies
into the queue.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections import defaultdict

import pytest

from connector.accumulo import Range
from connector.export import AccumuloExporter
from connector.packed import MAGIC as PACKED_MAGIC
from connector.queue import ExportQueue, QueueConfig, drain_queue, queue_status
from connector.queue.codec import EntryCodec
from connector.queue.marks import read_marks
from connector.transactions import RowTransactions, relay_table
from examples.inverted_count_index import actual_index, count_update
from integration.harness import ROW_TRANSACTION_EXAMPLE, java_command
from tests.conftest import unique_table

pytestmark = pytest.mark.cluster

EXAMPLE = ROW_TRANSACTION_EXAMPLE
VERSION, OUTBOX, COUNTS = b"!tx", b"!txo", b"c"
SOURCE_RECORD = {"outbox": "!txo", "version": ["!tx", "v"]}


@pytest.fixture(scope="module")
def classpath(gateway_classpath: str) -> str:
    """The harness module's classpath (built with the example, if the sources changed)."""
    return gateway_classpath


class JavaSetup:
    """An export queue and a producer table on A, an index table on B, all fresh."""

    def __init__(self, accumulo, classpath: str, buckets: int = 13, value_serializer: str = "json") -> None:
        self.a, self.b, self.classpath = accumulo["a"], accumulo["b"], classpath
        self.conn_a, self.conn_b = self.a.connect(), self.b.connect()
        self.queue = QueueConfig(table=unique_table("jq"), qid="jidx", num_buckets=buckets,
                                 value_serializer=value_serializer)
        self.table = unique_table("jcounts")
        self.index = unique_table("jindex")
        ExportQueue(self.conn_a, self.queue).init()
        self.conn_a.create_table(self.table)
        self.conn_b.create_table(self.index)

    def args(self, *extra: str) -> list[str]:
        return java_command(self.classpath, EXAMPLE, *self.a.java_args(), "--table", self.table,
                            "--queue-table", self.queue.table, "--qid", self.queue.qid,
                            "--buckets", str(self.queue.num_buckets), *extra, heap="256m")

    def start(self, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(self.args(*extra), env=self.a.java_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    @staticmethod
    def summary(proc: subprocess.Popen, timeout: float = 300) -> dict:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"the Java producer failed ({proc.returncode}):\n{err[-3000:]}"
        return json.loads(out.strip().splitlines()[-1])

    def counts(self) -> dict[bytes, int]:
        return {c.row: int(c.value) for c in self.conn_a.scan(self.table, columns=[(COUNTS, b"n")])}

    def outbox(self) -> list:
        return list(self.conn_a.scan(self.table, columns=[OUTBOX]))

    def entries(self) -> list:
        return list(self.conn_a.scan(self.queue.table, self.queue.layout.queue_range(), batch_size=5000))

    def check_versions(self) -> None:
        """Every row has a version "<seq> <token>" whose seq is its counter cell's timestamp."""
        by_row: dict[bytes, dict[bytes, object]] = defaultdict(dict)
        for cell in self.conn_a.scan(self.table, columns=[VERSION, COUNTS]):
            by_row[cell.row][cell.cf] = cell
        for row, cells in by_row.items():
            version, count = cells[VERSION], cells[COUNTS]
            seq, token = version.value.split(b" ")
            assert int(seq) == version.ts == count.ts, f"row {row!r}: version {version} vs count {count}"
            assert len(token) == 16 and int(token, 16) >= 0

    def check_entries(self, entries: list) -> None:
        """The entries are exactly what Python's codec would write for the same exports (in the queue's value
        encoding: packed values start with its magic bytes), and each word's history is serial: sorted by seq,
        its updates go 0->1, 1->2, ... up to the counter on A."""
        codec = EntryCodec(self.queue)
        history: dict[str, list[tuple[int, dict]]] = defaultdict(list)
        for cell in entries:
            assert cell.value.startswith(PACKED_MAGIC if self.queue.value_serializer == "packed" else b"{")
            export = codec.decode(cell.row, cell.value)
            assert codec.encode(export.key, export.value, export.seq) == (cell.row, cell.value)
            history[export.key].append((export.seq, export.value))
        counts = self.counts()
        assert sorted(history) == sorted(w.decode() for w in counts)
        for word, updates in history.items():
            updates.sort(key=lambda u: u[0])
            seqs = [s for s, _ in updates]
            assert len(set(seqs)) == len(seqs), f"{word}: repeated seqs"
            assert [v for _, v in updates] == [count_update(word, n - 1, n) for n in range(1, len(updates) + 1)]
            assert len(updates) == counts[word.encode()]

    def check_source_recorded(self) -> None:
        cells = list(self.conn_a.scan(self.queue.table, Range.exact_row(self.queue.layout.config_row),
                                      columns=[b"x"]))
        assert [(c.cq, json.loads(c.value)) for c in cells] == [(self.table.encode(), SOURCE_RECORD)]

    def drain_and_verify(self, transactions: int) -> None:
        exporter = AccumuloExporter(self.conn_b, self.index, "difference").ensure_table()
        stats = drain_queue(self.conn_a, self.queue, exporter)
        assert stats.exported == transactions and stats.dead_lettered == 0
        counts = self.counts()
        assert sum(counts.values()) == transactions
        expected = sorted((f"{n:08d}".encode(), word) for word, n in counts.items() if n)
        assert sorted(actual_index(self.conn_b, self.index)) == expected
        assert queue_status(self.conn_a, self.queue).entries == 0
        assert self.outbox() == [], "outbox cells left in the producer table"

    def close(self) -> None:
        self.conn_a.close()
        self.conn_b.close()


@pytest.fixture
def setup(request, accumulo, classpath):
    """A fresh JavaSetup; its queue's value serializer is the test's indirect parameter (default json)."""
    s = JavaSetup(accumulo, classpath, value_serializer=getattr(request, "param", "json"))
    yield s
    s.close()


def test_java_hash_and_packed_encoder_match_the_shared_test_vectors(classpath):
    """``--check``: the bucket hash against DESIGN.md's values, the packed encoder against
    tests/vectors/packed.json (the Rust decoder and tests/test_packed.py check the same file)."""
    out = subprocess.run(java_command(classpath, EXAMPLE, "--check", heap="64m"), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"test_vectors": "ok"}


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_exits_0(classpath, flag):
    out = subprocess.run(java_command(classpath, EXAMPLE, flag, heap="64m"), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: RowTransactionExample --instance NAME")
    for option in ("--zookeepers", "--queue-table", "--qid", "--buckets", "--words", "--transactions", "--seed",
                   "--max-attempts", "--no-relay", "--check", "ACCUMULO_PASSWORD"):
        assert option in out.stdout, option
    assert out.stderr == ""


def test_an_unknown_argument_exits_2_and_points_to_help(classpath):
    out = subprocess.run(java_command(classpath, EXAMPLE, "--colour", "blue", heap="64m"), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert "unknown argument: --colour (--help prints the usage)" in out.stderr


@pytest.mark.parametrize("setup", ["json", "packed"], indirect=True)
def test_two_java_producers_collide_and_drain_exactly(setup):
    per_process, words = 60, 4
    started = time.monotonic()
    procs = [setup.start("--words", str(words), "--transactions", str(per_process), "--seed", str(seed))
             for seed in (1, 2)]
    summaries = [setup.summary(p) for p in procs]
    print(f"java producers: {summaries} ({time.monotonic() - started:.1f} s)")
    transactions = 2 * per_process
    assert sum(s["commits"] for s in summaries) == transactions
    # a commit also relays what it read in its row's outbox: the other process's cells it had not relayed
    # yet are relayed twice (harmless, checked below), so at least one relay per commit
    assert sum(s["relayed"] for s in summaries) >= transactions

    # on A: the counters add up, every row is versioned, the outboxes are gone, the entries are serial
    assert sum(setup.counts().values()) == transactions
    setup.check_versions()
    assert setup.outbox() == []
    entries = setup.entries()
    assert len(entries) == transactions
    setup.check_entries(entries)
    setup.check_source_recorded()
    props = setup.conn_a.table_properties(setup.table)  # the outbox is a locality group of its own
    assert props.get("table.group.txoutbox") == "!txo"
    assert "txoutbox" in props.get("table.groups.enabled", "").split(",")
    buckets = {setup.queue.layout.parse_row(c.row).bucket for c in entries}
    assert set(read_marks(setup.conn_a, setup.queue)) == buckets

    setup.drain_and_verify(transactions)


def test_java_producer_crash_before_relay_is_relayed_from_python(setup):
    transactions = 30
    summary = setup.summary(setup.start("--words", "3", "--transactions", str(transactions), "--seed", "7",
                                        "--no-relay"))
    assert summary["commits"] == transactions and summary["relayed"] == 0

    # committed but not relayed: every export waits in its row's outbox, the queue holds nothing
    outbox = setup.outbox()
    assert len(outbox) == transactions
    assert queue_status(setup.conn_a, setup.queue).entries == 0
    assert read_marks(setup.conn_a, setup.queue) == {}
    setup.check_versions()
    setup.check_source_recorded()
    head = b"e:" + setup.queue.table.encode() + b":"
    codec = EntryCodec(setup.queue)
    for cell in outbox:
        assert cell.cq.startswith(head)
        export = codec.decode(cell.cq[len(head):], cell.value)
        assert export.seq == cell.ts and export.key == cell.row.decode()

    stats = relay_table(setup.conn_a, setup.table)
    assert stats.relayed == transactions
    assert setup.outbox() == []
    entries = setup.entries()
    assert len(entries) == transactions
    setup.check_entries(entries)
    assert relay_table(setup.conn_a, setup.table).relayed == 0  # nothing left: relaying again is a no-op

    setup.drain_and_verify(transactions)


def test_the_next_java_commit_on_a_row_relays_what_a_crashed_java_producer_left(setup):
    transactions = 20
    crashed = setup.summary(setup.start("--words", "3", "--transactions", str(transactions), "--seed", "5",
                                        "--no-relay"))
    assert crashed["commits"] == transactions and len(setup.outbox()) == transactions
    # the same seed touches the same words: each row's next commit relays its leftovers with its own export
    summary = setup.summary(setup.start("--words", "3", "--transactions", str(transactions), "--seed", "5"))
    assert summary["commits"] == transactions and summary["relayed"] == 2 * transactions
    assert setup.outbox() == []
    entries = setup.entries()
    assert len(entries) == 2 * transactions
    setup.check_entries(entries)
    setup.drain_and_verify(2 * transactions)


def test_java_and_python_producers_share_rows(setup):
    per_producer, words = 40, 3
    proc = setup.start("--words", str(words), "--transactions", str(per_producer), "--seed", "3")
    rng = random.Random(4)
    with setup.a.connect() as conn, RowTransactions(conn, setup.table) as txs:
        txs.init()
        for _ in range(per_producer):
            word = f"w{rng.randrange(words)}"

            def bump(tx, word=word):
                old = int(tx.get(COUNTS, b"n", default=b"0"))
                tx.put(COUNTS, b"n", str(old + 1).encode())
                tx.export(setup.queue, key=word, value=count_update(word, old, old + 1))

            txs.run(word, bump)
        python_conflicts = txs.conflicts
    java = setup.summary(proc)
    print(f"java: {java}; python conflicts retried: {python_conflicts}")
    assert java["commits"] == per_producer

    transactions = 2 * per_producer
    assert setup.outbox() == []
    setup.check_versions()
    entries = setup.entries()
    assert len(entries) == transactions
    setup.check_entries(entries)  # one serial history per row, whichever language committed each step
    setup.check_source_recorded()
    setup.drain_and_verify(transactions)


def test_java_producer_refuses_a_bucket_count_the_queue_was_not_initialised_with(setup):
    args = setup.args("--transactions", "1")
    args[args.index("--buckets") + 1] = "7"
    out = subprocess.run(args, env=setup.a.java_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "initialised with 13 buckets, not 7" in out.stderr
    assert setup.counts() == {}


@pytest.mark.parametrize("setup", ["bytes"], indirect=True)
def test_java_producer_refuses_a_value_serializer_it_cannot_write(setup):
    out = subprocess.run(setup.args("--transactions", "1"), env=setup.a.java_env(), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert "uses value_serializer 'bytes'; this example writes value_serializer json or packed" in out.stderr
    assert setup.counts() == {}
