"""A dead letter older than a destination's bootstrap, re-queued after it (DESIGN.md, "A dead letter older than a
destination's bootstrap"; the simulation's seeds 9 and 45), on real clusters.

An export X is refused into a dead letter; its successor Y (the row deleted) is drained to the first destination
(a tombstone there); a second destination is then registered and bootstrapped: it reads A, where the row is gone,
and writes nothing for it. Once the translator is fixed, X is re-queued and drained: X's commit is already in that
snapshot, so the drain must not export X to it (it would show X's put, which no tombstone hides there), while a
dead letter written after the bootstrap read A still reaches every destination. Producers' clocks are skewed on
purpose: no seq is ever compared with a clock.
"""

from __future__ import annotations

import time
from typing import Any

from connector.export.difference import difference
from connector.jobs import LocalEngine, run_drain
from connector.jobs.bootstrap import run_bootstrap
from connector.queue.dead_letters import dead_letters, requeue_dead_letters
from connector.queue.destinations import Destination, register_destination
from connector.queue.drain import drain_buckets
from connector.queue.errors import QueueConfigError
from connector.transactions import RowTransactions
from examples.inverted_count_index import actual_index, expected_index

from .conftest import Scenario, unique_table
from .test_bootstrap import bootstrap_job, commit

#: the drain's translator with a bug: it refuses an export whose new count is 13 (fixed later: "difference")
REFUSING = "tests.test_requeue_after_bootstrap:refuse_thirteen"
HOUR_US = 3_600_000_000


def test_the_queue_reads_the_family_producers_record_their_tables_in() -> None:
    from connector.queue.requeued import SOURCES_FAMILY as read
    from connector.transactions.layout import SOURCES_FAMILY as written

    assert read == written


def refuse_thirteen(export: Any) -> Any:
    new = export.value.get("new") if isinstance(export.value, dict) else None
    if new and new[0].get("row") == f"{13:08d}":
        raise ValueError("refused: a count of 13")
    return difference(export)


def skewed(offset_us: int) -> Any:
    """A producer's clock ``offset_us`` away from ours."""
    return lambda: time.time_ns() // 1000 + offset_us


def index_of(scenario: Scenario, table: str) -> set[tuple[bytes, bytes]]:
    cells = actual_index(scenario.conn_b, table)
    assert len(cells) == len(set(cells)), "duplicate index cells"
    return set(cells)


def test_a_dead_letter_older_than_a_bootstrap_requeued_after_it_reaches_only_destinations_without_its_commit(
        scenario: Scenario) -> None:
    a, queue = scenario.conn_a, scenario.queue
    ahead = RowTransactions(a, scenario.counts, clock_us=skewed(HOUR_US))  # a producer an hour ahead
    behind = RowTransactions(a, scenario.counts, clock_us=skewed(-24 * HOUR_US))  # another a day behind
    commit(ahead, scenario, "apple", 13)  # X: refused into a dead letter
    commit(behind, scenario, "kiwi", 2)
    ahead.flush()
    behind.flush()
    run_drain(LocalEngine(1), scenario.job(translator=REFUSING))
    assert [d.reason for d in dead_letters(a, queue)] == ["untranslatable: ValueError: refused: a count of 13"]
    commit(behind, scenario, "apple", 0)  # Y, X's successor (the row deleted), drained to the first destination
    behind.flush()
    run_drain(LocalEngine(1), scenario.job(translator=REFUSING))
    assert index_of(scenario, scenario.index) == {(f"{2:08d}".encode(), b"kiwi")}

    # a long-running drain task of another process view: its exporter is built before the bootstrap
    long_task = scenario.job(translator="difference").exporter()
    long_task.current()  # it looked the registrations up once, before any of what follows
    second = unique_table("second")
    scenario.conn_b.create_table(second)
    register_destination(a, queue, Destination(f"B/{second}", scenario.b.gateway_options(), second, "difference"))
    run_bootstrap(LocalEngine(1), bootstrap_job(scenario, second))
    assert index_of(scenario, second) == expected_index(a, scenario.counts)

    # after the bootstrap read A: a commit refused into a dead letter must still reach both destinations
    commit(behind, scenario, "pear", 13)
    behind.flush()
    run_drain(LocalEngine(1), scenario.job(translator=REFUSING))
    assert len(list(dead_letters(a, queue))) == 2

    # the translator fixed: both dead letters re-queued and drained (by the task built before the bootstrap)
    assert requeue_dead_letters(a, queue) == 2
    drain_buckets(a, queue, range(queue.num_buckets), long_task)
    assert scenario.depth() == 0
    expected = expected_index(a, scenario.counts)
    assert expected == {(f"{2:08d}".encode(), b"kiwi"), (f"{13:08d}".encode(), b"pear")}
    assert index_of(scenario, scenario.index) == expected
    assert index_of(scenario, second) == expected, "the re-queued export older than the bootstrap shows there"
    ahead.close()
    behind.close()


