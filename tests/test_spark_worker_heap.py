"""Spark's Python workers run our tasks with the heap they started with frozen (connector/spark/worker_heap.py):
Spark's daemon collects garbage after every task, and a frozen heap is not walked (nor copied on write) each
time. On real Spark (local[2])."""

from __future__ import annotations

import gc
from dataclasses import dataclass

import pytest

from connector.counters import FieldCounters
from connector.jobs import DrainError
from connector.jobs.rounds import Round

pytestmark = pytest.mark.spark


@dataclass
class Seen(FieldCounters):
    tasks: int = 0
    frozen: int = 0


def _observe(group_id: int, buckets: tuple[int, ...]) -> Seen:
    return Seen(tasks=1, frozen=int(gc.get_freeze_count() > 0))


def test_round_tasks_run_on_a_frozen_worker_heap(spark):
    from connector.spark.engine import SparkEngine

    groups = tuple((b,) for b in range(6))
    seen = SparkEngine(spark).run(Round(_observe, groups, Seen, DrainError))
    assert seen == Seen(tasks=6, frozen=6)
    assert gc.get_freeze_count() == 0, "the driver's own heap is left alone"
