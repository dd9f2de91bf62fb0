"""The export-queue recipe's inverted count index, as a transactional producer.

Cluster A holds the truth: table ``counts`` maps a word (the row) to its count (cell ``c:n``). Each
transaction is a read-modify-write of ONE word's row through :class:`connector.transactions.RowTransactions`:
read the count, write the new one and export ``CountUpdate(old, new)``; the new count and the export commit
together in one conditional mutation (the row's outbox), and the export's seq is the commit's. Words are
shared by all producers (threads or processes), so transactions on hot words collide: a lost condition reads
the row again and recomputes old and new from it. The destination index on cluster B is keyed by count:
row = zero-padded count, qualifier = word. Exporting an update deletes the index cell of the old count and
puts the one of the new count (the ``difference`` translator).

As a separate producer process (cluster from the clusters.toml named by ``ACCUMULO_EXPORT_CONFIG``)::

    python -m examples.inverted_count_index --cluster A --table counts --queue-table exports --qid cidx \\
        --buckets 64 --words 10000 --transactions 5000 --seed 1 [--batch 100] [--skew 1.0] [--init]

It prints ``progress committed=<n> conflicts=<n>`` now and then and ``done committed=<n> conflicts=<n>
seconds=<s>`` at the end (a parent process reads these lines).
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from connector import Cell, Connection, ExportQueue, QueueConfig, RowTransactions, Transaction, batch_snapshot

COUNTS_FAMILY, COUNT_QUALIFIER = b"c", b"n"
#: transactions per run_all call
DEFAULT_BATCH = 100
#: the count changes a transaction draws from (a decrement at 0 leaves 0)
DELTAS = (1, 1, 2, 3, -1)


def index_cell(count: int, word: str) -> dict[str, str]:
    return {"row": f"{count:08d}", "cf": "w", "cq": word, "value": ""}


def count_update(word: str, old: int | None, new: int | None) -> dict:
    return {"old": [index_cell(old, word)] if old else [], "new": [index_cell(new, word)] if new else []}


@batch_snapshot
def snapshot_batch(cells: pa.RecordBatch) -> pa.RecordBatch:
    """The batch form of :func:`snapshot`, for speed (``--snapshot examples.inverted_count_index:snapshot_batch``):
    over a batch of whole rows, each word's count cell becomes its index cell directly, written with
    ``pyarrow.compute`` (no Python per row). The cells are what the ``difference`` translator makes of the export
    :func:`snapshot` gives; ``source`` names the word's row, whose version they are written at."""
    counts = cells.filter(pc.and_(pc.equal(cells["cf"], COUNTS_FAMILY), pc.equal(cells["cq"], COUNT_QUALIFIER)))
    count = pc.cast(pc.cast(counts["value"], pa.string()), pa.int64())
    some = pc.not_equal(count, 0)  # a count of 0 implies no cell
    counts, count = counts.filter(some), count.filter(some)
    padded = pc.utf8_lpad(count.cast(pa.string()), 8, "0")
    n = counts.num_rows
    return pa.record_batch({"row": padded.cast(pa.binary()), "cf": pa.array([b"w"] * n, pa.binary()),
                            "cq": counts["row"], "value": pa.array([b""] * n, pa.binary()), "source": counts["row"]})


def snapshot(row: bytes, cells: Sequence[Cell]) -> list[tuple[str, dict]]:
    """What a word's row implies on B, as the export ``tx.export`` queues for the change "nothing -> this
    row": the index cell of its count (none for a count of 0). The bootstrap's snapshot function
    (``--snapshot examples.inverted_count_index:snapshot``)."""
    count = next((int(c.value) for c in cells if (c.cf, c.cq) == (COUNTS_FAMILY, COUNT_QUALIFIER)), 0)
    word = row.decode()
    return [(word, count_update(word, None, count))] if count else []


class WordChooser:
    """Draws words from a shared vocabulary: Zipf-ish (weight of the i-th word 1 / (i+1)^skew, so a few words
    are hot and collide across producers) or uniform (``skew`` 0)."""

    def __init__(self, vocabulary: list[str], rng: random.Random, skew: float = 1.0) -> None:
        self.vocabulary, self.rng = vocabulary, rng
        self.cum_weights = (list(itertools.accumulate(1.0 / (i + 1) ** skew for i in range(len(vocabulary))))
                            if skew else None)

    def draw(self, n: int) -> list[str]:
        return self.rng.choices(self.vocabulary, cum_weights=self.cum_weights, k=n)


