"""The simulation's scheduler runs the code under test as it would run in a process of its own: a clock the code
took at import is virtual in a run, ``threading.local`` storage is per simulated thread, and a whole schedule of
the real connector code replays to the same choices, by seed or by its recorded list."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from integration.sim.scheduler import MONOTONIC_START, Choices, Scheduler


def test_a_clock_taken_as_a_default_argument_at_import_is_virtual_in_a_run() -> None:
    from connector.transactions.relay import Sightings  # its clock defaults to time.monotonic, taken at import

    sched = Scheduler(Choices(1))
    seen: list[float] = []

    def look() -> None:
        sightings = Sightings(1.0)
        time.sleep(30.0)
        seen.append(sightings._clock() - MONOTONIC_START)

    sched.process("relay", look)
    sched.run()
    assert seen and 30.0 <= seen[0] < 30.1, f"Sightings read {seen} virtual seconds: a real clock leaked into the run"
    assert Sightings(1.0)._clock is time.monotonic, "the real clock is back after the run"


def test_thread_local_storage_is_per_simulated_thread() -> None:
    import connector.jobs.local as jobs_local  # holds a module-level threading.local

    sched = Scheduler(Choices(5))
    made: list[Any] = []
    seen: dict[str, tuple[object, object]] = {}

    def worker(name: str) -> None:
        if not made:
            made.append(threading.local())
        local = made[0]
        local.value = name
        jobs_local._running.value = name
        time.sleep(1.0)  # the other thread runs and sets its own
        seen[name] = (local.value, jobs_local._running.value)

    for name in ("a", "b", "c"):
        sched.process(name, worker, name)
    sched.run()
    assert seen == {"a": ("a", "a"), "b": ("b", "b"), "c": ("c", "c")}
    assert type(jobs_local._running) is threading.local, "the module's own object is back after the run"


def test_the_state_of_a_module_level_object_is_per_simulated_thread_too() -> None:
    from connector.accumulo import connection  # _PROPERTY_RACE: one tenacity.Retrying shared by every thread

    shared = connection._PROPERTY_RACE
    sched = Scheduler(Choices(6))
    seen: dict[str, object] = {}

    def worker(name: str) -> None:
        shared._local.mine = name  # where tenacity keeps a call's statistics and state
        time.sleep(1.0)
        seen[name] = shared._local.mine

    for name in ("a", "b"):
        sched.process(name, worker, name)
    sched.run()
    assert seen == {"a": "a", "b": "b"}
    assert type(shared._local) is threading.local


@pytest.mark.parametrize("seed", [3000032, 7000004, 46000000])
def test_a_schedule_of_the_real_code_replays_to_the_same_choices(seed: int) -> None:
    pytest.importorskip("integration.sim.transport", reason="the simulated clusters are not there yet")
    from integration.sim.workload import run_schedule

    first, again = run_schedule(seed), run_schedule(seed)
    replayed = run_schedule(seed, first.choices)
    assert first.choices == again.choices == replayed.choices
    assert first.turns == again.turns == replayed.turns
    assert [v.invariant for v in first.violations] == [v.invariant for v in again.violations] \
        == [v.invariant for v in replayed.violations]


def test_every_module_of_the_code_under_test_waits_on_the_schedulers_threading_in_a_run() -> None:
    """A real ``threading.Event().wait`` in a run blocks every simulated thread for real seconds: the world stands
    still while it lasts (the purge's grace did, so nothing ever ran beside it)."""
    import concurrent.futures
    import sys

    import connector.snapshot.purge  # noqa: F401 - the module that waited for real
    from integration.sim.workload import World, simulated_world

    world = World(Scheduler(Choices(1)))
    with simulated_world(world):
        real = sorted(name for name, module in sys.modules.items()
                      if name.startswith("connector.") and module is not None
                      and (getattr(module, "threading", None) is threading
                           or getattr(module, "ThreadPoolExecutor", None) is concurrent.futures.ThreadPoolExecutor))
    assert real == []


def test_a_run_after_one_that_overran_its_turns_has_a_budget_of_its_own() -> None:
    """The quiescent phase runs after a mix that used all its turns (before, it was crashed at its first turn, and
    the final check compared destinations that were never drained: schedule 1104003026)."""
    sched = Scheduler(Choices(1), max_turns=50)

    def spin() -> None:
        while True:
            time.sleep(0.01)

    sched.process("spinner", spin)
    sched.run()
    assert sched.stats.overrun
    settled: list[int] = []

    def settle() -> None:
        for i in range(10):
            time.sleep(0.01)
            settled.append(i)

    sched.process("quiesce", settle, faults=False)
    sched.run()
    assert settled == list(range(10))
