"""Benchmark: the same cells (default 2M, 10 per row, 20-byte values, each with its own timestamp) into fresh
tables of one embedded cluster, two ways, in one run:

* ``batch_writer``: ``BatchWriter.add_cells`` (native update frames into the gateway's BatchWriter), until the
  closing flush returned (durable);
* ``bulk_load``: ``sort_cells`` on each batch, ``BulkFile.add_cells`` into RFiles the gateway writes, then
  ``BulkImport.load()`` (importDirectory ... tableTime(false)), until the cells are visible.

Building the Arrow batches counts in both. Afterwards both tables are counted and a sample of the bulk-loaded
cells is checked for its timestamps. Prints each time and rate and a final ``ratio=<bulk rate / batch writer
rate>`` line. The clusters share the machine with everything else running on it (the figures move with its
load). Run: ``make bench`` or ``.venv/bin/python integration/bench/bench_bulk_load.py [--cells N]``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from connector.accumulo import (  # noqa: E402
    UPDATE_SCHEMA,  # noqa: E402
    Range,
    sort_cells,
)
from integration.harness import clusters  # noqa: E402


def cell_batches(start: int, stop: int, per_row: int, value_bytes: int, batch: int) -> Iterator[pa.RecordBatch]:
    """Cells ``r%09d / f / q<j> = v<zero-padded cell number>`` at timestamp = cell number + 1, in key order."""
    digits = value_bytes - 1
    for first in range(start, stop, batch):
        n = np.arange(first, min(first + batch, stop), dtype=np.int64)
        row = pc.binary_join_element_wise("r", pc.utf8_lpad(pa.array(n // per_row).cast(pa.string()), 9, "0"), "")
        cq = pc.binary_join_element_wise("q", pc.utf8_lpad(pa.array(n % per_row).cast(pa.string()), 4, "0"), "")
        value = pc.binary_join_element_wise("v", pc.utf8_lpad(pa.array(n).cast(pa.string()), digits, "0"), "")
        size = len(n)
        yield pa.record_batch([row.cast(pa.binary()), pa.array(np.full(size, b"f"), pa.binary()),
                               cq.cast(pa.binary()), pa.array(np.full(size, b""), pa.binary()),
                               pa.array(n + 1), value.cast(pa.binary()), pa.array(np.zeros(size, dtype=bool))],
                              schema=UPDATE_SCHEMA)


def batch_writer_load(conn, table: str, opts: argparse.Namespace) -> float:
    conn.create_table(table)
    started = time.perf_counter()
    with conn.batch_writer(table) as writer:
        for cells in cell_batches(0, opts.cells, opts.per_row, opts.value_bytes, opts.batch):
            writer.add_cells(cells)
    return time.perf_counter() - started


def bulk_load(conn, table: str, opts: argparse.Namespace) -> float:
    """``opts.files`` files, each a contiguous share of the cells, written on as many threads."""
    conn.create_table(table)
    started = time.perf_counter()
    with conn.bulk_import(table) as bulk:
        share = -(-opts.cells // opts.files)
        errors: list[BaseException] = []

        def write(i: int) -> None:
            try:
                with bulk.file(f"part{i:03d}") as f:
                    for cells in cell_batches(i * share, min(opts.cells, (i + 1) * share), opts.per_row,
                                              opts.value_bytes, opts.batch):
                        f.add_cells(sort_cells(cells))
            except BaseException as exc:  # noqa: BLE001 - raised below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(opts.files)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        written = time.perf_counter() - started
        bulk.load()
    seconds = time.perf_counter() - started
    print(f"  bulk: files written in {written:.2f}s, loaded in {seconds - written:.2f}s")
    return seconds


def check(conn, plain: str, bulk: str, opts: argparse.Namespace) -> None:
    for table in (plain, bulk):
        n = sum(b.num_rows for b in conn.scan_batches(table, batch_size=50_000))
        assert n == opts.cells, f"{table}: {n} cells, expected {opts.cells}"
    row = opts.cells // opts.per_row // 2
    sample = list(conn.scan(bulk, Range.exact_row(b"r%09d" % row)))
    assert [c.ts for c in sample] == [row * opts.per_row + j + 1 for j in range(opts.per_row)], sample[:3]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=2_000_000)
    parser.add_argument("--per-row", type=int, default=10)
    parser.add_argument("--value-bytes", type=int, default=20)
    parser.add_argument("--batch", type=int, default=100_000, help="cells per add_cells batch")
    parser.add_argument("--files", type=int, default=1, help="RFiles of the bulk load, written side by side")
    opts = parser.parse_args()
    with clusters(["a"]) as running, running["a"].connect() as conn:
        plain_s = batch_writer_load(conn, "bench_batch_writer", opts)
        bulk_s = bulk_load(conn, "bench_bulk", opts)
        check(conn, "bench_batch_writer", "bench_bulk", opts)
        plain_rate, bulk_rate = opts.cells / plain_s, opts.cells / bulk_s
        print(f"cells={opts.cells} cells_per_row={opts.per_row} value_bytes={opts.value_bytes} files={opts.files}")
        print("(one embedded cluster on a machine shared with other work: figures vary with its load)")
        print(f"batch_writer: {plain_s:.2f}s {plain_rate:,.0f} cells/s")
        print(f"bulk_load:    {bulk_s:.2f}s {bulk_rate:,.0f} cells/s")
        print(f"ratio={bulk_rate / plain_rate:.3f}")


if __name__ == "__main__":
    main()
