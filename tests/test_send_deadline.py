"""No writer sends a batch after its hold (DESIGN.md: "The purge's bound"): what a ``BatchWriter`` is given within
``send_deadline`` is never sent after that deadline, neither first (rows buffered until a flush) nor replayed after
a lost connection; the writer raises ``SendDeadlinePassedError`` instead and nothing of it lands. A drain whose
export would send past the hold leaves the batch in the queue (exported by the next pass), and a relay whose copy
would be replayed past the hold reads the cells again. On real Accumulo; a lost connection is a gateway killed and
started again later (the hold is lowered to a second or so)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pytest

from connector.accumulo import UPDATE_SCHEMA, BatchWriter, Mutation, RetryPolicy
from connector.accumulo.errors import SendDeadlinePassedError
from connector.accumulo.writer import EXPORT_HOLD_SECONDS, send_deadline
from connector.export import AccumuloExporter, SequencedExport
from connector.queue import ExportQueue, QueueConfig, queue_status
from connector.queue import drain as drain_module
from connector.queue.drain import drain_bucket, drain_queue
from connector.transactions import RowTransactions, outbox_status, relay_table
from connector.transactions import relay as relay_module
from integration.harness import StandaloneGateway

from .conftest import unique_table

pytestmark = pytest.mark.cluster

#: the hold in these tests (seconds), and how long a killed gateway stays down: past the hold
HOLD = 2.0
DOWN = HOLD + 1.0


def rows_of(conn: Any, table: str) -> list[bytes]:
    return sorted(cell.row for cell in conn.scan(table))


def cells(*rows: str) -> pa.RecordBatch:
    """Puts of ``rows`` at timestamp 1, as ``add_cells`` takes them (sent at once, not buffered)."""
    n = len(rows)
    return pa.record_batch([pa.array([r.encode() for r in rows], pa.binary()), pa.array([b"f"] * n, pa.binary()),
                            pa.array([b"q"] * n, pa.binary()), pa.array([b""] * n, pa.binary()),
                            pa.array([1] * n, pa.int64()), pa.array([b"v"] * n, pa.binary()),
                            pa.array([False] * n, pa.bool_())], schema=UPDATE_SCHEMA)


def patient(gateway: StandaloneGateway) -> Any:
    """A connection to ``gateway`` that waits out a restart (retries for up to two minutes)."""
    return gateway.connect(retry=RetryPolicy(attempts=1_000, max_seconds=120, max_wait=0.3))


class Outage:
    """Kills ``gateway`` now and starts it again ``down`` seconds later, on a thread."""

    def __init__(self, gateway: StandaloneGateway, down: float = DOWN) -> None:
        gateway.kill()
        self.errors: list[BaseException] = []

        def start() -> None:
            try:
                gateway.start()
            except BaseException as exc:  # noqa: BLE001 - reported by over()
                self.errors.append(exc)

        self._restart = threading.Timer(down, start)
        self._restart.start()

    def over(self) -> None:
        self._restart.join(300)
        assert not self._restart.is_alive() and not self.errors, f"the gateway did not come back: {self.errors}"


@pytest.fixture
def gateway_b(accumulo) -> Iterator[StandaloneGateway]:
    gateway = StandaloneGateway(accumulo["b"], accumulo.classpath)
    gateway.start()
    yield gateway
    gateway.stop()


@pytest.fixture
def table_b(conn_b) -> Iterator[str]:
    name = unique_table("deadline")
    conn_b.create_table(name)
    yield name
    conn_b.delete_table(name, missing_ok=True)


def test_what_a_writer_holds_past_its_deadline_is_never_sent(conn_b, table_b):
    with conn_b.batch_writer(table_b) as writer:
        with send_deadline(time.monotonic() + HOLD):
            writer.add_cells(cells("sent-in-time"))  # sent at once, on a connection that stays up
            writer.add_mutation(Mutation("buffered-in-time").put("f", "q", "v", timestamp=1))
            writer.flush()
        with send_deadline(time.monotonic() + HOLD):
            writer.add_cells(cells("sent-before-flushed-after"))
        time.sleep(HOLD + 0.3)
        writer.flush()  # nothing left to send: what went before the deadline is made durable after it
        with send_deadline(time.monotonic() + 0.3):
            writer.add_mutation(Mutation("late").put("f", "q", "v", timestamp=1))  # buffered until the flush
        time.sleep(0.5)
        with pytest.raises(SendDeadlinePassedError, match=table_b):
            writer.flush()
        writer.flush()
        writer.add_mutation(Mutation("after").put("f", "q", "v", timestamp=1))  # still usable; no deadline now
    assert rows_of(conn_b, table_b) == [b"after", b"buffered-in-time", b"sent-before-flushed-after",
                                        b"sent-in-time"]


def test_a_replay_after_a_lost_connection_is_refused_past_the_deadline(conn_b, table_b, gateway_b):
    conn = patient(gateway_b)
    try:
        writer = conn.batch_writer(table_b)
        outage = Outage(gateway_b)
        with send_deadline(time.monotonic() + HOLD):
            writer.add_cells(cells("replayed-late"))  # into the dead gateway's socket: lost, to be replayed
        with pytest.raises(SendDeadlinePassedError, match=table_b):
            writer.flush()
        outage.over()
        time.sleep(1.0)
        assert rows_of(conn_b, table_b) == [], "a copy was sent after its deadline"
        writer.add_mutation(Mutation("after").put("f", "q", "v", timestamp=1))  # the writer reconnects and goes on
        writer.close()
        assert rows_of(conn_b, table_b) == [b"after"]
    finally:
        conn.close()


def test_a_replay_before_the_deadline_lands(conn_b, table_b, gateway_b):
    conn = patient(gateway_b)
    try:
        writer = conn.batch_writer(table_b)
        outage = Outage(gateway_b, down=1.0)
        with send_deadline(time.monotonic() + 600):
            writer.add_cells(cells("replayed-in-time"))
        writer.flush()  # waits for the gateway, replays, durable
        outage.over()
        writer.close()
        assert rows_of(conn_b, table_b) == [b"replayed-in-time"]
    finally:
        conn.close()


class Collector:
    """An exporter that keeps what it is given."""

    def __init__(self) -> None:
        self.exported: list[SequencedExport] = []

    def export(self, exports: Sequence[SequencedExport]) -> None:
        self.exported.extend(exports)


@pytest.fixture
def queue(conn_a) -> Iterator[QueueConfig]:
    config = QueueConfig(table=unique_table("deadlineq"), qid="d", num_buckets=1)
    ExportQueue(conn_a, config).init()
    with ExportQueue(conn_a, config) as q:
        for i in range(3):
            q.add(f"k{i}", {"new": [{"row": f"r{i}", "cf": "f", "cq": "q", "value": f"v{i}"}]}, seq=10 + i)
    yield config
    conn_a.delete_table(config.table)


def test_a_drain_whose_export_would_send_past_the_hold_leaves_the_batch_in_the_queue(conn_a, conn_b, queue,
                                                                                    gateway_b, monkeypatch):
    """B's gateway goes down just after the drain read its batch and comes back past the hold: the export's writes
    wait for it, and would land on B late. They are not sent; the entries stay and the next pass exports them."""
    table = unique_table("deadlinedest")
    conn = patient(gateway_b)
    try:
        exporter = AccumuloExporter(conn, table).ensure_table()
        monkeypatch.setattr(drain_module, "EXPORT_HOLD_SECONDS", HOLD)
        outage = Outage(gateway_b)
        stats = drain_bucket(conn_a, queue, 0, exporter)
        outage.over()
        assert (stats.entries, stats.abandoned, stats.deleted, stats.exported) == (3, 3, 0, 0), stats
        time.sleep(1.0)
        assert rows_of(conn_b, table) == [], "the export was written on B after the hold"
        assert queue_status(conn_a, queue).entries == 3

        monkeypatch.setattr(drain_module, "EXPORT_HOLD_SECONDS", EXPORT_HOLD_SECONDS)
        stats = drain_queue(conn_a, queue, exporter)
        assert (stats.deleted, stats.abandoned) == (3, 0), stats
        assert rows_of(conn_b, table) == [b"r0", b"r1", b"r2"]
        assert queue_status(conn_a, queue).entries == 0
        exporter.close()
    finally:
        conn.close()
        conn_b.delete_table(table, missing_ok=True)


def test_a_relay_whose_copy_would_be_replayed_past_the_hold_reads_the_cell_again(accumulo, conn_a, monkeypatch):
    """A one-shot relay's connection is lost as it flushes its copy, and its gateway comes back past the hold;
    meanwhile another relay moved the outbox cell and a drain exported and deleted it. The replayed copy would put
    the old export back in the queue after a purge's readings: it is not sent, and the cell, read again, is gone."""
    monkeypatch.setattr(relay_module, "RELAY_HOLD_SECONDS", HOLD)
    queue = QueueConfig(table=unique_table("deadlinerq"), qid="r", num_buckets=1)
    ExportQueue(conn_a, queue).init()
    table = unique_table("deadlinerelay")
    RowTransactions(conn_a, table).init()
    gateway = StandaloneGateway(accumulo["a"], accumulo.classpath)
    gateway.start()
    conn = patient(gateway)
    try:
        def commit(tx: Any) -> None:
            tx.put(b"c", b"n", b"1")
            tx.export(queue, "k", {"n": 1})

        txs = RowTransactions(conn_a, table)
        with monkeypatch.context() as m:  # the producer dies before its relay: its outbox cell waits
            m.setattr(txs._relayer, "submit", lambda items, read_at=None: None)
            txs.run("r", commit)
        txs.close()
        assert outbox_status(conn_a, table).cells == 1

        collector = Collector()
        outages: list[Outage] = []
        flush = BatchWriter.flush

        def lost_as_it_flushes(writer: BatchWriter) -> None:
            if writer.table == queue.table and not outages:  # the relay under test flushing its copy
                outages.append(Outage(gateway))  # its connection is lost, its gateway back past the hold
                # meanwhile (through the other gateway): another relay moves the cell, a drain exports, deletes it
                assert relay_table(conn_a, table).relayed == 1
                assert drain_queue(conn_a, queue, collector).deleted == 1
            flush(writer)

        monkeypatch.setattr(BatchWriter, "flush", lost_as_it_flushes)
        stats = relay_table(conn, table)
        assert outages, "the relay never flushed a copy"
        outages[0].over()
        assert queue_status(conn_a, queue).entries == 0, "the old copy came back to the queue after the hold"
        assert (stats.relayed, stats.held, stats.gone) == (0, 1, 1), stats
        assert len(collector.exported) == 1 and outbox_status(conn_a, table).empty
    finally:
        conn.close()
        gateway.stop()
        for name in (queue.table, table):
            conn_a.delete_table(name, missing_ok=True)
