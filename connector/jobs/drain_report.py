"""What a drain run reports: the summed counters of its tasks, plus what only the driver knows."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connector.queue import DrainStats


@dataclass
class DrainReport:
    """A drain run: the summed counters of its tasks, plus what only the driver knows. Progress callbacks
    receive it as it grows (``live`` holds the running round's counters)."""

    totals: DrainStats = field(default_factory=DrainStats)
    rounds: int = 0
    seconds: float = 0.0  # wall time of the run (``totals.seconds`` sums the tasks' times)
    remaining: int = 0
    #: malformed rows outside every bucket range (left in place; see ``queue status``)
    unreachable: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    #: the counters of the round still running, as its tasks last reported them
    live: DrainStats = field(default_factory=DrainStats)
    #: entries in the queue when the running (or last) round started
    depth_before_round: int = 0
    #: outbox cells that crashed producers left, relayed into the queue by this run
    relayed: int = 0
    #: wall seconds of the latest rounds or micro-batches, newest last (bounded: a stream runs for weeks)
    batch_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=1024))

    @property
    def entries(self) -> int:
        return self.totals.entries + self.live.entries

    @property
    def exported(self) -> int:
        return self.totals.exported + self.live.exported

    @property
    def deleted(self) -> int:
        return self.totals.deleted + self.live.deleted

    @property
    def dead_lettered(self) -> int:
        return self.totals.dead_lettered + self.live.dead_lettered

    @property
    def queue_depth(self) -> int:
        """Entries left: the depth when the round started, less what the round deleted so far (entries added
        meanwhile show up at the next round)."""
        return max(0, self.depth_before_round - self.live.deleted)

    @property
    def rate(self) -> float:
        return self.exported / self.seconds if self.seconds else 0.0

    def count_relayed(self, stats: Any) -> None:
        """Count a relay pass (a ``RelayStats``) of this run, as it happens."""
        self.relayed += stats.relayed


#: called with the report after each round and, while a batch round runs, with its live counters
ProgressFn = Callable[[DrainReport], None]
