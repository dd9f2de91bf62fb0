"""The bound writers are held to, on which a tombstone purge relies (connector/snapshot/purge.py, DESIGN.md: "The
purge's bound"): the gateway's writers time out instead of retrying for ever, and a drain does not delete a batch
it held longer than ``EXPORT_HOLD_SECONDS`` since reading it (nor export one read longer ago): its entries stay in
the queue, to be read again. On real Accumulo."""

from __future__ import annotations

import importlib
import time
from collections.abc import Sequence

import pyarrow as pa
import pytest

from connector.accumulo.writer import EXPORT_HOLD_SECONDS, MIN_PURGE_GRACE_SECONDS, WRITER_TIMEOUT_SECONDS
from connector.export import SequencedExport
from connector.export.core import EntryFailure
from connector.queue import ExportQueue, QueueConfig
from connector.queue import drain as drain_module
from connector.queue.dead_letters import dead_letters
from connector.queue.drain import drain_bucket, drain_queue
from connector.snapshot.purge import DEFAULT_GRACE_SECONDS

from .conftest import unique_table

pytestmark = pytest.mark.cluster


def test_the_bounds_leave_a_purge_room_for_two_late_writes():
    assert EXPORT_HOLD_SECONDS > WRITER_TIMEOUT_SECONDS > 0
    assert MIN_PURGE_GRACE_SECONDS == 2 * (EXPORT_HOLD_SECONDS + WRITER_TIMEOUT_SECONDS) <= DEFAULT_GRACE_SECONDS


def test_the_gateways_writers_time_out_within_the_bound(accumulo, conn_b):
    """Accumulo's BatchWriterConfig.setTimeout, through the WriterOptions' timeoutMs the gateway honours: a writer
    given no bound gets the writers' bound; a connection's shorter server_wait stays, a longer one is cut."""
    table = unique_table("bounded")
    conn_b.create_table(table)
    try:
        bound = round(WRITER_TIMEOUT_SECONDS * 1000)
        with conn_b.batch_writer(table) as writer:
            assert writer._options.timeoutMs == bound
        for server_wait, expected in ((30.0, 30_000), (10 * WRITER_TIMEOUT_SECONDS, bound)):
            conn = accumulo["b"].connect(server_wait=server_wait)
            try:
                with conn.batch_writer(table) as writer:
                    assert writer._options.timeoutMs == expected
            finally:
                conn.close()
        with conn_b.batch_writer(table, timeout_ms=0) as writer:  # asked for no bound: a write no purge relies on
            assert writer._options.timeoutMs == 0
    finally:
        conn_b.delete_table(table)


class SlowExporter:
    """Takes ``delay`` seconds over each export (a writer stuck on a tablet server, a paused process)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.exported: list[SequencedExport] = []

    def export(self, exports: Sequence[SequencedExport]) -> None:
        time.sleep(self.delay)
        self.exported.extend(exports)


@pytest.fixture
def queue(conn_a):
    config = QueueConfig(table=unique_table("holdq"), qid="h", num_buckets=1)
    ExportQueue(conn_a, config).init()
    with ExportQueue(conn_a, config) as q:
        for i in range(3):
            q.add(f"k{i}", {"n": i}, seq=10 + i)
    yield config
    conn_a.delete_table(config.table)


def _left(conn, config: QueueConfig) -> int:
    return ExportQueue(conn, config).status().entries


def test_a_batch_whose_export_outlasts_the_hold_bound_is_left_in_the_queue(conn_a, queue, monkeypatch):
    monkeypatch.setattr(drain_module, "EXPORT_HOLD_SECONDS", 0.3)
    slow = SlowExporter(0.6)
    stats = drain_bucket(conn_a, queue, 0, slow)
    assert (stats.entries, stats.abandoned, stats.deleted) == (3, 3, 0)
    assert len(slow.exported) == 3 and _left(conn_a, queue) == 3, "exported, but not deleted: read again later"
    fast = SlowExporter(0.0)
    stats = drain_queue(conn_a, queue, fast)
    assert (stats.deleted, stats.abandoned, len(fast.exported)) == (3, 0, 3)
    assert _left(conn_a, queue) == 0


def test_a_batch_read_longer_ago_than_the_bound_is_not_exported(conn_a, queue, monkeypatch):
    """The hold counts from the read (a page waiting behind a slow batch in the read-ahead), not from the export."""
    monkeypatch.setattr(drain_module, "EXPORT_HOLD_SECONDS", 0.3)
    slow = SlowExporter(0.6)
    stats = drain_bucket(conn_a, queue, 0, slow, batch_size=1, settings=drain_module.DrainSettings(buffer_bytes=1))
    # the first batch is exported (too slowly: not deleted); the next two were read before it and wait too long
    assert (stats.entries, stats.abandoned, stats.deleted, len(slow.exported)) == (3, 3, 0, 1), stats
    assert _left(conn_a, queue) == 3


class SlowRefusingExporter:
    """Takes ``delay`` seconds over each batch, then refuses every export of it (an untranslatable value)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def export_batch(self, exports: pa.RecordBatch, **serializers: str) -> list[EntryFailure]:
        time.sleep(self.delay)
        return [EntryFailure(i, "translation", "refused") for i in range(exports.num_rows)]

    def export(self, exports: Sequence[SequencedExport]) -> None:
        raise AssertionError("export_batch is the drain's path")


