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
from connector.transactions import RowTransactions
from examples.inverted_count_index import actual_index, expected_index

from .conftest import Scenario, unique_table
from .test_bootstrap import bootstrap_job, commit

#: the drain's translator with a bug: it refuses an export whose new count is 13 (fixed later: "difference")
REFUSING = "tests.test_requeue_after_bootstrap:refuse_thirteen"
HOUR_US = 3_600_000_000


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
