"""Benchmark: 1M cells (10 per row, 32-byte values) written from Python through the gateway, and the same
cells written by a Java BatchWriter straight into Accumulo, into fresh tables of one embedded cluster.
The Python side builds the cells as Arrow batches (pyarrow compute, no per-cell Python) and writes them
with ``BatchWriter.add_cells`` (native update frames); building the batches counts in its time.

Prints cells/s for each and a final ``ratio=<python/java>`` line. Run: ``make bench`` or
``.venv/bin/python integration/bench/bench_client_write.py [--cells N]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from connector.accumulo import UPDATE_SCHEMA  # noqa: E402
from integration.harness import BENCH_WRITER, clusters, java_command  # noqa: E402


def cell_batches(cells: int, per_row: int, value_bytes: int, batch: int) -> Iterator[pa.RecordBatch]:
    """Cells ``r%08d / f / q<j> = v<zero-padded cell number>``, as the Java writer makes them."""
    digits = value_bytes - 1
    for start in range(0, cells, batch):
        n = np.arange(start, min(start + batch, cells), dtype=np.int64)
        text = pa.array(n).cast(pa.string())
        row = pc.binary_join_element_wise("r", pc.utf8_lpad(pa.array(n // per_row).cast(pa.string()), 8, "0"), "")
        cq = pc.binary_join_element_wise("q", pa.array(n % per_row).cast(pa.string()), "")
        value = pc.binary_join_element_wise("v", pc.utf8_lpad(text, digits, "0"), "")
        size = len(n)
        yield pa.record_batch([row.cast(pa.binary()), pa.array(np.full(size, b"f"), pa.binary()),
                               cq.cast(pa.binary()), pa.array(np.full(size, b""), pa.binary()),
                               pa.nulls(size, pa.int64()), value.cast(pa.binary()),
                               pa.array(np.zeros(size, dtype=bool))], schema=UPDATE_SCHEMA)


def python_write(cluster, table: str, cells: int, per_row: int, value_bytes: int, batch: int) -> float:
    conn = cluster.connect()
    conn.create_table(table)
    started = time.perf_counter()
    with conn.batch_writer(table) as writer:
        for cells_batch in cell_batches(cells, per_row, value_bytes, batch):
            writer.add_cells(cells_batch)
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


def java_write(cluster, classpath: str, table: str, cells: int, per_row: int, value_bytes: int) -> float:
    args = [*cluster.java_args(), "--table", table, "--cells", str(cells), "--cells-per-row", str(per_row),
            "--value-bytes", str(value_bytes)]
    out = subprocess.run(java_command(classpath, BENCH_WRITER, *args), env=cluster.java_env(),
                         capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["seconds"])


def count(cluster, table: str) -> int:
    with cluster.connect() as conn:
        return sum(1 for _ in conn.scan(table, batch_size=20_000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--per-row", type=int, default=10)
    parser.add_argument("--value-bytes", type=int, default=32)
    parser.add_argument("--batch", type=int, default=100_000, help="cells per add_cells batch")
    opts = parser.parse_args()
    with clusters(["a"]) as running:
        a = running["a"]
        java_s = java_write(a, running.classpath, "bench_java", opts.cells, opts.per_row, opts.value_bytes)
        py_s = python_write(a, "bench_python", opts.cells, opts.per_row, opts.value_bytes, opts.batch)
        assert count(a, "bench_python") == opts.cells, "python cells missing"
        java_rate, py_rate = opts.cells / java_s, opts.cells / py_s
        print(f"cells={opts.cells} cells_per_row={opts.per_row} value_bytes={opts.value_bytes}")
        print(f"java_batchwriter: {java_s:.2f}s {java_rate:,.0f} cells/s")
        print(f"python_gateway:   {py_s:.2f}s {py_rate:,.0f} cells/s")
        print(f"ratio={py_rate / java_rate:.3f}")


if __name__ == "__main__":
    main()
