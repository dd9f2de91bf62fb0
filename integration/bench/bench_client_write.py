"""Benchmark: 1M cells (10 per row, 32-byte values) written from Python through the gateway, and the same
cells written by a Java BatchWriter straight into Accumulo, into fresh tables of one embedded cluster.

Prints cells/s for each and a final ``ratio=<python/java>`` line. Run: ``make bench`` or
``.venv/bin/python integration/bench/bench_client_write.py [--cells N]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import Mutation  # noqa: E402
from integration.harness import BENCH_WRITER, clusters, java_command  # noqa: E402


def python_write(cluster, table: str, cells: int, per_row: int, value_bytes: int) -> float:
    conn = cluster.connect()
    conn.create_table(table)
    digits = value_bytes - 1
    started = time.perf_counter()
    with conn.batch_writer(table) as writer:
        for r in range(cells // per_row):
            m = Mutation(b"r%08d" % r)
            base = r * per_row
            for j in range(per_row):
                m.put(b"f", b"q%d" % j, b"v%0*d" % (digits, base + j))
            writer.add_mutation(m)
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
    opts = parser.parse_args()
    with clusters(["a"]) as running:
        a = running["a"]
        java_s = java_write(a, running.classpath, "bench_java", opts.cells, opts.per_row, opts.value_bytes)
        py_s = python_write(a, "bench_python", opts.cells, opts.per_row, opts.value_bytes)
        assert count(a, "bench_python") == opts.cells, "python cells missing"
        java_rate, py_rate = opts.cells / java_s, opts.cells / py_s
        print(f"cells={opts.cells} cells_per_row={opts.per_row} value_bytes={opts.value_bytes}")
        print(f"java_batchwriter: {java_s:.2f}s {java_rate:,.0f} cells/s")
        print(f"python_gateway:   {py_s:.2f}s {py_rate:,.0f} cells/s")
        print(f"ratio={py_rate / java_rate:.3f}")


if __name__ == "__main__":
    main()
