"""The chaos run's log (one compact line per action, with its time since the run began) and its summary."""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO

from .schedule import KINDS


@dataclass
class QuietResult:
    """One quiet point: what was checked, and what differed or went wrong."""

    index: int
    checked: list[str] = field(default_factory=list)     # one line per destination
    problems: list[str] = field(default_factory=list)    # empty: passed
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


class Log:
    """Prints ``[  12.3s p2] text`` lines (also into the run's log file) and keeps the counters the summary
    shows: actions, skipped actions, kills per process kind, processes that failed on their own."""

    def __init__(self, out: TextIO = sys.stdout, file: TextIO | None = None) -> None:
        self.out, self.file = out, file
        self.began = time.monotonic()
        self.began_wall = time.time()  # the run's times are seconds after this (producers log wall times)
        self.phase = 0
        self.actions = 0
        self.skipped = 0
        self.kills: Counter[str] = Counter()
        self.starts: Counter[str] = Counter()
        self.errors: list[str] = []
        self.quiet: list[QuietResult] = []

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def __call__(self, text: str) -> None:
        where = f"p{self.phase}" if self.phase > 0 else ("q" if self.phase < 0 else "--")
        line = f"[{self.elapsed():7.1f}s {where:>3}] {text}"
        print(line, file=self.out, flush=True)
        if self.file is not None:
            print(line, file=self.file, flush=True)

    def error(self, text: str) -> None:
        self.errors.append(f"{self.elapsed():.1f}s: {text}")
        self(f"ERROR {text}")

    @property
    def passed(self) -> bool:
        return bool(self.quiet) and all(q.ok for q in self.quiet) and not self.errors

    def summary(self, seed: int, minutes: float, phases: int) -> str:
        kills = ", ".join(f"{k} {self.kills[k]}" for k in KINDS if self.kills[k])
        starts = ", ".join(f"{k} {self.starts[k]}" for k in KINDS if self.starts[k])
        passed = sum(1 for q in self.quiet if q.ok)
        lines = [f"=== chaos summary: seed {seed}, {minutes:g} minutes of faults in {phases} phases, "
                 f"{self.elapsed() / 60:.1f} minutes in all ===",
                 f"actions         {self.actions} ({self.skipped} skipped: nothing to hit, or busy)",
                 f"processes       {sum(self.starts.values())} started ({starts})",
                 f"kills           {sum(self.kills.values())} SIGKILLs ({kills or 'none'})",
                 f"quiet points    {len(self.quiet)} checked, {passed} passed"]
        for q in self.quiet:
            lines.append(f"  quiet point {q.index} ({q.seconds:.0f}s): " + ("ok" if q.ok else "FAILED"))
            lines += [f"    {c}" for c in q.checked]
            lines += [f"    PROBLEM {p}" for p in q.problems]
        if self.errors:
            lines.append(f"errors          {len(self.errors)} (processes that failed on their own)")
            lines += [f"  {e}" for e in self.errors[:30]]
        lines.append(f"result          {'PASS' if self.passed else 'FAIL'} (seed {seed}; reproduce: make chaos "
                     f"MINUTES={minutes:g} SEED={seed})")
        return "\n".join(lines)
