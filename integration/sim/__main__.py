"""``python -m integration.sim --seed N --minutes M [--schedules K] [--first I]``: run the deterministic simulation.

Schedule i of a run has its own seed, ``N * 1_000_000 + i``, printed with any failure; ``--replay SEED`` runs
that one schedule again with a trace of every turn (``--choices 3,0,1,...`` runs a given list of choices, such as
a shrunk one). Prints the schedules run each second; on a failure, the schedule's seed, the invariant broken and
the schedule shrunk to the fewest choices (its trace and its choices), then exits 1. ``--outcomes`` also prints, at
the end, how many steps of the processes ended with each of the connector's own errors (not violations: refusals,
bounds run out, lost connections), with a schedule that met each: how a step that should have gone on shows.
"""

from __future__ import annotations

import argparse
import gc
import logging
import re
import sys
import time
from collections import Counter

from .shrink import shrink
from .workload import Outcome, run_schedule


def schedule_seed(seed: int, i: int) -> int:
    return seed * 1_000_000 + i


def describe(outcome: Outcome) -> str:
    return "; ".join(f"{v.invariant}: {v.detail}" for v in outcome.violations)


def print_trace(outcome: Outcome) -> None:
    for event in outcome.trace:
        print(f"  turn {event.turn:5d}  t={event.now:8.3f}s  {event.thread:<12} {event.what}")


def shrunk(outcome: Outcome, budget: float) -> tuple[Outcome, list[int]]:
    """The failing schedule shrunk to the fewest choices that still break the same invariant first (the first
    one broken says the most: a stale cell seen as it was written, before the exact check at the end), replayed
    with a trace."""
    first = outcome.violations[0].invariant

    def fails(choices: list[int]) -> bool:
        again = run_schedule(outcome.seed, choices)
        return bool(again.violations) and again.violations[0].invariant == first

    best, runs = shrink(outcome.choices, fails, budget_seconds=budget)
    print(f"shrunk from {len(outcome.choices)} choices to {len(best)} in {runs} runs", flush=True)
    return run_schedule(outcome.seed, best, trace=True), best


#: a step that ended with one of the connector's errors, as ``guarded`` notes it: "<process>: <Error>: <message>"
_ENDED_WITH = re.compile(r"^[\w/ .-]+: \w+(Error|Exception): ")


#: how much of a blanked message names its kind (a note cut at 120 characters before its numbers were blanked
#: would otherwise make two kinds of one)
KIND_CHARS = 100


class Outcomes:
    """How many steps ended with each of the connector's errors, over a run's schedules: the message with its
    numbers blanked (``N``), and the first schedule that met it."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.first: dict[str, int] = {}

    def add(self, outcome: Outcome) -> None:
        for what, n in outcome.counts.items():
            if _ENDED_WITH.match(what):
                kind = re.sub(r"\d+", "N", what)[:KIND_CHARS]  # the note keeps 120 characters of the message
                self.counts[kind] += n
                self.first.setdefault(kind, outcome.seed)

    def report(self) -> str:
        lines = [f"{n:7d}  {kind}  (first: schedule {self.first[kind]})" for kind, n in self.counts.most_common()]
        return "\n".join([f"steps ended by the connector's errors: {self.counts.total()}", *lines])


def report_failure(outcome: Outcome, budget: float) -> None:
    print(f"FAILED: schedule seed {outcome.seed}: {describe(outcome)}", flush=True)
    small, best = shrunk(outcome, budget)
    print(f"shrunk schedule (seed {small.seed}, {len(best)} choices, {small.turns} turns): "
          f"{describe(small) or 'passed on replay?'}")
    print_trace(small)
    print(f"choices: {','.join(map(str, best))}")
    print(f"replay: python -m integration.sim --replay {small.seed} --choices {','.join(map(str, best))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.sim", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="the run's seed (schedule i: seed * 1e6 + i)")
    parser.add_argument("--minutes", type=float, default=1.0, help="how long to run (default 1)")
    parser.add_argument("--schedules", type=int, default=None, help="stop after this many schedules")
    parser.add_argument("--first", type=int, default=0, help="begin at this schedule of the seed (default 0): "
                        "two processes share one seed's schedules")
    parser.add_argument("--replay", type=int, default=None, metavar="SEED", help="run one schedule, traced")
    parser.add_argument("--choices", default=None, help="with --replay: the list of choices to replay")
    parser.add_argument("--keep-going", action="store_true", help="note each failing schedule and go on")
    parser.add_argument("--shrink", action="store_true", help="with --replay SEED: shrink that failing schedule")
    parser.add_argument("--shrink-seconds", type=float, default=300.0, help="time given to shrinking a failure")
    parser.add_argument("--outcomes", action="store_true", help="at the end, count the steps each of the "
                        "connector's errors ended (refusals, bounds, lost connections), with a schedule of each")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    gc.freeze()  # what the imports made lives for good: the collector need not look at it again (~2% of a run)

    if args.replay is not None and args.shrink:
        outcome = run_schedule(args.replay)
        if not outcome.failed:
            print(f"schedule seed {args.replay} passed")
            return 0
        report_failure(outcome, args.shrink_seconds)
        return 1
    if args.replay is not None:
        given = [int(c) for c in args.choices.split(",") if c] if args.choices is not None else None
        outcome = run_schedule(args.replay, given, trace=True)
        print_trace(outcome)
        print(f"schedule seed {args.replay}: {len(outcome.choices)} choices, {outcome.turns} turns: "
              f"{describe(outcome) or 'passed'}")
        return 1 if outcome.failed else 0

    started = last = time.monotonic()
    end = started + args.minutes * 60
    done = since = failures = 0
    outcomes = Outcomes() if args.outcomes else None
    while time.monotonic() < end and (args.schedules is None or done < args.schedules):
        outcome = run_schedule(schedule_seed(args.seed, args.first + done))
        if outcomes is not None:
            outcomes.add(outcome)
        done += 1
        since += 1
        if outcome.failed:
            print(f"{done} schedules in {time.monotonic() - started:.1f} s", flush=True)
            if args.keep_going:  # note it and go on: one run finds several kinds of failure
                failures += 1
                swarm = next((k for k in outcome.counts if k.startswith("swarm: ")), "")
                print(f"FAILED: schedule seed {outcome.seed}: {describe(outcome)} "
                      f"(it did: {', '.join(sorted({k.split(' ')[0] for k in outcome.counts}))}; {swarm})", flush=True)
                continue
            report_failure(outcome, args.shrink_seconds)
            return 1
        now = time.monotonic()
        if now - last >= 1.0:
            print(f"{now - started:6.0f} s  {done} schedules ({since / (now - last):.0f}/s)", flush=True)
            last, since = now, 0
    if outcomes is not None:
        print(outcomes.report())
    if failures:
        print(f"{failures} of {done} schedules failed (replay one: --replay SEED; shrink it: --replay SEED --shrink)")
        return 1
    print(f"passed: {done} schedules of seed {args.seed} (from schedule {args.first}) "
          f"in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