def dead_letter_with_a_drained_successor(scenario: Scenario, txs: RowTransactions) -> None:
    """X (apple = 13) refused into a dead letter, then its successor (apple deleted) drained to the index."""
    commit(txs, scenario, "apple", 13)
    txs.flush()
    run_drain(LocalEngine(1), scenario.job(translator=REFUSING))
    commit(txs, scenario, "apple", 0)
    txs.flush()
    run_drain(LocalEngine(1), scenario.job(translator=REFUSING))
    assert [d.reason for d in dead_letters(scenario.conn_a, scenario.queue)] == [
        "untranslatable: ValueError: refused: a count of 13"]


def test_the_destination_a_drain_writes_itself_is_left_out_too_when_it_was_bootstrapped_unregistered(
        scenario: Scenario) -> None:
    """The procedure's order (the stream into the new table first, then its bootstrap, no registration) and the
    cut-over's (the new table becomes the stream's own destination): the drain's own table is left out as well."""
    txs = RowTransactions(scenario.conn_a, scenario.counts, clock_us=skewed(-HOUR_US))
    dead_letter_with_a_drained_successor(scenario, txs)
    new = unique_table("new")
    stream_task = scenario.job(dest_table=new, translator="difference", create_dest_table=True).exporter()
    stream_task.current()  # built, and its registrations looked up, before the bootstrap
    run_bootstrap(LocalEngine(1), bootstrap_job(scenario, new))
    assert requeue_dead_letters(scenario.conn_a, scenario.queue) == 1
    drain_buckets(scenario.conn_a, scenario.queue, range(scenario.queue.num_buckets), stream_task)
    assert scenario.depth() == 0
    assert index_of(scenario, new) == expected_index(scenario.conn_a, scenario.counts) == set()
    txs.close()


class AfterFirstFlush:
    """A connection whose batch writers run ``hook`` once, right after their first flush returned: inside a
    requeue, its records durable and its entries not yet written."""

    def __init__(self, conn: Any, hook: Any) -> None:
        self._conn, self._hook = conn, hook
        self.ran: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def batch_writer(self, table: str, **options: Any) -> Any:
        writer = self._conn.batch_writer(table, **options)
        flush = writer.flush

        def hooked() -> Any:
            out = flush()
            if not self.ran:
                self.ran.append(self._hook())
            return out

        writer.flush = hooked
        return writer


def test_a_bootstrap_run_inside_a_requeue_is_left_out_of_the_entry_that_requeue_writes_back(scenario: Scenario) -> None:
    """A requeue that listed its dead letters, then stalled while a destination was registered and bootstrapped
    whole (final check included), writes its entries after: the drains still leave them out there."""
    txs = RowTransactions(scenario.conn_a, scenario.counts, clock_us=skewed(HOUR_US))
    dead_letter_with_a_drained_successor(scenario, txs)
    second = unique_table("second")
    scenario.conn_b.create_table(second)
    register_destination(scenario.conn_a, scenario.queue,
                         Destination(f"B/{second}", scenario.b.gateway_options(), second, "difference"))
    racing = AfterFirstFlush(scenario.conn_a, lambda: run_bootstrap(LocalEngine(1), bootstrap_job(scenario, second)))
    assert requeue_dead_letters(racing, scenario.queue) == 1  # type: ignore[arg-type]
    assert len(racing.ran) == 1 and racing.ran[0].check is not None, "the bootstrap did not run inside the requeue"
    run_drain(LocalEngine(1), scenario.job(translator="difference"))
    assert scenario.depth() == 0
    assert index_of(scenario, second) == index_of(scenario, scenario.index) == set()
    txs.close()


