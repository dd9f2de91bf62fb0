"""What pins a purge's horizon (issue 47, item 1): the watermark knows, per kind of what waits (an outbox cell, a
queue entry, a dead letter, a destination not built yet), the lowest seq and how many, and a background purge
serves each kind's age as ``accumulo_export_purge_horizon_pin_age_seconds{destination, kind}``. On real Accumulo:
a dead letter an hour old pins the horizon as ``kind="dead_letter"`` with its age (a newer queue entry beside it as
``queue_entry``), an outbox cell a SIGKILLed producer left as ``kind="outbox"``; a registered destination not built
yet is the watermark's pin of kind ``unbuilt_destination``, since its registration."""

from __future__ import annotations

import time

import pytest

from connector.cli.metrics import PurgeMetrics
from connector.export.tombstones import prepare_destination
from connector.jobs import LocalEngine, run_drain
from connector.queue import ExportQueue
from connector.queue.destinations import Destination, register_destination
from connector.snapshot import purge as purge_module
from connector.snapshot.auto_purge import BackgroundPurge
from connector.transactions import Pin, queue_watermark
from examples.inverted_count_index import count_update

from .conftest import unique_table
from .test_watermark import commit_and_kill_producer

pytestmark = pytest.mark.cluster

PIN_AGE = "accumulo_export_purge_horizon_pin_age_seconds"


@pytest.fixture(autouse=True)
def short_bound(monkeypatch):
    """Writers held to no bound, so a purge with nothing to delete returns at once (its logic is unchanged)."""
    monkeypatch.setattr(purge_module, "MIN_PURGE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(purge_module, "LATE_WRITE_SECONDS", 0.0)


def _purge_metrics(scenario) -> tuple[str, dict[tuple[str, tuple], float]]:
    """One background purge round of the scenario's index; the destination's name and what it serves."""
    b = scenario.b.gateway_options()
    prepare_destination(scenario.conn_b, scenario.index)  # tombstone mode (the default), as a drain's first write
    purger = BackgroundPurge(scenario.a.gateway_options(), scenario.queue, b, scenario.index, period=3600, grace=0)
    purger.run_once()
    name = f"{b.label}/{scenario.index}"
    assert purger.outcomes == {(name, "nothing"): 1}, purger.outcomes
    return name, {(s.name, tuple(sorted(s.labels.items()))): s.value
                  for family in PurgeMetrics(purger).collect() for s in family.samples}


def _pins(served: dict[tuple[str, tuple], float], name: str) -> dict[str, float]:
    return {dict(labels)["kind"]: value for (metric, labels), value in served.items()
            if metric == PIN_AGE and dict(labels)["destination"] == name}


def test_a_dead_letter_pins_the_horizon_as_kind_dead_letter_with_its_age(scenario):
    q = scenario.queue
    now_us = time.time_ns() // 1000
    hour_ago, ten_minutes_ago = now_us - 3600 * 10**6, now_us - 600 * 10**6
    with ExportQueue(scenario.conn_a, q) as queue:
        queue.add("bad", {"new": "not a list of cells"}, hour_ago)  # the translator refuses it: a dead letter
    run_drain(LocalEngine(), scenario.job())
    with ExportQueue(scenario.conn_a, q) as queue:
        queue.add("waiting", count_update("waiting", None, 1), ten_minutes_ago)  # not drained: a queue entry

    mark = queue_watermark(scenario.conn_a, q)
    assert mark.pins == (Pin("queue_entry", 1, ten_minutes_ago), Pin("dead_letter", 1, hour_ago)), mark
    assert mark.lowest == hour_ago and mark.holder == "dead_letter"
    assert "a dead letter)" in mark.describe(), mark.describe()

    name, served = _purge_metrics(scenario)
    pins = _pins(served, name)
    assert pins["outbox"] == 0, pins  # nothing of that kind waits
    assert abs(pins["dead_letter"] - 3600) < 120 and abs(pins["queue_entry"] - 600) < 120, pins
    assert served[("accumulo_export_purge_horizon_age_seconds", (("destination", name),))] == pins["dead_letter"]


def test_an_outbox_a_stopped_producer_left_pins_the_horizon_as_kind_outbox(scenario, cli_env):
    q = scenario.queue
    seq = commit_and_kill_producer(scenario, cli_env)
    committed_at = time.time()

    mark = queue_watermark(scenario.conn_a, q)
    assert mark.pins == (Pin("outbox", 1, seq),) and mark.holder == "outbox", mark

    name, served = _purge_metrics(scenario)
    pins = _pins(served, name)
    assert pins["dead_letter"] == pins["queue_entry"] == 0, pins
    # the seq is µs of the producer's clock (this host's): its age is how long ago it committed
    assert 0 <= pins["outbox"] <= time.time() - committed_at + 60, pins


def test_a_destination_not_built_yet_is_a_pin_of_its_own_since_its_registration(scenario):
    second = unique_table("second")
    scenario.conn_b.create_table(second)
    name = f"B/{second}"
    registered_at = time.time()
    register_destination(scenario.conn_a, scenario.queue,
                         Destination(name, scenario.b.gateway_options(), second, "difference"))
    mark = queue_watermark(scenario.conn_a, scenario.queue)
    pin = mark.pin("unbuilt_destination")
    # since the registration cell's timestamp: the tablet server's clock, this host's here
    assert pin is not None and pin.count == 1 and pin.lowest is not None, mark
    assert abs(pin.lowest / 1e6 - registered_at) < 30, (pin, registered_at)
    assert mark.pins == (pin,) and mark.holder is None, mark  # nothing waits: no seq holds it
