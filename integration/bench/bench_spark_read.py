"""Benchmark: a table of N cells (default 1M; 10 per row, 32-byte values) split into tablets (default 8),
read with ``spark.read.format("accumulo")`` on Spark ``local[2]`` (one task per tablet, written to Spark's
``noop`` sink so every row is materialised), next to ``Connection.scan_batches`` of the same table in this
process (one scan, Arrow batches counted; run before and after the Spark read, their mean compared, as
the machine's load moves), in one run against one embedded cluster.

The table is flushed to files before either read, and a small warm-up read starts Spark's Python workers
first (steady state). Both use 10,000 cells per scan page. Prints cells/s for each and a final
``ratio=<spark/scan_batches>`` line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.spark import spark_session  # noqa: E402
from integration.bench.bench_client_write import cell_batches  # noqa: E402
from integration.harness import clusters  # noqa: E402

PER_ROW = 10
PAGE = 10_000


def scan_all(conn, cells: int) -> float:  # noqa: ANN001
    """Seconds to read the whole table with one ``scan_batches`` in this process."""
    started = time.perf_counter()
    scanned = sum(b.num_rows for b in conn.scan_batches("bench_read", batch_size=PAGE))
    seconds = time.perf_counter() - started
    assert scanned == cells, f"scan_batches read {scanned} cells"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--tablets", type=int, default=8)
    opts = parser.parse_args()
    rows = opts.cells // PER_ROW
    with clusters(["a"]) as running:
        a = running["a"]
        conn = a.connect()
        conn.create_table("bench_read")
        conn.add_splits("bench_read", [f"r{rows * i // opts.tablets:08d}" for i in range(1, opts.tablets)])
        with conn.batch_writer("bench_read") as writer:
            for cells in cell_batches(opts.cells, PER_ROW, 32, 10_000):
                writer.add_cells(cells)
        conn.flush_table("bench_read")
        conn.create_table("bench_read_warmup")
        with conn.batch_writer("bench_read_warmup") as writer:
            for cells in cell_batches(1000, PER_ROW, 32, 1000):
                writer.add_cells(cells)

        before_s = scan_all(conn, opts.cells)
        spark = spark_session("local[2]", "bench spark read")
        options = {**a.gateway_options().to_options(""), "batch_size": str(PAGE)}
        spark.read.format("accumulo").options(table="bench_read_warmup", **options).load().write.format(
            "noop").mode("overwrite").save()
        df = spark.read.format("accumulo").options(table="bench_read", **options).load()
        tasks = df.rdd.getNumPartitions()
        started = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        spark_s = time.perf_counter() - started
        counted = df.count()
        spark.stop()
        after_s = scan_all(conn, opts.cells)
        conn.close()
        assert counted == opts.cells, f"the accumulo source read {counted} cells"
        scan_s = (before_s + after_s) / 2
        scan_rate, spark_rate = opts.cells / scan_s, opts.cells / spark_s
        print(f"cells={opts.cells} tablets={opts.tablets} spark_tasks={tasks} page={PAGE} (local[2])")
        print(f"scan_batches:      {scan_s:.2f}s {scan_rate:,.0f} cells/s (mean of {before_s:.2f}s before and "
              f"{after_s:.2f}s after the Spark read)")
        print(f"spark_read_source: {spark_s:.2f}s {spark_rate:,.0f} cells/s")
        print(f"ratio={spark_rate / scan_rate:.3f}")


if __name__ == "__main__":
    main()
