"""Registered destinations are fenced by an epoch, on real clusters: a drain task whose exporter was built before
a registration exports to the new destination once its process has acknowledged it (the registrations are
looked up before batches, not only when a task starts), and a bootstrap waits for every drain process's
acknowledgement instead of a fixed time."""

from __future__ import annotations

import threading

import pytest

from connector.queue import drain_buckets
from connector.queue.destinations import (
    Destination,
    read_acknowledgements,
    read_registrations,
    register_destination,
    unregister_destination,
    wait_for_acknowledgements,
)
from connector.transactions import RowTransactions
from examples.inverted_count_index import actual_index, expected_index

from .conftest import Scenario, unique_table
from .test_bootstrap import commit
from .test_bootstrap_lease import lose_answers


def registration(scenario: Scenario, table: str) -> Destination:
    scenario.conn_b.create_table(table)
    return Destination(f"B/{table}", scenario.b.gateway_options(), table, "difference")


def test_each_registration_raises_the_epoch_and_a_removal_too(scenario):
    queue, conn = scenario.queue, scenario.conn_a
    assert read_registrations(conn, queue).epoch == 0
    first = register_destination(conn, queue, registration(scenario, unique_table("r1")))
    second = register_destination(conn, queue, registration(scenario, unique_table("r2")))
    assert (first, second) == (1, 2)
    assert unregister_destination(conn, queue, f"B/{unique_table('never')}") is False
    assert read_registrations(conn, queue).epoch == 2
    name = read_registrations(conn, queue).destinations[0].name
    assert unregister_destination(conn, queue, name) is True
    assert read_registrations(conn, queue).epoch == 3


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
def test_a_registration_whose_answer_is_lost_is_settled_by_its_epoch(scenario, monkeypatch, applied):
    """A gateway of A killed during the registration's conditional write (the chaos harness kills them): the
    outcome is read back from the epoch, and a write that did not take is sent again; one registration, one
    epoch, either way."""
    queue, conn = scenario.queue, scenario.conn_a
    before = read_registrations(conn, queue).epoch
    lost = lose_answers(monkeypatch, applied)
    table = unique_table("lost")
    assert register_destination(conn, queue, registration(scenario, table)) == before + 1
    assert lost == [queue.layout.config_row]
    after = read_registrations(conn, queue)
    assert after.epoch == before + 1
    assert [d.table for d in after.destinations].count(table) == 1


def test_a_drain_task_built_before_a_registration_exports_to_it_once_its_process_acknowledged(scenario):
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    job = scenario.job()
    exporter = job.exporter()  # a long task's exporter: built once, before the registration
    buckets = list(range(scenario.queue.num_buckets))
    for i in range(5):
        commit(txs, scenario, f"a{i:03d}", i + 1)
    txs.flush()
    drain_buckets(scenario.conn_a, scenario.queue, buckets, exporter, job.settings)
    assert [a.epoch for a in read_acknowledgements(scenario.conn_a, scenario.queue)] == [0]

    second = unique_table("second")
    epoch = register_destination(scenario.conn_a, scenario.queue, registration(scenario, second))
    lines: list[str] = []
    waited = wait_for_acknowledgements(scenario.conn_a, scenario.queue, epoch, say=lines.append)
    assert waited == 1 and lines, "the drain process was not waited for"

    for i in range(5, 10):
        commit(txs, scenario, f"a{i:03d}", i + 1)
    txs.flush()
    drain_buckets(scenario.conn_a, scenario.queue, buckets, exporter, job.settings)  # the same task goes on
    after = {(f"{i + 1:08d}".encode(), f"a{i:03d}".encode()) for i in range(5, 10)}
    assert after <= set(actual_index(scenario.conn_b, second)), "a batch read after the acknowledgement skipped it"
    assert set(actual_index(scenario.conn_b, scenario.index)) == expected_index(scenario.conn_a, scenario.counts)
    txs.close()


def test_a_busy_drain_process_acknowledges_a_registration_at_its_next_lookup(scenario):
    """A process exporting all the time looks the registrations up within REFRESH_SECONDS and says so: the wait
    ends on its acknowledgement, and from then on every batch reaches the new destination."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    job = scenario.job()
    exporter = job.exporter()
    buckets = list(range(scenario.queue.num_buckets))
    stop = threading.Event()
    errors: list[BaseException] = []

    def drain_all_the_time() -> None:
        try:
            k = 0
            while not stop.is_set():
                commit(txs, scenario, f"b{k % 40:03d}", 1 + k % 7)
                txs.flush()
                drain_buckets(scenario.conn_a, scenario.queue, buckets, exporter, job.settings)
                k += 1
        except BaseException as exc:  # noqa: BLE001 - the test asserts on it
            errors.append(exc)

    worker = threading.Thread(target=drain_all_the_time, daemon=True)
    worker.start()
    second = unique_table("busy")
    try:
        while not read_acknowledgements(scenario.conn_a, scenario.queue):
            stop.wait(0.1)
        epoch = register_destination(scenario.conn_a, scenario.queue, registration(scenario, second))
        wait_for_acknowledgements(scenario.conn_a, scenario.queue, epoch)
        assert [a.epoch for a in read_acknowledgements(scenario.conn_a, scenario.queue)] == [epoch]
        marker = 0
        for i in range(3):  # commits after the wait: each reaches the new destination
            commit(txs, scenario, f"late{i}", 50 + i)
            marker += 1
    finally:
        stop.set()
        worker.join(60)
    assert not errors, errors
    txs.flush()
    drain_buckets(scenario.conn_a, scenario.queue, buckets, exporter, job.settings)
    held = set(actual_index(scenario.conn_b, second))
    assert {(f"{50 + i:08d}".encode(), f"late{i}".encode()) for i in range(marker)} <= held
    txs.close()
