"""A producer process of the chaos run: row transactions of the inverted count index
(``examples/inverted_count_index.py``) on shared, Zipf-hot words, at a steady rate, until SIGTERM.

Each transaction reads a word's count on A and commits the new one with its export (the index cell of the old
count deleted, the one of the new count put) in one conditional mutation. A count that reaches 0 deletes the
row's count cell (a row deleted on A). The producer's clock may be skewed (``--skew-seconds``: minutes ahead
or behind the wall clock) through ``RowTransactions(clock_us=...)``. SIGTERM ends it after the running
``run_all`` call, relaying what its relayer holds (exit 0); SIGKILL leaves what it committed in the outboxes.

    python -m integration.chaos.producer --cluster A --table counts --queue-table exports --qid chaos \\
        --buckets 32 --words 2000 --seed 7 --skew-seconds 180 --rate 25
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import threading
import time

from connector import QueueConfig, RowTransactions, Transaction
from connector.clusters_config import cluster
from examples.inverted_count_index import COUNT_QUALIFIER, COUNTS_FAMILY, WordChooser, count_update, words

#: the count changes a transaction draws from; counts stay small, so rows reach 0 (and are deleted) often
DELTAS = (1, 1, 2, 3, -1, -2, -4)


def change(config: QueueConfig, word: str, delta: int, changes: dict[int, tuple[int, int]], index: int
           ):  # noqa: ANN201 - a transaction function
    """The read-modify-write of ``word``'s count: never a no-op (a count of 0 only goes up). Each run records
    (old, new) under ``index``: the last run is the one that committed."""

    def fn(tx: Transaction) -> None:
        old = int(tx.get(COUNTS_FAMILY, COUNT_QUALIFIER, default=b"0"))
        new = max(0, old + (abs(delta) if old == 0 else delta))
        if new:
            tx.put(COUNTS_FAMILY, COUNT_QUALIFIER, str(new).encode())
        else:
            tx.delete(COUNTS_FAMILY, COUNT_QUALIFIER)
        tx.export(config, word, count_update(word, old or None, new or None))
        changes[index] = (old, new)

    return fn


def commits_line(picks: list[str], seqs: list[int | None], changes: dict[int, tuple[int, int]]) -> str:
    """``commits t=<wall ms> <seq>:<word>:<old>:<new> ...``: what this call committed, for the run's
    diagnostics (:mod:`integration.chaos.history`); the wall clock is the machine's, not the skewed one."""
    items = [f"{seq}:{word}:{changes[i][0]}:{changes[i][1]}"
             for i, (word, seq) in enumerate(zip(picks, seqs, strict=True)) if seq is not None]
    return f"commits t={time.time_ns() // 1_000_000} " + " ".join(items)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="A")
    parser.add_argument("--table", required=True, help="the counts table (row transactions)")
    parser.add_argument("--queue-table", required=True)
    parser.add_argument("--qid", required=True)
    parser.add_argument("--buckets", type=int, required=True)
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skew-seconds", type=float, default=0.0, help="this producer's clock minus the wall clock")
    parser.add_argument("--rate", type=float, default=25.0, help="transactions per second (about)")
    parser.add_argument("--batch", type=int, default=8, help="transactions per run_all call")
    parser.add_argument("--cache-rows", type=int, default=0)
    opts = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    config = QueueConfig(table=opts.queue_table, qid=opts.qid, num_buckets=opts.buckets)
    skew_us = int(opts.skew_seconds * 1_000_000)
    conn = cluster(opts.cluster).connect()
    txs = RowTransactions(conn, opts.table, cache_rows=opts.cache_rows,
                          clock_us=lambda: time.time_ns() // 1000 + skew_us)
    rng = random.Random(opts.seed)
    chooser = WordChooser(words(opts.words), rng, skew=1.0)
    committed = 0
    began = last = time.monotonic()
    print(f"started seed={opts.seed} skew_seconds={opts.skew_seconds:+.0f}", flush=True)
    try:
        while not stop.is_set():
            picks = chooser.draw(opts.batch)
            changes: dict[int, tuple[int, int]] = {}
            seqs = txs.run_all([(w, change(config, w, rng.choice(DELTAS), changes, i)) for i, w in enumerate(picks)])
            committed += sum(1 for s in seqs if s is not None)
            print(commits_line(picks, seqs, changes), flush=True)
            if time.monotonic() - last >= 2.0:
                last = time.monotonic()
                print(f"progress committed={committed} conflicts={txs.conflicts}", flush=True)
            # a steady rate: sleep until this many transactions are due
            due = began + committed / opts.rate
            stop.wait(max(0.0, due - time.monotonic()))
    finally:
        txs.close()  # relays what its relayer holds
        conn.close()
    print(f"done committed={committed} conflicts={txs.conflicts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
