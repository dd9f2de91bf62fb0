"""Benchmark: the client's per-object paths against its batch paths, through one gateway of one embedded
cluster. Writes N cells (default 200k; 10 per row, 32-byte values, as ``bench_client_write``) with
``BatchWriter.add_mutation`` (one ``Mutation`` per row, built in the timed loop as an application builds
them) and with ``add_cells`` (Arrow batches), each into a fresh table; reads the table back with ``scan()``
(``Cell`` objects) and with ``scan_batches()`` (Arrow batches). Both paths of each direction go through the
one Rust codec: ``update`` frames encoded in Rust, ``nextK`` replies decoded in Rust.

Prints cells/s and this process's CPU seconds for each, and a final ``ratio=<add_mutation/add_cells>``
line. Run: ``make bench`` or ``.venv/bin/python integration/bench/bench_client_mutations.py [--cells N]``;
``--cluster A`` uses a running cluster of ``clusters.toml`` (``make cluster``) instead of starting one, so
runs of two trees can alternate against the same servers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import Mutation  # noqa: E402
from integration.bench.bench_client_write import cell_batches  # noqa: E402
from integration.harness import clusters  # noqa: E402

PER_ROW = 10
VALUE_BYTES = 32


def timed(label: str, cells: int, work: Callable[[], object]) -> float:
    """Run ``work``; print and return its cells/s (wall clock), with this process's CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:13s} {cells / wall:>11,.0f} cells/s  {wall:6.2f} s  (client CPU {cpu:.2f} s)")
    return cells / wall


def write_mutations(conn, table: str, cells: int) -> None:  # noqa: ANN001
    with conn.batch_writer(table) as writer:
        for r in range(cells // PER_ROW):
            m = Mutation(b"r%08d" % r)
            for j in range(PER_ROW):
                m.put(b"f", b"q%d" % j, b"v%0*d" % (VALUE_BYTES - 1, r * PER_ROW + j))
            writer.add_mutation(m)


def write_cells(conn, table: str, cells: int) -> None:  # noqa: ANN001
    with conn.batch_writer(table) as writer:
        for batch in cell_batches(cells, PER_ROW, VALUE_BYTES, 100_000):
            writer.add_cells(batch)


def count_cells(conn, table: str, cells: int) -> None:  # noqa: ANN001
    n = sum(1 for _ in conn.scan(table, batch_size=10_000))
    assert n == cells, f"scan() read {n} cells"


def count_batches(conn, table: str, cells: int) -> None:  # noqa: ANN001
    n = sum(b.num_rows for b in conn.scan_batches(table, batch_size=10_000))
    assert n == cells, f"scan_batches() read {n} cells"


@contextlib.contextmanager
def connection(cluster: str | None) -> Iterator[object]:
    """A connection to ``cluster`` of clusters.toml, or to an embedded cluster started for the run."""
    if cluster:
        from connector.clusters_config import cluster as configured

        with configured(cluster).connect() as conn:
            yield conn
        return
    with clusters(["a"]) as running, running["a"].connect() as conn:
        yield conn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=200_000)
    parser.add_argument("--cluster", help="a running cluster of clusters.toml (default: start an embedded one)")
    opts = parser.parse_args()
    cells = opts.cells - opts.cells % PER_ROW
    with connection(opts.cluster) as conn:
        mutations, cell_table = (f"bench_mutations_{os.getpid()}", f"bench_cells_{os.getpid()}")
        for table in (mutations, cell_table):
            conn.create_table(table)
        try:
            per_object = timed("add_mutation", cells, lambda: write_mutations(conn, mutations, cells))
            batches = timed("add_cells", cells, lambda: write_cells(conn, cell_table, cells))
            conn.flush_table(cell_table)
            timed("scan", cells, lambda: count_cells(conn, cell_table, cells))
            timed("scan_batches", cells, lambda: count_batches(conn, cell_table, cells))
        finally:
            for table in (mutations, cell_table):
                conn.delete_table(table, missing_ok=True)
        print(f"cells={cells} cells_per_row={PER_ROW} value_bytes={VALUE_BYTES}")
        print(f"ratio={per_object / batches:.3f}")


if __name__ == "__main__":
    main()