def test_a_queue_table_split_inside_the_queues_records_is_refused_before_anything_is_requeued(
        scenario: Scenario) -> None:
    """The rule compares two timestamps of the tablet holding the queue's records; split there, they come from
    two tablets (maybe two servers' clocks): refused in one line, naming the split and the fix."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    dead_letter_with_a_drained_successor(scenario, txs)
    split = scenario.queue.layout.dead_letter_prefix
    scenario.conn_a.add_splits(scenario.queue.table, [split])
    try:
        requeue_dead_letters(scenario.conn_a, scenario.queue)
    except QueueConfigError as exc:
        message = str(exc)
    else:
        raise AssertionError("the requeue was not refused")
    assert "\n" not in message and repr(split) in message and "merge" in message, message
    assert len(list(dead_letters(scenario.conn_a, scenario.queue))) == 1 and scenario.depth() == 0
    txs.close()


def test_an_export_committed_before_the_snapshot_and_dead_lettered_during_the_bootstrap_is_left_out(
        scenario: Scenario) -> None:
    """X committed before the bootstrap read A, but relayed only by the bootstrap (its producer's relay is late) and
    refused into a dead letter during the final check, after the first reading of A: the second reading (after the
    settle, before the verify) is newer than its dead letter, so the drains leave it out there."""
    late = RowTransactions(scenario.conn_a, scenario.counts, relay_delay=3600.0, clock_us=skewed(HOUR_US))
    prompt = RowTransactions(scenario.conn_a, scenario.counts, clock_us=skewed(-HOUR_US))
    commit(late, scenario, "apple", 13)  # X: its outbox cell waits
    commit(prompt, scenario, "apple", 0)  # its successor, relayed at once and drained to the index
    prompt.flush()
    refusing = scenario.job(translator=REFUSING).exporter()
    drain_buckets(scenario.conn_a, scenario.queue, range(scenario.queue.num_buckets), refusing)  # no relay
    assert not list(dead_letters(scenario.conn_a, scenario.queue)) and scenario.depth() == 0

    second = unique_table("second")
    scenario.conn_b.create_table(second)
    register_destination(scenario.conn_a, scenario.queue,
                         Destination(f"B/{second}", scenario.b.gateway_options(), second, REFUSING))
    drained: list[int] = []

    def during_the_final_check(line: str) -> None:
        if line.startswith("final check: waiting") and not drained:  # X is queued: the bootstrap relayed it
            drained.append(drain_buckets(scenario.conn_a, scenario.queue, range(scenario.queue.num_buckets),
                                         refusing).dead_lettered)

    run_bootstrap(LocalEngine(1), bootstrap_job(scenario, second), progress=during_the_final_check)
    assert drained == [1], "X was not dead-lettered during the final check"
    register_destination(scenario.conn_a, scenario.queue,  # its translator fixed too
                         Destination(f"B/{second}", scenario.b.gateway_options(), second, "difference"))
    assert requeue_dead_letters(scenario.conn_a, scenario.queue) == 1
    run_drain(LocalEngine(1), scenario.job(translator="difference"))
    assert scenario.depth() == 0
    assert index_of(scenario, second) == index_of(scenario, scenario.index) == set()
    late.close()
    prompt.close()


def test_a_requeued_export_of_a_producer_table_the_bootstrap_did_not_read_reaches_it(scenario: Scenario) -> None:
    """A queue fed by two producer tables, a destination bootstrapped from one: an export of the other is in no
    snapshot of it, so it is never left out, however old its dead letter (the queue's recorded sources say so)."""
    other = unique_table("other")
    RowTransactions(scenario.conn_a, other).init()
    others = RowTransactions(scenario.conn_a, other, clock_us=skewed(HOUR_US))
    commit(others, scenario, "zebra", 13)  # refused into a dead letter, long before the bootstrap
    others.flush()
    run_drain(LocalEngine(1), scenario.job(translator=REFUSING))
    assert len(list(dead_letters(scenario.conn_a, scenario.queue))) == 1
    second = unique_table("second")
    run_bootstrap(LocalEngine(1), bootstrap_job(scenario, second, other_feeders="keep"))
    assert requeue_dead_letters(scenario.conn_a, scenario.queue) == 1
    exporter = scenario.job(dest_table=second, translator="difference").exporter()  # the drain into it
    drain_buckets(scenario.conn_a, scenario.queue, range(scenario.queue.num_buckets), exporter)
    assert index_of(scenario, second) == {(f"{13:08d}".encode(), b"zebra")}
    others.close()
