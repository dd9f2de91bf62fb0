"""The deterministic simulation (integration/sim): its scheduler replays a seed exactly, a crash loses the
process's memory, a thread blocked outside the scheduler is reported; and a seeded run of random schedules of
the real connector code against the simulated clusters passes its oracle."""

from __future__ import annotations

import re
import threading
import time

import pytest

from integration.sim.scheduler import Choices, Deadlock, Scheduler, SimEvent, threading_shim
from integration.sim.shrink import shrink


def _interleaving(seed: int, replay: list[int] | None = None, crash_rate: float = 0.0):
    """Three processes of five calls each (with sleeps); what they saw, in the order they saw it."""
    choices = Choices(seed, replay)
    sched = Scheduler(choices, crash_rate=crash_rate)
    seen: list[tuple[str, int, float]] = []

    def worker(name: str) -> list[int]:
        memory: list[int] = []  # a process's memory: gone when it crashes
        for i in range(5):
            sched.before_call(f"{name}.{i}")
            memory.append(i)
            seen.append((name, i, time.monotonic()))
            time.sleep(0.01 * (i % 3))
        return memory

    procs = [sched.process(name, worker, name) for name in "abc"]
    sched.run()
    return seen, choices.record, procs


def test_a_seed_replays_exactly_and_so_does_its_recorded_list_of_choices():
    first, record, _ = _interleaving(7)
    again, record_again, _ = _interleaving(7)
    replayed, record_replayed, _ = _interleaving(12345, replay=record)
    assert first == again == replayed
    assert record == record_again == record_replayed
    assert any(_interleaving(s)[0] != first for s in range(8, 12)), "other seeds interleave otherwise"
    # the clock is virtual: sleeps cost no real time and advance it exactly
    assert first[-1][2] < 1_000_000.2


def test_an_edited_list_of_choices_still_runs():
    seen, record, _ = _interleaving(3, replay=[99, 0, 5])  # too large: clamped; missing: 0
    assert len(seen) == 15


def test_a_crash_loses_the_process_and_it_never_runs_again():
    for seed in range(50):
        seen, _, procs = _interleaving(seed, crash_rate=0.05)
        crashed = [p for p in procs if p.crashed]
        if crashed:
            break
    else:
        pytest.fail("no crash in 50 seeds at rate 0.05")
    victim = crashed[0]
    assert victim.result is None and victim.error is None, "a crash ends the process, returning nothing"
    calls = [i for name, i, _ in seen if name == victim.name]
    assert calls == list(range(len(calls))) and len(calls) < 5, "nothing of it runs after the crash"
    assert all(p.result == list(range(5)) for p in procs if not p.crashed)


def test_a_thread_blocked_outside_the_scheduler_is_reported_by_name():
    sched = Scheduler(Choices(1), watchdog=0.5)
    lock = threading.Lock()
    lock.acquire()

    def stuck() -> None:
        sched.before_call("scan")
        lock.acquire()  # a real lock: the scheduler cannot see it

    sched.process("blocked-one", stuck)
    with pytest.raises(Deadlock, match="blocked-one"):
        sched.run()
    lock.release()


def test_threads_events_and_conditions_of_the_code_under_test_are_scheduled():
    sched = Scheduler(Choices(4))
    shim = threading_shim(sched)
    order: list[str] = []

    def main() -> None:
        done = SimEvent(sched)
        cond = shim.Condition()
        box: list[int] = []

        def child() -> None:
            time.sleep(5.0)  # virtual: costs nothing
            with cond:
                box.append(1)
                cond.notify_all()
            done.set()

        t = shim.Thread(target=child, name="child")
        t.start()
        with cond:
            assert cond.wait_for(lambda: box, timeout=60)
        assert done.wait(1.0)
        t.join()
        order.append(f"main saw {box} at {time.monotonic() - 1_000_000:.0f} s")

    sched.process("main", main)
    sched.run()
    assert order == ["main saw [1] at 5 s"]


def test_every_live_thread_waiting_is_a_deadlock():
    sched = Scheduler(Choices(2))
    never = SimEvent(sched)
    sched.process("waits-forever", lambda: never.wait())
    with pytest.raises(Deadlock, match="waits-forever"):
        sched.run()


def test_shrinking_keeps_the_fewest_choices_that_still_fail():
    # fails when some value >= 5 comes after a value == 3 somewhere before it
    def fails(choices: list[int]) -> bool:
        return any(choices[j] == 3 and any(c >= 5 for c in choices[j + 1:]) for j in range(len(choices)))

    start = [1, 0, 2, 3, 4, 1, 0, 9, 2, 7, 1]
    best, _ = shrink(start, fails)
    assert fails(best) and len(best) == 2 and best == [3, 5]


#: the seed of the run below: with the swarm's mix its first 40 schedules pass on this tree and run purges, verify
#: --repair, requeues and bootstraps (40 schedules in 200 s on a loaded machine; the run stops at 60 s).
SEED = 46


def test_a_seeded_run_of_the_simulation_passes():
    pytest.importorskip("integration.sim.transport", reason="the simulated clusters are not there yet")
    from integration.sim.__main__ import schedule_seed
    from integration.sim.workload import run_schedule
    deadline = time.monotonic() + 60
    runs = 0
    while time.monotonic() < deadline and runs < 2000:
        outcome = run_schedule(schedule_seed(SEED, runs))
        assert not outcome.failed, (outcome.seed, outcome.violations)
        runs += 1
    assert runs >= 10  # a schedule of the swarm's mix runs a few hundred virtual seconds of a dozen processes


def test_outcomes_count_the_steps_each_connector_error_ended(capsys):
    """``--outcomes``: the steps that ended with each of the connector's errors, over the run's schedules, as
    counted from each schedule's own record; a schedule named for each kind met it."""
    pytest.importorskip("integration.sim.transport", reason="the simulated clusters are not there yet")
    from integration.sim.__main__ import _ENDED_WITH, KIND_CHARS, main, schedule_seed
    from integration.sim.workload import run_schedule

    seed, schedules = 1902, 12
    assert main(["--seed", str(seed), "--schedules", str(schedules), "--outcomes"]) == 0
    out = capsys.readouterr().out
    report = out[out.index("steps ended by the connector's errors: "):].splitlines()
    shown = {}
    for line in report[1:]:
        row = re.fullmatch(r" *(\d+)  (.*)  \(first: schedule (\d+)\)", line)
        if row is None:
            assert line.startswith("passed: "), line
            break
        shown[row[2]] = (int(row[1]), int(row[3]))
    expected: dict[str, list[int]] = {}
    for i in range(schedules):
        outcome = run_schedule(schedule_seed(seed, i))
        for what, n in outcome.counts.items():
            if _ENDED_WITH.match(what):
                kind = re.sub(r"[0-9]+", "N", what)[:KIND_CHARS]
                expected.setdefault(kind, [0, outcome.seed])[0] += n
    assert expected, "twelve schedules of seed 1902 end some steps with refusals and lost connections"
    assert shown == {k: tuple(v) for k, v in expected.items()}
    assert int(report[0].rsplit(" ", 1)[1]) == sum(v[0] for v in expected.values())
