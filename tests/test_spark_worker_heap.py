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


def _freeze_counts(env: dict[str, str]) -> list[int]:
    """The freeze count after each of four tasks' calls in a new process with ``env``."""
    import os
    import subprocess
    import sys

    code = ("import gc; from connector.spark.worker_heap import freeze_worker_heap\n"
            "counts, kept = [], []\n"
            "for _ in range(4):\n"
            "    kept.append([[i] for i in range(1000)])\n"
            "    freeze_worker_heap(); counts.append(gc.get_freeze_count())\n"
            "print(counts)")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHON_WORKER_FACTORY_SECRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**clean, **env})
    return eval(out.stdout)  # noqa: S307 - our own subprocess's list of ints


def test_the_heap_is_frozen_at_the_first_two_tasks_only():
    """An object frozen is never collected: a worker that runs for weeks must not freeze each task's leftovers.
    (Spark starts its Python workers with PYTHON_WORKER_FACTORY_SECRET set.)"""
    first, second, third, fourth = _freeze_counts({"PYTHON_WORKER_FACTORY_SECRET": "s"})
    assert 0 < first < second == third == fourth


def test_a_process_that_is_not_a_spark_worker_keeps_its_heap():
    """A reader or a round's work run in the driver (a test, the local engine) must not freeze the driver's heap:
    its objects would never be collected. A CI run's driver had 151,324 objects frozen by a test that read
    partitions in process."""
    assert _freeze_counts({}) == [0, 0, 0, 0]
