"""Row transactions on a real Accumulo: a row's cells and its outbox commit together, the relay delivers the
outbox to the queues exactly as ExportQueue.add/CombineQueue.update would, and nothing half-written survives
a raising function, a refused value, a conflict that never resolves or an unknown outcome (invariant 7)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from connector.accumulo import Mutation, Range
from connector.combine import CombineConfig, CombineQueue, combine_all
from connector.queue import ExportQueue, QueueConfig
from connector.queue.codec import EntryCodec
from connector.queue.marks import read_marks
from connector.queue.reader import read_bucket
from connector.transactions import (
    RowTransactions,
    TransactionConflictError,
    TxLayout,
    outbox_status,
    relay_table,
)
from connector.transactions.commit import Committer
from connector.transactions.relay import pending_outbox
from connector.transactions.targets import recorded_sources

from .conftest import ROOT, unique_table

pytestmark = pytest.mark.cluster


def _queue(conn, buckets: int = 4) -> QueueConfig:
    config = QueueConfig(table=unique_table("txq"), qid="q", num_buckets=buckets)
    ExportQueue(conn, config).init()
    return config


def _entries(conn, config: QueueConfig) -> list:
    """The queue's exports (key, value, seq), decoded."""
    codec = EntryCodec(config)
    return [codec.decode(e.row, e.value) for b in range(config.num_buckets) for e in read_bucket(conn, config, b)]


def _txs(conn, **kw) -> RowTransactions:
    txs = RowTransactions(conn, unique_table("txrows"), **kw)
    txs.init()
    return txs


def _cells(conn, table: str) -> list:
    return list(conn.scan(table))


def _version(conn, table: str, row: str) -> int:
    """The seq of the row's last commit, from its version cell."""
    [cell] = conn.scan(table, Range.exact_row(row.encode()), columns=[(b"!tx", b"v")])
    return int(cell.value.split()[0])


def bump(queue, combine=None):
    def fn(tx):
        old = int(tx.get(b"c", b"n", default=b"0"))
        tx.put(b"c", b"n", str(old + 1).encode())
        tx.export(queue, key=tx.row.decode(), value={"old": old, "new": old + 1})
        if combine is not None:
            tx.update(combine, key=tx.row.decode(), delta=1)
    return fn


def test_commit_relays_outbox_and_seqs_rise(conn_a):
    queue = _queue(conn_a)
    txs = _txs(conn_a)
    seqs = [txs.run("w1", bump(queue)) for _ in range(5)]
    txs.close()  # makes the deletes of relayed outbox cells durable
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    cells = {(c.cf, c.cq): c for c in _cells(conn_a, txs.table)}
    assert cells[(b"c", b"n")].value == b"5" and cells[(b"c", b"n")].ts == seqs[-1]
    assert cells[(b"!tx", b"v")].value.split()[0] == str(seqs[-1]).encode()
    assert not [k for k in cells if k[0] == b"!txo"], "the outbox is deleted after the relay"
    entries = sorted(_entries(conn_a, queue), key=lambda e: e.seq)
    assert [(e.key, e.seq, e.value) for e in entries] == [
        ("w1", s, {"old": i, "new": i + 1}) for i, s in enumerate(seqs)]
    assert read_marks(conn_a, queue), "relayed entries mark their bucket"
    assert list(recorded_sources(conn_a, queue.table, queue.layout.config_row)) == [txs.table]
    props = conn_a.table_properties(txs.table)
    assert props["table.group.txoutbox"] == "!txo" and "txoutbox" in props["table.groups.enabled"]


def test_run_all_commits_rows_in_rounds(conn_a):
    queue = _queue(conn_a, buckets=8)
    txs = _txs(conn_a)
    rows = [f"r{i % 30}" for i in range(100)]  # same rows more than once: they run in order
    seqs = txs.run_all([(r, bump(queue)) for r in rows])
    txs.flush()
    assert len(set(seqs)) == 100
    counts = {c.row.decode(): int(c.value) for c in conn_a.scan(txs.table, columns=[(b"c", b"n")])}
    assert counts == {f"r{i}": 4 if i < 10 else 3 for i in range(30)}
    by_row: dict = {}
    for e in sorted(_entries(conn_a, queue), key=lambda e: e.seq):
        by_row.setdefault(e.key, []).append((e.value["old"], e.value["new"]))
    # one row's items committed together, each on the state the one before left, each at its own seq
    assert by_row == {f"r{i}": [(j, j + 1) for j in range(counts[f"r{i}"])] for i in range(30)}
    assert txs.commits == 100 and txs.conflicts == 0


