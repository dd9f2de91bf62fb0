"""Benchmark: what the tombstone mode's scan filter costs a reader of B. Two tables of the same N cells (10-byte
values, no tombstones), one with the filter that hides tombstones (``connector.export.tombstones``: a
``RegExFilter`` on every value), each read whole with ``scan_batches``, alternating, on the same cluster.

Prints both medians and a final ``ratio=<seconds without the filter / seconds with it>`` line (1.0: free).
Run: ``.venv/bin/python integration/bench/bench_tombstone_filter.py [--cells N]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import UPDATE_SCHEMA, Connection  # noqa: E402
from connector.export.tombstones import hide_tombstones_filter  # noqa: E402
from integration.harness import clusters  # noqa: E402

PLAIN, FILTERED = "tombstone_bench_plain", "tombstone_bench_filtered"


def fill(conn: Connection, table: str, cells: int, batch: int = 100_000) -> None:
    conn.create_table(table)
    conn.add_splits(table, [f"r{i:09d}".encode() for i in range(cells // 4, cells, cells // 4)])
    with conn.batch_writer(table) as writer:
        for start in range(0, cells, batch):
            n = min(batch, cells - start)
            rows = pa.array([f"r{i:09d}".encode() for i in range(start, start + n)], pa.binary())
            writer.add_cells(pa.RecordBatch.from_arrays(
                [rows, pa.array([b"f"] * n, pa.binary()), pa.array([b"q"] * n, pa.binary()),
                 pa.array([b""] * n, pa.binary()), pa.array(np.arange(start, start + n) + 1, pa.int64()),
                 pa.array([b"value%05d" % (i % 100_000) for i in range(n)], pa.binary()),
                 pa.array(np.zeros(n, dtype=bool))], schema=UPDATE_SCHEMA))
    conn.compact_table(table, wait=True)  # both read files alike, nothing in memory


def read(conn: Connection, table: str) -> tuple[int, float]:
    started = time.perf_counter()
    n = sum(page.num_rows for page in conn.scan_batches(table, batch_size=10_000))
    return n, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each (medians)")
    opts = parser.parse_args()
    with clusters(["b"]) as running, running["b"].connect() as conn:
        for table in (PLAIN, FILTERED):
            fill(conn, table, opts.cells)
        conn.attach_iterator(FILTERED, hide_tombstones_filter(), scopes=("scan",))
        time.sleep(5)  # the tablet server hears of the new property through ZooKeeper
        load = os.getloadavg()[0]
        times: dict[str, list[float]] = {PLAIN: [], FILTERED: []}
        for table in (PLAIN, FILTERED):
            read(conn, table)  # warm the tablet server's caches for both
        for _ in range(opts.rounds):
            for table in (PLAIN, FILTERED):
                n, seconds = read(conn, table)
                assert n == opts.cells, (table, n)
                times[table].append(seconds)
        plain, filtered = times[PLAIN], times[FILTERED]
        plain_s, filtered_s = sorted(plain)[len(plain) // 2], sorted(filtered)[len(filtered) // 2]
        print(f"scan of {opts.cells:,} cells without the tombstone filter: {plain_s:.2f} s "
              f"({opts.cells / plain_s:,.0f} cells/s)")
        print(f"with it: {filtered_s:.2f} s ({opts.cells / filtered_s:,.0f} cells/s)")
        print(f"load average at the start: {load:.1f}")
        print(f"ratio={plain_s / filtered_s:.2f}")


if __name__ == "__main__":
    main()
