"""The export-queue recipe's inverted count index, as a small transactional producer.

Cluster A holds the truth: table ``counts`` maps a word to its count. Each transaction changes one word's
count and, in the same breath, adds an export ``CountUpdate(old, new)`` to the queue. The destination index
on cluster B is keyed by count: row = zero-padded count, qualifier = word. Exporting an update deletes the
index cell of the old count and puts the one of the new count (the ``difference`` translator).
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Iterable

from connector.accumulo import Connection, Mutation
from connector.queue import ExportQueue, QueueConfig

COUNTS_FAMILY = b"c"


def index_cell(count: int, word: str) -> dict[str, str]:
    return {"row": f"{count:08d}", "cf": "w", "cq": word, "value": ""}


def count_update(word: str, old: int | None, new: int | None) -> dict:
    return {"old": [index_cell(old, word)] if old else [], "new": [index_cell(new, word)] if new else []}


class SequenceOracle:
    """Hands out increasing sequence numbers, like a transaction timestamp oracle."""

    def __init__(self, start: int = 1_000) -> None:
        self._next = itertools.count(start)
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            return next(self._next)


class Producer:
    """Runs serial transactions on its own words (so each word's history is serial), adding one export per
    transaction and keeping the counts table on A up to date."""

    def __init__(self, conn: Connection, config: QueueConfig, counts_table: str, words: list[str],
                 oracle: SequenceOracle, seed: int, counts: dict[str, int] | None = None) -> None:
        self.conn, self.config, self.counts_table = conn, config, counts_table
        self.words, self.oracle = words, oracle
        self.rng = random.Random(seed)
        #: current count per word; pass the same dict to later producers of the same words
        self.counts: dict[str, int] = {} if counts is None else counts
        self.added = 0

    def run(self, transactions: int, repeat_every: int = 50) -> None:
        with ExportQueue(self.conn, self.config) as queue, self.conn.batch_writer(self.counts_table) as counts:
            for i in range(transactions):
                word = self.rng.choice(self.words)
                old = self.counts.get(word)
                new = max(0, (old or 0) + self.rng.choice([1, 1, 2, 3, -1]))
                seq = self.oracle.next()
                self.counts[word] = new
                m = Mutation(word)
                m.put(COUNTS_FAMILY, b"n", str(new).encode(), timestamp=seq)
                counts.add_mutation(m)
                update = count_update(word, old, new or None)
                queue.add(word, update, seq)
                self.added += 1
                if repeat_every and i % repeat_every == 0:
                    queue.add(word, update, seq)  # a retried add: delivered twice, must be harmless
                    self.added += 1


def expected_index(conn: Connection, counts_table: str) -> set[tuple[bytes, bytes]]:
    """Recompute the index from the truth on A."""
    out = set()
    for cell in conn.scan(counts_table):
        count = int(cell.value)
        if count:
            out.add((f"{count:08d}".encode(), cell.row))
    return out


def actual_index(conn: Connection, table: str) -> list[tuple[bytes, bytes]]:
    return [(c.row, c.cq) for c in conn.scan(table, batch_size=10_000)]


def words(n: int) -> list[str]:
    return [f"word{i:05d}" for i in range(n)]


def split(items: list[str], parts: int) -> Iterable[list[str]]:
    return (items[i::parts] for i in range(parts))