class Producer:
    """Runs row transactions on shared words: each one reads a word's count on A, writes the new count and
    exports the change, all in one commit. Every committed transaction queues exactly one export (one entry,
    its key and seq unique), so ``committed`` is also the number of entries this producer queued.

    ``repeat_every``: every n-th committed export is added to the queue once more, as a relay repeated after
    a crash would (same key, seq and value): the drain must take it in its stride. ``close()`` (or ``with``)
    relays what the relayer still holds and closes the connection's writers."""

    def __init__(self, conn: Connection, config: QueueConfig, counts_table: str, vocabulary: list[str],
                 seed: int, *, skew: float = 1.0, batch: int = DEFAULT_BATCH, repeat_every: int = 0) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch!r}")
        self.conn, self.config, self.counts_table = conn, config, counts_table
        self.rng = random.Random(seed)
        self.chooser = WordChooser(vocabulary, self.rng, skew)
        self.batch, self.repeat_every = batch, repeat_every
        self.txs = RowTransactions(conn, counts_table)
        self._repeats: ExportQueue | None = None
        #: committed transactions (= exports queued), repeated adds
        self.committed = self.repeated = 0

    @property
    def conflicts(self) -> int:
        """Lost conditions retried (each one a re-read of the row and a new run of the function)."""
        return self.txs.conflicts

    def transaction(self, word: str, delta: int, updates: dict[int, dict], index: int) -> Callable[[Transaction], None]:
        """The read-modify-write of ``word``'s row; records the update it exported (its last run is the one
        that committed) under ``index``."""

        def change(tx: Transaction) -> None:
            old = int(tx.get(COUNTS_FAMILY, COUNT_QUALIFIER, default=b"0"))
            new = max(0, old + delta)
            tx.put(COUNTS_FAMILY, COUNT_QUALIFIER, str(new).encode())
            updates[index] = update = count_update(word, old or None, new or None)
            tx.export(self.config, word, update)

        return change

    def run(self, transactions: int, progress: Callable[[Producer], None] | None = None) -> None:
        """Run ``transactions`` transactions, ``batch`` per ``run_all`` call (``run`` when batch is 1);
        ``progress(self)`` after each call."""
        done = 0
        while done < transactions:
            n = min(self.batch, transactions - done)
            picks = self.chooser.draw(n)
            deltas = [self.rng.choice(DELTAS) for _ in range(n)]
            updates: dict[int, dict] = {}
            fns = [self.transaction(w, d, updates, i) for i, (w, d) in enumerate(zip(picks, deltas, strict=True))]
            if n == 1 and self.batch == 1:
                seqs = [self.txs.run(picks[0], fns[0])]
            else:
                seqs = self.txs.run_all(list(zip(picks, fns, strict=True)))
            self.committed += sum(1 for s in seqs if s is not None)
            if self.repeat_every:
                self._repeat(picks, seqs, updates, done)
            done += n
            if progress is not None:
                progress(self)

    def _repeat(self, picks: list[str], seqs: list[int | None], updates: dict[int, dict], done: int) -> None:
        if self._repeats is None:
            self._repeats = ExportQueue(self.conn, self.config)
        for i, (word, seq) in enumerate(zip(picks, seqs, strict=True)):
            if seq is not None and (done + i) % self.repeat_every == 0:
                self._repeats.add(word, updates[i], seq)  # the committed export, delivered twice
                self.repeated += 1
        self._repeats.flush()

    def close(self) -> None:
        self.txs.close()
        if self._repeats is not None:
            self._repeats.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def expected_index(conn: Connection, counts_table: str) -> set[tuple[bytes, bytes]]:
    """Recompute the index from the truth on A (the count cells; versions and outboxes are not counts)."""
    out = set()
    for cell in conn.scan(counts_table, columns=[(COUNTS_FAMILY, COUNT_QUALIFIER)], batch_size=10_000):
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


def main(argv: list[str] | None = None) -> int:
    from connector import cluster

    parser = argparse.ArgumentParser(description="A producer process of the inverted count index: row "
                                     "transactions on shared words of a counts table on cluster A.")
    parser.add_argument("--cluster", default="A", help="cluster name in the clusters.toml (ACCUMULO_EXPORT_CONFIG)")
    parser.add_argument("--table", default="counts", help="the counts table (the truth)")
    parser.add_argument("--queue-table", default="exports")
    parser.add_argument("--qid", default="cidx")
    parser.add_argument("--buckets", type=int, required=True)
    parser.add_argument("--words", type=int, default=10_000, help="vocabulary size, shared by all producers")
    parser.add_argument("--transactions", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="transactions per run_all call (1: run)")
    parser.add_argument("--skew", type=float, default=1.0, help="Zipf exponent of word choice (0: uniform)")
    parser.add_argument("--progress-seconds", type=float, default=5.0)
    parser.add_argument("--init", action="store_true", help="create the queue and the counts table first")
    opts = parser.parse_args(argv)

    config = QueueConfig(table=opts.queue_table, qid=opts.qid, num_buckets=opts.buckets)
    conn = cluster(opts.cluster).connect()
    if opts.init:
        ExportQueue(conn, config).init()
        RowTransactions(conn, opts.table).init()
    t0 = last = time.monotonic()

    def progress(p: Producer) -> None:
        nonlocal last
        if time.monotonic() - last >= opts.progress_seconds:
            last = time.monotonic()
            print(f"progress committed={p.committed} conflicts={p.conflicts}", flush=True)

    with Producer(conn, config, opts.table, words(opts.words), opts.seed, skew=opts.skew, batch=opts.batch) as p:
        print(f"started seed={opts.seed} transactions={opts.transactions}", flush=True)
        p.run(opts.transactions, progress)
    conn.close()
    print(f"done committed={p.committed} conflicts={p.conflicts} seconds={time.monotonic() - t0:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
