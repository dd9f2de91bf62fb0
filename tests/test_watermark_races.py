"""The watermark where it could pass an export that still waits, on real clusters: a requeue run exactly between
the queue scan and the dead-letter scan (the one move against the order of the scans), a queue that does not
exist or is given with the wrong bucket count, a registered destination no bootstrap has built yet; and the
gauge, which serves what the last computation found, on a live stream."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from connector.cli.metrics import drain_metrics
from connector.jobs import LocalEngine, run_drain
from connector.jobs.bootstrap import run_bootstrap
from connector.queue import ExportQueue, QueueConfig
from connector.queue.dead_letters import requeue_dead_letters
from connector.queue.destinations import Destination, register_destination
from connector.queue.errors import QueueConfigError
from connector.queue.layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from connector.snapshot import state as bootstrap_state
from connector.snapshot.state import BootstrapState, Plan
from connector.transactions import RowTransactions, WaitTimeout, queue_watermark, wait_for_seq
from connector.transactions import watermark as watermark_module
from examples.inverted_count_index import count_update

from .conftest import unique_table
from .test_bootstrap import Stream, bootstrap_job, commit, drained
from .test_metrics import free_port, scrape

GAUGE = "accumulo_export_destination_watermark_seq"


class AroundTheQueueScan:
    """A connection that runs ``before`` right before the watermark's first scan of the queue's entries and
    ``after`` right after it ended (before the scan of the dead letters that follows it): a window between two
    scans, made certain."""

    def __init__(self, conn: Any, queue: QueueConfig, before: Callable[[], Any] = lambda: None,
                 after: Callable[[], Any] = lambda: None) -> None:
        self._conn, self._queue, self._before, self._after = conn, queue, before, after
        self.ran: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def scan_batches(self, table: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if self.ran or table != self._queue.table or kwargs.get("columns") != [(ENTRY_FAMILY, ENTRY_QUALIFIER)]:
            return self._conn.scan_batches(table, *args, **kwargs)
        self.ran.append(self._before())
        return self._then_after(self._conn.scan_batches(table, *args, **kwargs))

    def _then_after(self, pages: Iterator[Any]) -> Iterator[Any]:
        yield from pages
        self.ran.append(self._after())


def test_a_requeue_between_the_queue_scan_and_the_dead_letter_scan_does_not_pass_the_entry(scenario):
    q = scenario.queue
    with ExportQueue(scenario.conn_a, q) as queue:
        queue.add("bad", {"new": "not a list of cells"}, 200)  # the translator refuses it: a dead letter
        queue.add("ok", count_update("ok", None, 1), 300)
    run_drain(LocalEngine(), scenario.job())
    assert queue_watermark(scenario.conn_a, q).dead_letters == 1

    racing = AroundTheQueueScan(scenario.conn_a, q, after=lambda: requeue_dead_letters(scenario.conn_a, q))
    mark = queue_watermark(racing, q)  # type: ignore[arg-type]
    assert racing.ran == [None, 1], "the requeue did not run inside the computation"
    assert mark.lowest == 200 and not mark.reached(200), f"the watermark passed the requeued entry: {mark}"
    with pytest.raises(WaitTimeout, match="1 queue entries not drained"):  # it is an entry again now
        wait_for_seq(scenario.conn_a, q, 200, timeout=0.5)


def test_an_entry_dead_lettered_and_requeued_within_one_computation_does_not_pass(scenario):
    q = scenario.queue
    with ExportQueue(scenario.conn_a, q) as queue:
        queue.add("bad", {"new": "not a list of cells"}, 200)  # the translator refuses it: a dead letter
    # the drain sets it aside before the queue scan reaches it; a requeue puts it back before the dead letters
    # are scanned again: it is in neither scan
    racing = AroundTheQueueScan(scenario.conn_a, q, before=lambda: run_drain(LocalEngine(), scenario.job()),
                                after=lambda: requeue_dead_letters(scenario.conn_a, q))
    mark = queue_watermark(racing, q)  # type: ignore[arg-type]
    assert len(racing.ran) == 2 and racing.ran[1] == 1, racing.ran
    assert mark.lowest == 200 and not mark.reached(200), f"the watermark passed the requeued entry: {mark}"


def test_a_queue_that_is_not_the_stored_one_is_refused_in_one_line(scenario):
    q = scenario.queue
    started = time.monotonic()
    unknown = QueueConfig(table=q.table, qid="rwy", num_buckets=16)
    for call in (lambda: wait_for_seq(scenario.conn_a, unknown, 10**15, timeout=5),
                 lambda: queue_watermark(scenario.conn_a, unknown)):
        with pytest.raises(QueueConfigError) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message and "'rwy'" in message and f"did you mean queue {q.qid!r}" in message, message
    with pytest.raises(QueueConfigError, match=r"table 'exports_nowhere' does not exist"):
        wait_for_seq(scenario.conn_a, QueueConfig(table="exports_nowhere", qid=q.qid, num_buckets=16), 1, timeout=5)
    wrong = QueueConfig(table=q.table, qid=q.qid, num_buckets=q.num_buckets + 3)
    with pytest.raises(QueueConfigError, match=f"initialised with buckets {q.num_buckets}, not {q.num_buckets + 3}"):
        wait_for_seq(scenario.conn_a, wrong, 1, timeout=5)
    assert time.monotonic() - started < 5, "refused only after waiting"
    assert wait_for_seq(scenario.conn_a, q, 1, timeout=5).reached(1)  # the right one is read


def test_the_bootstrap_cells_the_watermark_reads_are_the_bootstrap_states(scenario):
    assert (watermark_module.BOOTSTRAP_FAMILY, watermark_module.BOOTSTRAP_PLAN, watermark_module.BOOTSTRAP_LEASE,
            watermark_module.BOOTSTRAP_CLOCK) == (bootstrap_state.STATE_FAMILY, bootstrap_state.PLAN,
                                                  bootstrap_state.LEASE, bootstrap_state.CLOCK)


def test_a_registered_destination_holds_the_watermark_until_a_bootstrap_of_it_finished(scenario):
    q = scenario.queue
    second = unique_table("second")
    scenario.conn_b.create_table(second)
    name = f"B/{second}"
    register_destination(scenario.conn_a, q, Destination(name, scenario.b.gateway_options(), second, "difference"))
    with pytest.raises(WaitTimeout, match=f"destination {name}: registered, and no bootstrap of it finished"):
        wait_for_seq(scenario.conn_a, q, 1, timeout=0.5)
    mark = queue_watermark(scenario.conn_a, q)
    assert [u.destination for u in mark.unbuilt] == [name] and mark.lowest is None and not mark.reached(1), mark

    state = BootstrapState(scenario.conn_a, q, name)  # a bootstrap that planned and was killed
    state.acquire()
    state.server_time_ms()
    state.start(Plan(scenario.counts, "examples.inverted_count_index:snapshot", (), 0))
    state.release()
    with pytest.raises(WaitTimeout, match=f"destination {name}: bootstrap not finished"):
        wait_for_seq(scenario.conn_a, q, 1, timeout=0.5)
    state.acquire()
    state.clear()
    state.release()

    txs = RowTransactions(scenario.conn_a, scenario.counts)
    seq = commit(txs, scenario, "built", 4)
    txs.close()
    run_bootstrap(LocalEngine(), bootstrap_job(scenario, second, final_check=False))
    run_drain(LocalEngine(), scenario.job())
    mark = wait_for_seq(scenario.conn_a, q, seq, timeout=30)
    assert mark.unbuilt == () and mark.reached(seq), mark


def test_the_gauge_serves_the_last_computation_on_a_live_stream_even_when_lower(scenario):
    stream = Stream(scenario, scenario.index)
    metrics = drain_metrics(free_port(), scenario.job())
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    try:
        seqs = [commit(txs, scenario, f"w{n}", n) for n in range(1, 9)]
        txs.flush()
        drained(scenario)
        assert gauge_reaches(metrics.port, lambda v: v >= seqs[-1]), "the gauge stayed below the last commit"

        low = seqs[0] - 10  # a refused export below every commit: a dead letter holds the watermark at low - 1
        with ExportQueue(scenario.conn_a, scenario.queue) as queue:
            queue.add("bad", {"new": "not a list of cells"}, low)
        assert gauge_reaches(metrics.port, lambda v: v == low - 1), "the gauge did not go down to the dead letter"
    finally:
        metrics.close()
        stream.close()
        txs.close()


def gauge_reaches(port: int | None, wanted: Any, seconds: float = 60) -> bool:
    """Whether the watermark gauge served on ``port`` shows a value ``wanted`` accepts within ``seconds``."""
    assert port is not None
    deadline = time.monotonic() + seconds
    seen: list[float] = []
    while time.monotonic() < deadline:
        values = [v for (name, _), v in (scrape(port) or {}).items() if name == GAUGE]
        seen = values or seen
        if values and all(wanted(v) for v in values):
            return True
        time.sleep(0.5)
    print(f"last gauge values: {seen}")
    return False


class FlushHook:
    """A connection that runs ``hook`` once, right after the ``nth`` flush of its batch writers returned (counted
    over all of them): a requeue's window between writing its entries back and deleting its dead letters, made
    certain."""

    def __init__(self, conn: Any, nth: int, hook: Callable[[], Any]) -> None:
        self._conn, self._nth, self._hook = conn, nth, hook
        self.ran: list[Any] = []
        self._flushes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def batch_writer(self, table: str, **options: Any) -> Any:
        writer = self._conn.batch_writer(table, **options)
        flush = writer.flush

        def hooked_flush(*args: Any, **kwargs: Any) -> Any:
            out = flush(*args, **kwargs)
            self._flushes += 1
            if self._flushes == self._nth and not self.ran:
                self.ran.append(self._hook())
            return out

        writer.flush = hooked_flush
        return writer


def test_a_requeue_never_deletes_the_dead_letter_a_drain_wrote_again_in_its_window(scenario):
    """The simulation's seed 4 (schedule 4000931): a requeue wrote the entry back; before it deleted the dead
    letter, a drain refused the entry again and wrote a new dead letter of the same row; the requeue's deletes, at
    the server's time, removed that one too. The export was gone for good and ``wait`` returned for it."""
    from connector.queue.dead_letters import dead_letters

    q = scenario.queue
    with ExportQueue(scenario.conn_a, q) as queue:
        queue.add("bad", {"new": "not a list of cells"}, 200)  # the translator refuses it: a dead letter
    run_drain(LocalEngine(), scenario.job())
    assert [d.row for d in dead_letters(scenario.conn_a, q)] != []

    def drain_again() -> int:
        time.sleep(0.01)  # the new dead letter gets a later server time than the old one
        return run_drain(LocalEngine(), scenario.job()).dead_lettered

    racing = FlushHook(scenario.conn_a, 2, drain_again)  # after the entries' flush, before the deletes
    assert requeue_dead_letters(racing, q) == 1  # type: ignore[arg-type]
    assert racing.ran == [1], "the drain did not run inside the requeue's window"
    assert len(list(dead_letters(scenario.conn_a, q))) == 1, "the dead letter written meanwhile was deleted"
    mark = queue_watermark(scenario.conn_a, q)
    assert mark.dead_letters == 1 and not mark.reached(200), mark
