"""What the producers committed, from their ``commits`` lines, to explain a difference the oracle found: for a
cell B holds but A does not imply (or the reverse), the commit that put it there and the one after it, whose
export should have removed it, with when each was committed (seconds into the run, by the machine's clock).

A producer killed between a commit and its line leaves that commit out: the history may miss a step."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class Commit:
    seq: int
    old: int
    new: int
    producer: str
    wall_ms: int


def read_history(log_dir: Path) -> dict[str, list[Commit]]:
    """Every word's commits the producers' logs name, in seq order."""
    by_word: dict[str, list[Commit]] = defaultdict(list)
    for log in sorted(log_dir.glob("producer-*.log")):
        producer = log.stem.replace("-", "#", 1)
        for line in log.read_text(errors="replace").splitlines():
            if not line.startswith("commits t="):
                continue
            fields = line.split()
            wall_ms = int(fields[1][2:])
            for item in fields[2:]:
                try:
                    seq, word, old, new = item.split(":")
                    by_word[word].append(Commit(int(seq), int(old), int(new), producer, wall_ms))
                except ValueError:
                    continue  # a line cut short by a SIGKILL
    for commits in by_word.values():
        commits.sort()
    return by_word


def explain(history: dict[str, list[Commit]], word: str, count: int, ts: int | None, began_wall: float) -> str:
    """One line on ``word``'s cell of ``count``: the commit at ``ts`` (B's cell's timestamp; None for a cell
    B lacks) and the ones around it."""

    def at(c: Commit) -> str:
        return f"seq {c.seq} {c.old}->{c.new} by {c.producer} at {c.wall_ms / 1000 - began_wall:.1f}s"

    commits = history.get(word, [])
    if not commits:
        return f"{word}: no commit of it in the producers' logs"
    if ts is None:  # missing on B: the last commit that set this count
        setting = [c for c in commits if c.new == count]
        return f"{word}: last set to {count} by {at(setting[-1])}" if setting else f"{word}: never set to {count}"
    i = bisect.bisect_left([c.seq for c in commits], ts)
    here = commits[i] if i < len(commits) and commits[i].seq == ts else None
    later = commits[i + 1:i + 3] if here else commits[i:i + 2]
    text = f"{word} count {count} @{ts}: " + (f"put by {at(here)}" if here else "no logged commit at that seq")
    if later:
        text += "; then " + ", ".join(at(c) for c in later)
    return text + f" ({len(commits)} commits of it logged)"
