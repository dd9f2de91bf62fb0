"""What a combine pass did: counters that add up across buckets, tasks and rounds."""

from __future__ import annotations

from dataclasses import dataclass, field

from connector.counters import FieldCounters


@dataclass
class CombineStats(FieldCounters):
    """What a pass did. ``keys``: keys with queued updates read; ``updates``: updates consumed (each exactly
    once); ``changed``/``deleted``: keys whose value changed / was removed; ``exports``: outbox cells relayed
    after this pass's combines; ``leftovers``: outbox cells an earlier pass left, relayed now; ``conflicts``:
    lost conditions (re-read and retried); ``contended``: keys still losing after the retries (left queued);
    ``failed``: keys left queued because of an error, described in ``errors`` (the first few)."""

    keys: int = 0
    updates: int = 0
    changed: int = 0
    deleted: int = 0
    exports: int = 0
    leftovers: int = 0
    conflicts: int = 0
    contended: int = 0
    failed: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def progress(self) -> int:
        """Work done: updates consumed plus outbox cells relayed (0: the pass changed nothing)."""
        return self.updates + self.exports + self.leftovers