def test_function_buffering_nothing_commits_nothing(conn_a):
    txs = _txs(conn_a)
    assert txs.run("w", lambda tx: None) is None
    assert _cells(conn_a, txs.table) == []


def test_function_that_raises_writes_nothing(conn_a):
    queue = _queue(conn_a)
    txs = _txs(conn_a)

    def fails(tx):
        tx.put(b"c", b"n", b"1")
        tx.export(queue, "w", {"new": 1})
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        txs.run("w", fails)
    assert _cells(conn_a, txs.table) == [] and _entries(conn_a, queue) == []


def test_serializer_refusal_writes_nothing(conn_a):
    queue = _queue(conn_a)
    txs = _txs(conn_a)

    def refused(tx):
        tx.put(b"c", b"n", b"1")
        tx.export(queue, "w", {"not json": {1, 2}})  # a set: the JSON serializer refuses it

    with pytest.raises(TypeError):
        txs.run("w", refused)
    assert _cells(conn_a, txs.table) == [] and _entries(conn_a, queue) == []


def test_reserved_and_early_families_are_refused(conn_a):
    txs = _txs(conn_a)
    for family in (b"!tx", b"!txo", b" early"):
        with pytest.raises(ValueError, match="family"):
            txs.run("w", lambda tx, f=family: tx.put(f, b"q", b"v"))
    assert _cells(conn_a, txs.table) == []


def test_conflict_that_never_resolves_gives_up_with_nothing_written(conn_a, accumulo):
    queue = _queue(conn_a)
    txs = _txs(conn_a, max_attempts=4)
    other = RowTransactions(accumulo["a"].connect(), txs.table)
    runs = []

    def loses(tx):
        runs.append(tx.seq)
        other.run(tx.row, lambda o: o.put(b"c", b"other", str(len(runs)).encode()))  # wins the row every time
        tx.put(b"c", b"mine", b"x")
        tx.export(queue, "w", {"new": 1})

    with pytest.raises(TransactionConflictError, match=f"{txs.table}.*4 attempts"):
        txs.run("w", loses)
    assert len(runs) == 4
    cells = {(c.cf, c.cq) for c in _cells(conn_a, txs.table)}
    assert (b"c", b"mine") not in cells and (b"c", b"other") in cells
    assert _entries(conn_a, queue) == []


def test_unknown_outcome_that_applied_is_not_committed_twice(conn_a, monkeypatch):
    queue = _queue(conn_a)
    txs = _txs(conn_a)
    real_write = Committer.write
    calls = []

    def applied_but_unknown(self, mutations):
        if mutations:
            calls.append(len(mutations))
        statuses = real_write(self, mutations)
        return dict.fromkeys(statuses, "UNKNOWN") if len(calls) == 1 else statuses

    monkeypatch.setattr(Committer, "write", applied_but_unknown)
    runs = []

    def once(tx):
        runs.append(tx.seq)
        bump(queue)(tx)

    seq = txs.run("w", once)
    txs.close()
    assert runs == [seq] and calls == [1], "a re-read found the commit: no second run, no second write"
    assert [e.seq for e in _entries(conn_a, queue)] == [seq]
    assert outbox_status(conn_a, txs.table).empty


def lose_batch_pages(monkeypatch, times: int = 1) -> list[str]:
    """Lose the answer to the next ``times`` pages of batch scanners (each read by the gateway, so its scanner
    moved on), as a gateway killed mid-read loses them; returns the list that counts them."""
    from connector.accumulo import ConnectionLostError
    from connector.accumulo import scanner as scanner_module

    real_page = scanner_module._next_page
    lost: list[str] = []

    def page(conn, scanner_id, k):  # noqa: ANN001, ANN202
        got = real_page(conn, scanner_id, k)
        if len(lost) < times:
            lost.append(scanner_id)
            raise ConnectionLostError("nextK on gw: TSocket read 0 bytes (the gateway was killed)")
        return got

    monkeypatch.setattr(scanner_module, "_next_page", page)
    return lost