def test_a_batch_held_over_the_bound_writes_no_dead_letter(conn_a, queue, monkeypatch):
    """A dead letter is a write of a read export too: one written after the bound could bring back an entry
    another drain exported and deleted meanwhile, after a purge's grace (the simulation's schedule 1201007526: a
    drain held an entry 30 s, another exported and deleted it, a purge then deleted the newer tombstone above it,
    and the late dead letter, requeued, wrote the old value back for good). So it is left in the queue, to be read
    again, like a batch whose export returned late."""
    monkeypatch.setattr(drain_module, "EXPORT_HOLD_SECONDS", 0.3)
    stats = drain_bucket(conn_a, queue, 0, SlowRefusingExporter(0.6))
    assert (stats.entries, stats.abandoned, stats.dead_lettered, stats.deleted) == (3, 3, 0, 0), stats
    assert list(dead_letters(conn_a, queue)) == [], "no dead letter written after the bound"
    assert _left(conn_a, queue) == 3
    stats = drain_bucket(conn_a, queue, 0, SlowRefusingExporter(0.0))  # in time: dead-lettered, then deleted
    assert (stats.abandoned, stats.dead_lettered, stats.deleted) == (0, 3, 3), stats
    assert len(list(dead_letters(conn_a, queue))) == 3 and _left(conn_a, queue) == 0


def test_a_requeue_writes_back_only_the_dead_letters_still_there_when_it_writes(conn_a, queue, monkeypatch):
    """A requeue's entries are copies of the dead letters it read: held like every writer of a read export. One
    that stalled after listing them (here: while it waited for the drains' acknowledgements) while another
    requeue moved them back and a drain exported and deleted them, wrote them back all the same, after a purge's
    grace: the old value came back for good (the simulation's schedule 1604000089: four requeues at once). It
    reads them again and writes back, within the bound, only those still there."""
    from connector.queue.dead_letters import requeue_dead_letters
    dead_letters_module = importlib.import_module("connector.queue.dead_letters")  # the package exports a function
    assert drain_bucket(conn_a, queue, 0, SlowRefusingExporter(0.0)).dead_lettered == 3
    real_wait = dead_letters_module.wait_for_acknowledgements

    def meanwhile(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        real_wait(*args, **kwargs)
        monkeypatch.setattr(dead_letters_module, "wait_for_acknowledgements", real_wait)
        assert requeue_dead_letters(conn_a, queue) == 3  # another requeue moves them back
        assert drain_bucket(conn_a, queue, 0, SlowExporter(0.0)).deleted == 3  # a drain exports and deletes them

    monkeypatch.setattr(dead_letters_module, "wait_for_acknowledgements", meanwhile)
    assert requeue_dead_letters(conn_a, queue) == 0
    assert _left(conn_a, queue) == 0 and list(dead_letters(conn_a, queue)) == []
