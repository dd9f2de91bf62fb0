"""The oracle: what A's rows imply on B, and what B holds, computed apart from the connector's verify,
snapshot and queue code. It reads raw cells through the launcher's gateways (never killed) and restates,
in a few lines of its own, the inverted count index: a word's row on A with count ``c > 0`` (cell ``c:n``)
implies exactly one cell on B, row ``%08d`` of c, family ``w``, qualifier the word, no visibility, an empty
value; a row without a count implies nothing. It also counts, by their row prefixes, the queue's entries and
dead letters and the outbox cells of the producers' table, instead of asking the connector.

Besides "equal cell for cell", it checks that no destination cell is newer than the version of the row it
derives from (the row's ``!tx:v`` cell's timestamp): such a cell would hide the row's next export."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from connector.accumulo import Connection

COUNT = (b"c", b"n")
VERSION = (b"!tx", b"v")
OUTBOX_FAMILY = b"!txo"
INDEX_FAMILY = b"w"

#: a destination cell's key: row, family, qualifier, visibility
Key = tuple[bytes, bytes, bytes, bytes]


@dataclass
class Truth:
    """What A holds at a quiet point: the cells the counts imply on B, each row's version, outbox cells left."""

    implied: dict[Key, bytes]
    versions: dict[bytes, int]
    outbox_cells: int
    rows: int
    outbox_newest_ts: int = 0  # the newest outbox cell's timestamp (its commit's seq, microseconds)

    def outbox_ahead_seconds(self) -> float:
        """How far the newest outbox cell's seq is ahead of this machine's clock (negative: behind it)."""
        return (self.outbox_newest_ts - time.time_ns() // 1000) / 1e6


def read_truth(conn_a: Connection, counts_table: str) -> Truth:
    implied: dict[Key, bytes] = {}
    versions: dict[bytes, int] = {}
    outbox = newest = 0
    rows: set[bytes] = set()
    for cell in conn_a.scan(counts_table, batch_size=10_000):
        rows.add(cell.row)
        if (cell.cf, cell.cq) == VERSION:
            versions[cell.row] = cell.ts
        elif cell.cf == OUTBOX_FAMILY:
            outbox += 1
            newest = max(newest, cell.ts)
        elif (cell.cf, cell.cq) == COUNT:
            count = int(cell.value)
            if count > 0:
                implied[(b"%08d" % count, INDEX_FAMILY, cell.row, b"")] = b""
    return Truth(implied, versions, outbox, len(rows), newest)


@dataclass
class QueueLeft:
    """What the queue's table holds besides its records: entries waiting and dead letters."""

    entries: int
    dead_letters: int
    examples: list[bytes] = field(default_factory=list)


def read_queue(conn_a: Connection, queue_table: str, qid: str) -> QueueLeft:
    entries = dead = 0
    examples: list[bytes] = []
    entry_prefix, dead_prefix = f"{qid}:".encode(), f"{qid}#dead:".encode()
    for cell in conn_a.scan(queue_table, batch_size=10_000):
        if cell.row.startswith(entry_prefix):
            entries += 1
        elif cell.row.startswith(dead_prefix):
            dead += 1
        else:
            continue
        if len(examples) < 3:
            examples.append(cell.row)
    return QueueLeft(entries, dead, examples)


@dataclass
class Comparison:
    """A destination table against what A implies."""

    table: str
    expected: int
    actual: int
    missing: list[Key] = field(default_factory=list)
    unexpected: list[tuple[Key, int]] = field(default_factory=list)  # with B's timestamp
    different: list[tuple[Key, bytes, bytes]] = field(default_factory=list)  # expected value, B's value
    future: list[tuple[Key, int, int]] = field(default_factory=list)  # B's timestamp above the row's version
    duplicates: int = 0

    @property
    def exact(self) -> bool:
        return not (self.missing or self.unexpected or self.different or self.future or self.duplicates)

    def describe(self, examples: int = 5) -> str:
        if self.exact:
            return f"{self.table}: exact ({self.actual} cells)"
        parts = [f"{self.table}: {self.actual} cells, {self.expected} expected"]
        if self.missing:
            parts.append(f"{len(self.missing)} missing e.g. {[_key(k) for k in self.missing[:examples]]}")
        if self.unexpected:
            parts.append(f"{len(self.unexpected)} unexpected e.g. "
                         f"{[f'{_key(k)}@{ts}' for k, ts in self.unexpected[:examples]]}")
        if self.different:
            parts.append(f"{len(self.different)} different e.g. "
                         f"{[f'{_key(k)} {e!r}!={a!r}' for k, e, a in self.different[:examples]]}")
        if self.future:
            parts.append(f"{len(self.future)} newer than their row on A e.g. "
                         f"{[f'{_key(k)}@{ts}>v{v}' for k, ts, v in self.future[:examples]]}")
        if self.duplicates:
            parts.append(f"{self.duplicates} duplicate keys")
        return "; ".join(parts)


def _key(k: Key) -> str:
    row, cf, cq, cv = k
    return f"{row.decode(errors='replace')} {cf.decode(errors='replace')}:{cq.decode(errors='replace')}" + (
        f" [{cv.decode(errors='replace')}]" if cv else "")


def compare(truth: Truth, conn_b: Connection, table: str) -> Comparison:
    """Every cell of ``table`` on B against ``truth`` (read while nothing commits)."""
    held: dict[Key, tuple[bytes, int]] = {}
    seen: Counter[Key] = Counter()
    for cell in conn_b.scan(table, batch_size=10_000):
        key = (cell.row, cell.cf, cell.cq, cell.cv)
        seen[key] += 1
        held[key] = (cell.value, cell.ts)
    result = Comparison(table, len(truth.implied), len(held), duplicates=sum(n - 1 for n in seen.values() if n > 1))
    for key, value in truth.implied.items():
        if key not in held:
            result.missing.append(key)
        elif held[key][0] != value:
            result.different.append((key, value, held[key][0]))
    for key, (_value, ts) in held.items():
        if key not in truth.implied:
            result.unexpected.append((key, ts))
        version = truth.versions.get(key[2])
        if version is not None and ts > version:
            result.future.append((key, ts, version))
    return result
