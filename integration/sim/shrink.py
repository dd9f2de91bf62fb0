"""Shrinking a failing schedule: the fewest choices (and the smallest values) that still break the same invariant.

A schedule is the list of choices its run drew (:class:`~integration.sim.scheduler.Choices`): which thread ran
at each turn, each fault, and what the workload drew (processes, rows, values, pauses). Any edited list still
runs (a value past the end is 0, the simplest option; one out of range is clamped), so shrinking is delta
debugging over that list: remove chunks, halving their size down to single values, then set chunks to 0,
then lower each value left, keeping every change after which the run still breaks the same invariant.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def shrink(choices: list[int], fails: Callable[[list[int]], bool], *, budget_seconds: float = 120.0,
           max_runs: int = 2000) -> tuple[list[int], int]:
    """The smallest list found for which ``fails`` holds (``fails(choices)`` must hold), and the runs it took."""
    deadline = time.monotonic() + budget_seconds
    runs = 0
    best = list(choices)

    def attempt(candidate: list[int]) -> bool:
        nonlocal runs, best
        if runs >= max_runs or time.monotonic() > deadline or candidate == best:
            return False
        runs += 1
        if fails(candidate):
            best = candidate
            return True
        return False

    best = _trim(best)
    # 0. the shortest failing prefix (a binary search: failing is not monotone in the length, so it is a guess
    # that the loop below refines)
    low, high = 0, len(best)
    while low < high and runs < max_runs and time.monotonic() < deadline:
        middle = (low + high) // 2
        if attempt(_trim(best[:middle])):
            high = len(best)
        else:
            low = middle + 1
    changed = True
    while changed and runs < max_runs and time.monotonic() < deadline:
        changed = False
        # 1. zero chunks (0 is each choice's simplest option; the choices after keep their places)
        size = max(1, len(best) // 2)
        while size >= 1:
            for i in range(0, len(best), size):
                if any(best[i:i + size]) and attempt(_trim(best[:i] + [0] * len(best[i:i + size]) + best[i + size:])):
                    changed = True
            size //= 2
        # 2. remove chunks, large to small
        size = max(1, len(best) // 2)
        while size >= 1:
            i = 0
            while i < len(best):
                if attempt(_trim(best[:i] + best[i + size:])):
                    changed = True
                else:
                    i += size
            size //= 2
        # 3. lower each value
        for i in range(len(best)):
            for lower in sorted({0, best[i] // 2, best[i] - 1} if i < len(best) else set()):
                if i < len(best) and 0 <= lower < best[i] and attempt(_trim(best[:i] + [lower] + best[i + 1:])):
                    changed = True
                    break
    return best, runs


def _trim(choices: list[int]) -> list[int]:
    """Without trailing zeros (they mean the same as no value)."""
    end = len(choices)
    while end and choices[end - 1] == 0:
        end -= 1
    return choices[:end]