def test_a_read_of_many_rows_cut_short_by_a_lost_connection_is_read_again(conn_a, monkeypatch):
    """A batch scanner does not resume after a lost page: a gateway killed while ``run_all`` read its rows
    raised ConnectionLostError out of it (a producer of the chaos run, seed 202, died of it). The read starts
    over on a fresh socket; the rows are read whole and each function runs on its row's real state."""
    queue = _queue(conn_a)
    txs = _txs(conn_a)
    words = [f"w{i}" for i in range(5)]
    txs.run_all([(w, bump(queue)) for w in words])  # every row at count 1
    cut = lose_batch_pages(monkeypatch)
    seqs = txs.run_all([(w, bump(queue)) for w in words])
    txs.close()
    assert cut and len(seqs) == len(words) and all(seqs)
    counts = {c.row.decode(): int(c.value) for c in conn_a.scan(txs.table) if c.cf == b"c"}
    assert counts == dict.fromkeys(words, 2), "each row counted once more from its real state"


def test_crash_between_commit_and_relay_then_relay_twice(conn_a, monkeypatch):
    from connector.transactions import relayer as relayer_module

    queue = _queue(conn_a)
    txs = _txs(conn_a)

    def crash(self, items, read_at=None):
        raise SystemExit("producer killed after its commit")

    monkeypatch.setattr(relayer_module.BackgroundRelay, "submit", crash)
    with pytest.raises(SystemExit):
        txs.run("w", bump(queue))
    monkeypatch.undo()
    status = outbox_status(conn_a, txs.table)
    assert status.cells == 1 and status.by_target == {queue.table: 1}
    assert _entries(conn_a, queue) == []
    stats = relay_table(conn_a, txs.table)
    assert stats.relayed == 1 and stats.exports == 1 and outbox_status(conn_a, txs.table).empty
    assert relay_table(conn_a, txs.table).relayed == 0
    [entry] = _entries(conn_a, queue)
    assert entry.value == {"old": 0, "new": 1}


def test_update_reaches_the_combine_queue(conn_a):
    queue = _queue(conn_a)
    combine = CombineConfig(table=unique_table("txc"), cid="wc", num_buckets=4)
    CombineQueue(conn_a, combine).init()
    txs = _txs(conn_a)
    for row in ["a", "b", "a"]:
        txs.run(row, bump(queue, combine))
    combine_all(conn_a, combine)
    assert CombineQueue(conn_a, combine).items() == {"a": 2, "b": 1}
    assert list(recorded_sources(conn_a, combine.table, combine.layout.config_row)) == [txs.table]


def test_custom_layout(conn_a):
    queue = _queue(conn_a)
    layout = TxLayout(b"#ver", b"s", b"#out")
    txs = _txs(conn_a, layout=layout)
    seq = txs.run("w", bump(queue))
    txs.close()
    assert {(c.cf, c.cq) for c in _cells(conn_a, txs.table)} == {(b"#ver", b"s"), (b"c", b"n")}
    assert [e.seq for e in _entries(conn_a, queue)] == [seq]


_INCREMENTER = """
import sys
from connector.clusters_config import cluster
from connector.queue import QueueConfig
from connector.transactions import RowTransactions
table, qtable, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
queue = QueueConfig(table=qtable, qid="q", num_buckets=4)
txs = RowTransactions(cluster("A").connect(), table)
def bump(tx):
    old = int(tx.get(b"c", b"n", default=b"0"))
    tx.put(b"c", b"n", str(old + 1).encode())
    tx.export(queue, "hot", {"old": old, "new": old + 1})
for _ in range(n):
    txs.run(b"hot", bump)
txs.close()
print(txs.conflicts)
"""


