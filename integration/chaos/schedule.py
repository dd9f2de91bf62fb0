"""The fault schedule, drawn from a seed: the same seed and minutes always give the same schedule.

A run is a sequence of phases. In a phase, faults happen at the moments the schedule says (seconds after the
phase began); after it comes a quiet point (:mod:`integration.chaos.quiet`), which takes as long as it takes,
so every time in the schedule is relative to its phase's start. What an action hits is decided when it runs:
``pick`` chooses among the processes of that kind running then (``pick % count``, oldest first), and a kill of
a kind with none running is logged as skipped. The schedule fixes the intentions; the machine fixes which
process was where when the signal came, so a failure found with a seed is likely, not certain, to recur
with it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

#: the process kinds the harness starts (and may kill); the summary counts kills per kind
KINDS = ("producer", "stream-local", "stream-spark", "drain", "bootstrap", "verify", "compact", "relay", "purge",
         "gateway")

#: what a phase's actions do, with their weights (how often each is drawn)
ACTION_WEIGHTS: dict[str, float] = {
    "kill-producer": 3.0,        # SIGKILL a producer; it restarts after ``restart_after``
    "kill-stream-local": 1.5,    # SIGKILL the in-process stream; restarted after ``restart_after``
    "kill-stream-spark": 1.0,    # SIGKILL the Spark stream (driver, JVM and Python workers)
    "kill-gateway": 2.0,         # SIGKILL one gateway of A or B; restarted after ``restart_after``
    "kill-bootstrap": 0.7,       # SIGKILL a running bootstrap; it runs again after ``restart_after``
    "drain": 2.0,                # a batch drain (SIGKILLed after ``kill_after`` when set)
    "verify": 1.5,               # verify --repair of a destination (primary or registered)
    "compact-a": 0.8,            # a full compaction of A's queue table
    "compact-b": 1.0,            # a full compaction of a destination table on B
    "relay": 0.8,                # accumulo-export tx relay
    "purge": 0.6,                # purge-tombstones of a destination (its grace: PURGE_GRACE_SECONDS)
    "register": 0.5,             # register a new destination with the queue, then bootstrap it
    "new-primary": 0.35,         # a new destination replaces the stream's: streams onto it, then bootstrap it
}


@dataclass(frozen=True)
class Action:
    """One fault: ``what`` (a key of :data:`ACTION_WEIGHTS`) at ``at`` seconds after its phase began."""

    at: float
    what: str
    pick: int = 0                   # which of the running processes of the kind (mod their count), or target
    kill_after: float | None = None  # a started process is SIGKILLed this long after its start
    restart_after: float = 0.0      # a killed long-running process starts again this long after its kill
    cluster: str = ""               # kill-gateway: "a" or "b"
    method: str = "live"            # register / new-primary: the bootstrap's --method
    buffer_bytes: int = 0           # drain: its --buffer-bytes

    def describe(self) -> str:
        parts = [self.what]
        if self.cluster:
            parts.append(f"cluster={self.cluster}")
        if self.what.startswith("kill-"):
            parts.append(f"pick={self.pick} restart_after={self.restart_after:.1f}s")
        if self.what in ("register", "new-primary"):
            parts.append(f"method={self.method}")
        if self.buffer_bytes:
            parts.append(f"buffer={self.buffer_bytes}")
        if self.kill_after is not None:
            parts.append(f"kill_after={self.kill_after:.1f}s")
        return " ".join(parts)


@dataclass(frozen=True)
class ProducerSpec:
    """A producer slot: its clock's offset from the wall clock and whether it keeps its rows' states."""

    name: str
    skew_seconds: float
    cache_rows: int


@dataclass(frozen=True)
class Phase:
    index: int
    seconds: float
    spark_stream: bool  # whether the Spark stream runs in this phase (one at a time: 2 cores)
    actions: tuple[Action, ...]


@dataclass(frozen=True)
class Schedule:
    seed: int
    minutes: float
    producers: tuple[ProducerSpec, ...]
    phases: tuple[Phase, ...] = field(default=())

    def describe(self) -> str:
        """A few lines: the producers' clocks and each phase's length and actions (counted by kind)."""
        lines = ["producers: " + ", ".join(
            f"{p.name} clock {p.skew_seconds:+.0f}s" + (f" cache_rows={p.cache_rows}" if p.cache_rows else "")
            for p in self.producers)]
        for p in self.phases:
            counts: dict[str, int] = {}
            for a in p.actions:
                counts[a.what] = counts.get(a.what, 0) + 1
            lines.append(f"phase {p.index}: {p.seconds:.0f}s, spark stream {'on' if p.spark_stream else 'off'}, "
                         f"{len(p.actions)} actions (" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                         + ")")
        return "\n".join(lines)


def draw_schedule(seed: int, minutes: float, mean_gap: float = 5.0, phase_seconds: tuple[float, float] = (50, 120),
                  skews: tuple[float, float] | None = None) -> Schedule:
    """The schedule of ``minutes`` of faults drawn from ``seed``: phases of ``phase_seconds`` (the last one
    shortened to fit, or merged into the one before when shorter than 20 s), actions arriving ``mean_gap``
    seconds apart on average (exponential gaps). The producers' clocks are 2-5 minutes ahead and behind;
    ``skews`` (ahead, behind), in seconds, replaces them (the rest of the schedule stays the seed's)."""
    if minutes <= 0:
        raise ValueError(f"minutes must be > 0, got {minutes!r}")
    rng = random.Random(seed)
    ahead, behind = rng.uniform(120, 300), rng.uniform(120, 300)
    if skews is not None:
        ahead, behind = skews
    producers = (ProducerSpec("ahead", ahead, rng.choice((0, 0, 2000))),
                 ProducerSpec("behind", -behind, rng.choice((0, 0, 2000))),
                 ProducerSpec("plain", 0.0, 0))
    total = minutes * 60.0
    lengths: list[float] = []
    while sum(lengths) < total:
        lengths.append(min(rng.uniform(*phase_seconds), total - sum(lengths)))
    if len(lengths) > 1 and lengths[-1] < 20:
        last = lengths.pop()
        lengths[-1] += last
    kinds, weights = zip(*ACTION_WEIGHTS.items(), strict=True)
    phases = []
    for index, seconds in enumerate(lengths, 1):
        spark = rng.random() < 0.6
        actions: list[Action] = []
        t = rng.expovariate(1 / mean_gap)
        while t < seconds - 2:
            what = rng.choices(kinds, weights)[0]
            actions.append(_action(rng, t, what))
            t += rng.expovariate(1 / mean_gap)
        phases.append(Phase(index, seconds, spark, tuple(actions)))
    # the Spark stream in one phase at least, and every kind of action at least once, however short the run
    if not any(p.spark_stream for p in phases):
        i = rng.randrange(len(phases))
        phases[i] = Phase(phases[i].index, phases[i].seconds, True, phases[i].actions)
    drawn = {a.what for p in phases for a in p.actions if a.what != "kill-stream-spark" or p.spark_stream}
    for what in kinds:
        if what not in drawn:
            where = [i for i, p in enumerate(phases) if p.spark_stream or what != "kill-stream-spark"]
            i = rng.choice(where)
            p = phases[i]
            extra = _action(rng, rng.uniform(0, max(1.0, p.seconds - 5)), what)
            actions = sorted((*p.actions, extra), key=lambda a: a.at)
            phases[i] = Phase(p.index, p.seconds, p.spark_stream, tuple(actions))
    return Schedule(seed, minutes, producers, tuple(phases))


def _action(rng: random.Random, t: float, what: str) -> Action:
    pick = rng.randrange(1000)
    if what == "kill-gateway":
        return Action(t, what, pick, cluster=rng.choice("ab"), restart_after=rng.uniform(2, 15))
    if what.startswith("kill-"):
        restart = rng.uniform(8, 25) if what == "kill-stream-spark" else rng.uniform(1, 10)
        return Action(t, what, pick, restart_after=restart)
    if what == "drain":
        return Action(t, what, pick, kill_after=_maybe(rng, 0.5, 0.5, 8),
                      buffer_bytes=rng.choice((8192, 65536, 1 << 20)))
    if what == "verify":
        return Action(t, what, pick, kill_after=_maybe(rng, 0.4, 1, 20))
    if what in ("compact-a", "compact-b"):
        return Action(t, what, pick, kill_after=_maybe(rng, 0.5, 0.2, 3))
    if what == "purge":
        return Action(t, what, pick, kill_after=_maybe(rng, 0.3, 1, 40))
    if what == "relay":
        return Action(t, what, pick, kill_after=_maybe(rng, 0.5, 0.1, 2))
    # register, new-primary: a bootstrap, killed early (before or while it writes) or late (in its final check)
    # (restart_after: how long after a kill it runs again)
    return Action(t, what, pick, kill_after=_maybe(rng, 0.5, 1, 30), restart_after=rng.uniform(2, 20),
                  method=rng.choice(("live", "live", "bulk")))


def _maybe(rng: random.Random, p: float, low: float, high: float) -> float | None:
    """With probability ``p`` a delay in [low, high), else None (the process runs to its end)."""
    return rng.uniform(low, high) if rng.random() < p else None