def test_two_processes_increment_one_row(conn_a, cli_env):
    queue = _queue(conn_a)
    txs = _txs(conn_a)
    n = 150
    procs = [subprocess.Popen([sys.executable, "-c", _INCREMENTER, txs.table, queue.table, str(n)], cwd=ROOT,
                              env=dict(cli_env, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    conflicts = [int(p.communicate(timeout=600)[0].strip() or -1) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    [count] = [c for c in _cells(conn_a, txs.table) if c.cq == b"n"]
    assert count.value == str(2 * n).encode()
    entries = sorted(_entries(conn_a, queue), key=lambda e: e.seq)
    assert len(entries) == 2 * n and len({e.seq for e in entries}) == 2 * n
    # in seq order, each export continues the one before: the serial order of the row's commits
    assert [(e.value["old"], e.value["new"]) for e in entries] == [(i, i + 1) for i in range(2 * n)]
    assert all(c >= 0 for c in conflicts), "each process printed its conflict count"
    assert outbox_status(conn_a, txs.table).empty


def test_outbox_status_names_malformed_cells(conn_a):
    txs = _txs(conn_a)
    conn_a.write(txs.table, [Mutation("r").put(b"!txo", b"zz:nonsense", b"v", timestamp=1)])
    status = outbox_status(conn_a, txs.table)
    assert status.malformed == 1 and not status.empty
    stats = relay_table(conn_a, txs.table)
    assert stats.malformed == 1 and stats.relayed == 0 and "nonsense" in stats.errors[0]
    assert list(conn_a.scan(txs.table, Range.exact_row(b"r"))), "left in place, not lost"


def test_unknown_outcome_settled_after_another_commit_followed(conn_a, accumulo, monkeypatch):
    queue = _queue(conn_a)
    txs = _txs(conn_a)
    other = RowTransactions(accumulo["a"].connect(), txs.table)
    real_write = Committer.write
    runs = []

    def applied_then_overtaken(self, mutations):
        statuses = real_write(self, mutations)
        if self is txs._committer and mutations and len(runs) == 1:
            other.run("w", bump(queue))  # commits on top of ours before we read again
            return dict.fromkeys(statuses, "UNKNOWN")
        return statuses

    monkeypatch.setattr(Committer, "write", applied_then_overtaken)

    def once(tx):
        runs.append(tx.seq)
        bump(queue)(tx)

    seq = txs.run("w", once)
    assert runs == [seq], "the version's token history shows our commit: the function does not run again"
    txs.flush()
    other.close()
    [count] = [c for c in _cells(conn_a, txs.table) if c.cq == b"n"]
    assert count.value == b"2"
    assert sorted(e.seq for e in _entries(conn_a, queue))[0] == seq and len(_entries(conn_a, queue)) == 2


def test_a_queue_initialised_differently_is_refused_before_anything_is_written(conn_a):
    queue = _queue(conn_a, buckets=4)
    wrong = QueueConfig(table=queue.table, qid=queue.qid, num_buckets=7)
    txs = _txs(conn_a)
    with pytest.raises(ValueError, match="buckets 4, not 7"):
        txs.run("w", bump(wrong))
    assert _cells(conn_a, txs.table) == [] and _entries(conn_a, queue) == []


@pytest.mark.parametrize("relay_delay", [None, 0.05])
def test_a_failed_relay_says_the_commit_happened_and_is_retried(conn_a, monkeypatch, relay_delay):
    """Relaying before ``run`` returns (None), the call raises; in the background, ``flush`` does. Either way
    the commit stands, the outbox stays in the row, and the relayer delivers it once the queue is back."""
    from connector.transactions import RelayError
    from connector.transactions import relay as relay_module

    queue = _queue(conn_a)
    txs = _txs(conn_a, relay_delay=relay_delay)

    def unreachable(self, items, read_at=None):
        raise ConnectionError("queue table unreachable")

    monkeypatch.setattr(relay_module.Relay, "relay", unreachable)
    if relay_delay is None:
        with pytest.raises(RelayError, match="committed.*unreachable.*tx relay") as err:
            txs.run("w", bump(queue))
        assert err.value.seqs == [_version(conn_a, txs.table, "w")], "the committed seq comes with the error"
    else:
        assert txs.run("w", bump(queue)) is not None
        with pytest.raises(RelayError, match="committed.*unreachable.*tx relay"):
            txs.flush(timeout=30)
    [count] = [c for c in _cells(conn_a, txs.table) if c.cq == b"n"]
    assert count.value == b"1"
    assert outbox_status(conn_a, txs.table).cells == 1 and _entries(conn_a, queue) == []
    monkeypatch.undo()
    txs.flush(timeout=30)  # the relayer's next attempt
    txs.close()
    assert [e.value for e in _entries(conn_a, queue)] == [{"old": 0, "new": 1}]
    assert outbox_status(conn_a, txs.table).empty


def test_run_returns_before_the_relay_and_flush_waits_for_it(conn_a, monkeypatch):
    """The relay is off the commit's path: with the relay held up, transactions commit and return, their
    exports reach the queue only once it goes on, in rounds shared by many transactions, and ``flush`` (and
    ``close``) wait for them."""
    import threading

    from connector.transactions import relay as relay_module

    queue = _queue(conn_a)
    txs = _txs(conn_a, relay_delay=0.05)
    release = threading.Event()
    rounds: list[int] = []
    real = relay_module.Relay.relay

    def held(self, items, read_at=None):
        release.wait(60)
        rounds.append(len(items))
        return real(self, items, read_at)

    monkeypatch.setattr(relay_module.Relay, "relay", held)
    seqs = [txs.run(f"w{i % 5}", bump(queue)) for i in range(40)]
    assert all(seqs) and txs.commits == 40
    assert _entries(conn_a, queue) == [] and txs.unrelayed == 40
    release.set()
    txs.flush(timeout=60)
    assert txs.unrelayed == 0 and sum(rounds) == 40 and len(rounds) < 40, rounds
    txs.close()
    entries = _entries(conn_a, queue)
    assert sorted(e.seq for e in entries) == sorted(seqs)
    assert outbox_status(conn_a, txs.table).empty


def test_commits_wait_for_room_when_the_relay_falls_behind(conn_a, monkeypatch):
    """``max_unrelayed`` bounds what waits in memory: a commit past it waits for the relayer."""
    import threading

    from connector.transactions import relay as relay_module

    queue = _queue(conn_a)
    txs = _txs(conn_a, relay_delay=0.0, max_unrelayed=3)
    release = threading.Event()
    real = relay_module.Relay.relay
    monkeypatch.setattr(relay_module.Relay, "relay", lambda self, items, read_at=None: (release.wait(60),
                                                                                     real(self, items, read_at))[1])
    for i in range(3):
        txs.run(f"r{i}", bump(queue))
    fourth = threading.Thread(target=txs.run, args=("r3", bump(queue)))
    fourth.start()
    fourth.join(1.0)
    assert fourth.is_alive(), "the fourth commit waits while three cells wait"
    assert txs.commits == 4, "it committed; only handing its outbox over waits"
    release.set()
    fourth.join(30)
    assert not fourth.is_alive()
    txs.close()
    assert len(_entries(conn_a, queue)) == 4


def test_cached_rows_commit_without_reading_and_a_stale_cache_loses_its_condition(conn_a, accumulo):
    """A producer keeping rows (``cache_rows``) commits its next transaction on a row it committed without
    reading it, and the counter stays exact; when another producer committed the row meanwhile, the cached
    state loses the version condition, the row is read again and the function runs on the real state."""
    queue = _queue(conn_a)
    txs = _txs(conn_a, cache_rows=2)
    seqs = [txs.run("w1", bump(queue)) for _ in range(5)]
    assert (txs.rows_read, txs.cache_hits, txs.conflicts) == (1, 4, 0)
    other = RowTransactions(accumulo["a"].connect(), txs.table)
    other.run("w1", bump(queue))  # the row changes behind the cache's back
    other.close()
    runs: list[bytes | None] = []

    def seen(tx):
        runs.append(tx.get(b"c", b"n"))
        bump(queue)(tx)

    seqs.append(txs.run("w1", seen))
    assert runs == [b"5", b"6"], "ran on the stale cached state, lost the condition, read and ran again"
    assert (txs.rows_read, txs.cache_hits, txs.conflicts) == (2, 5, 1)
    # least recently used rows go: w1 is pushed out by two others, and read again
    txs.run("w2", bump(queue))
    txs.run("w3", bump(queue))
    txs.run("w1", bump(queue))
    assert txs.rows_read == 5
    # a row whose transaction writes a visibility is not kept
    txs.run("w4", lambda tx: tx.put(b"c", b"secret", b"x", visibility=b"A"))
    txs.run("w4", lambda tx: tx.put(b"c", b"n", b"1"))
    assert txs.rows_read == 7
    txs.close()
    counts = {c.row: c.value for c in conn_a.scan(txs.table, columns=[(b"c", b"n")])}
    assert counts[b"w1"] == b"8"
    entries = sorted((e for e in _entries(conn_a, queue) if e.key == "w1"), key=lambda e: e.seq)
    assert [(e.value["old"], e.value["new"]) for e in entries] == [(i, i + 1) for i in range(8)]


def test_cache_rows_must_be_a_count():
    with pytest.raises(ValueError, match="cache_rows must be an int >= 0, got -1"):
        RowTransactions(None, "t", cache_rows=-1)  # type: ignore[arg-type]


def test_a_commit_the_relayer_refuses_raises_relay_error_with_its_seqs(conn_a, monkeypatch):
    """Issue 36 (6): once its commit is accepted, ``run``/``run_all`` never report "could not commit". When
    the relayer refuses the outbox (as many cells as ``max_unrelayed`` wait while its relay fails), the call
    raises ``RelayError`` carrying the committed seqs (aligned with the items), which is no ``CommitError``;
    the outboxes stay in the rows and reach the queue later, each commit exactly once."""
    from connector.transactions import CommitError, RelayError
    from connector.transactions import relay as relay_module

    queue = _queue(conn_a)
    txs = _txs(conn_a, max_unrelayed=1)

    def unreachable(self, items, read_at=None):
        raise ConnectionError("queue table unreachable")

    monkeypatch.setattr(relay_module.Relay, "relay", unreachable)
    first = txs.run("w0", bump(queue))  # handed over: the relayer holds it, and fails to relay it
    with pytest.raises(RelayError) as one:
        txs.run("w1", bump(queue))
    with pytest.raises(RelayError) as many:
        txs.run_all([("w2", bump(queue)), ("w3", lambda tx: None), ("w2", bump(queue))])
    assert one.value.seqs == [_version(conn_a, txs.table, "w1")]
    s2, nothing, s3 = many.value.seqs
    assert nothing is None and s2 is not None and s2 < s3 == _version(conn_a, txs.table, "w2")
    for err in (one.value, many.value):
        assert not isinstance(err, CommitError) and "do not run them again" in str(err)
    assert txs.commits == 4
    monkeypatch.undo()
    txs.flush(timeout=30)  # the relayer delivers what it held
    txs.close()
    assert relay_table(conn_a, txs.table).relayed == 3, "what it refused waited in the outboxes, as after a crash"
    assert sorted(e.seq for e in _entries(conn_a, queue)) == sorted([first, one.value.seqs[0], s2, s3])
    assert outbox_status(conn_a, txs.table).empty


@pytest.mark.parametrize("then", ["raises", "conflicts"])
def test_run_all_stopped_after_rows_committed_gives_their_seqs(conn_a, accumulo, then):
    """Issue 36 (6): ``run_all`` commits row "a" in its first round while row "b" loses its condition; in
    the second round b's function raises (or b runs out of attempts). The caller gets ``PartialCommitError``
    (caused by that error, no ``CommitError``): a's seq, and b as the only item that may run again."""
    from connector.transactions import CommitError, PartialCommitError

    queue = _queue(conn_a)
    txs = _txs(conn_a, max_attempts=1 if then == "conflicts" else 20)
    other = RowTransactions(accumulo["a"].connect(), txs.table)
    runs = []

    def contested(tx):
        runs.append(tx.seq)
        if len(runs) > 1:
            raise ValueError("b refused on its second run")
        other.run(tx.row, lambda o: o.put(b"c", b"other", b"1"))  # wins row b: this run loses its condition
        bump(queue)(tx)

    with pytest.raises(PartialCommitError) as err:
        txs.run_all([("a", bump(queue)), ("b", contested), ("a", lambda tx: None)])
    cause = err.value.__cause__
    assert isinstance(cause, ValueError if then == "raises" else TransactionConflictError), repr(cause)
    assert not isinstance(err.value, CommitError)
    assert err.value.seqs == [_version(conn_a, txs.table, "a"), None, None]
    assert (err.value.pending, err.value.unknown) == ([1], [])
    txs.close()
    other.close()
    assert [e.key for e in _entries(conn_a, queue)] == ["a"], "a's outbox is relayed, b wrote nothing"


def test_a_producer_whose_clock_is_behind_relays_leftovers_it_saw_before(conn_a, monkeypatch):
    """Issue 36 (4): a producer relays another producer's leftover outbox cell once it finds it again at
    least ``LEFTOVER_SECONDS`` (of its own monotonic clock) after it first saw it, however far behind its
    wall clock runs: no seq is compared with a clock. At first sight the cell is left to its producer."""
    from connector.transactions import rows as rows_module
    from connector.transactions.layout import clock_us

    queue = _queue(conn_a)
    crashed = _txs(conn_a)
    monkeypatch.setattr(crashed._relayer, "submit", lambda items, read_at=None: (_ for _ in ()).throw(SystemExit))
    with pytest.raises(SystemExit):
        crashed.run("w", bump(queue))  # committed, killed before its relay
    monkeypatch.undo()
    left = _version(conn_a, crashed.table, "w")  # the seq of the crashed commit: its outbox cell's timestamp
    monkeypatch.setattr(rows_module, "LEFTOVER_SECONDS", 0.5)
    behind = RowTransactions(conn_a, crashed.table, clock_us=lambda: clock_us() - 90_000_000)
    behind.run("w", bump(queue))
    behind.flush()
    outbox = [ts for _, _, ts, _ in pending_outbox(conn_a, crashed.table)]
    assert left in outbox, "first seen now: left to its producer"
    time.sleep(0.5)
    behind.run("w", bump(queue))
    behind.close()
    assert outbox_status(conn_a, crashed.table).empty, "seen again 0.5 s later: relayed"
    chain = [(e.value["old"], e.value["new"]) for e in sorted(_entries(conn_a, queue), key=lambda e: e.seq)]
    assert chain == [(0, 1), (1, 2), (2, 3)]


def test_sightings_tell_leftovers_by_this_process_clock():
    """Pure logic: a cell is ready once a look finds it at least ``grace`` after the look that first saw it;
    a look forgets what it did not find; the least recently looked-at groups go first."""
    from connector.transactions.relay import Sightings

    now = [0.0]
    sightings = Sightings(2.0, max_groups=2, clock=lambda: now[0])

    def look(group, keys):
        seen = sightings.look(group)
        ready = [k for k in keys if seen.ready(k)]
        seen.close()
        return ready

    assert look("r1", ["a", "b"]) == []
    now[0] = 1.5
    assert look("r1", ["a", "b", "c"]) == []
    now[0] = 2.0
    assert look("r1", ["a", "c"]) == ["a"]  # b went: forgotten
    now[0] = 3.5
    assert look("r1", ["a", "b", "c"]) == ["a", "c"]  # b is new again
    look("r2", ["x"])
    look("r3", ["y"])  # r1 is the least recently looked at: dropped
    now[0] = 10.0
    assert look("r1", ["a"]) == [] and look("r3", ["y"]) == ["y"]
    abandoned = sightings.look("r4")
    abandoned.ready("z")  # never closed: changes nothing
    assert len(sightings) == 2
    with pytest.raises(ValueError, match="grace"):
        Sightings(-1.0)


def test_a_queue_s_table_and_a_missing_table_are_refused_and_a_bare_table_is_set_up(conn_a):
    """The new user's findings: ``RowTransactions(conn_a, "exports").run(...)`` committed on the queue's own table
    (and ``tx relay`` then relayed 0), and a table made by hand ran transactions that bootstrap and verify refused
    only later ("no visibility summarizer is configured")."""
    from connector.accumulo.summaries import visibility_summary
    from connector.transactions import ProducerTableError
    from connector.transactions.rows import producer_table_ready

    queue = _queue(conn_a)

    def change(tx):
        tx.put(b"c", b"n", b"1")
        tx.export(queue, "k", {"v": 1})

    with pytest.raises(ProducerTableError, match="holds the records of queue 'q'") as refused:
        RowTransactions(conn_a, queue.table).run("row", change)
    assert "\n" not in str(refused.value)
    assert not list(conn_a.scan(queue.table, Range.exact_row(b"row")))  # nothing written
    with pytest.raises(ProducerTableError, match="does not exist"):
        RowTransactions(conn_a, unique_table("nosuch")).run("row", change)
    bare = unique_table("bare")
    conn_a.create_table(bare)  # by hand, no init
    assert not producer_table_ready(conn_a, bare, TxLayout())
    with RowTransactions(conn_a, bare) as txs:
        assert txs.run("row", change) is not None
    assert producer_table_ready(conn_a, bare, TxLayout())
    assert visibility_summary(conn_a, bare).hidden == {}  # the summarizer is there for verify and bootstrap
