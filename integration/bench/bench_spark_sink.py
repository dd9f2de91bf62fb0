"""Benchmark: a plain DataFrame of N cells (default 500k; columns row, cf, cq, value, seq) written with
``df.write.format("accumulo-export").mode("append")`` and the ``cells`` translator on Spark ``local[2]``,
next to ``BatchWriter.add_cells`` of the same cells (ts = seq) from this process, into fresh tables of one
embedded cluster, in one run.

The DataFrame is generated and cached by Spark before any clock starts (a JVM-only job: no Python worker
runs). The same cells are then written twice in the same session, each into a fresh table: the **first
write** of the session, which also starts Spark's Python workers and loads the connector in them (what a
user's first ``df.write`` costs), and a **later write** (steady state, as a long job sees it), which the
ratio uses. The ``add_cells`` side gets its cells as ready-made Arrow batches (built before its clock),
written in batches of 10,000 with one flush at the end, once before and once after the sink (their mean is
compared, as the machine's load moves). Every table is scanned afterwards to check every cell arrived.
Prints the session's start-up, each write's seconds and cells/s, and a final ``ratio=<later
write/add_cells>`` line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from connector.accumulo import UPDATE_SCHEMA  # noqa: E402
from connector.spark import spark_session  # noqa: E402
from integration.harness import clusters  # noqa: E402

PER_ROW = 10


def cell_batches(cells: int, batch: int) -> list[pa.RecordBatch]:
    """Cells ``r%08d / f / q<j> = v<31 digits>`` at ts = cell number + 1, as the DataFrame has them."""
    out = []
    for start in range(0, cells, batch):
        n = np.arange(start, min(start + batch, cells), dtype=np.int64)
        row = pc.binary_join_element_wise("r", pc.utf8_lpad(pa.array(n // PER_ROW).cast(pa.string()), 8, "0"), "")
        cq = pc.binary_join_element_wise("q", pa.array(n % PER_ROW).cast(pa.string()), "")
        value = pc.binary_join_element_wise("v", pc.utf8_lpad(pa.array(n).cast(pa.string()), 31, "0"), "")
        size = len(n)
        out.append(pa.record_batch([row.cast(pa.binary()), pa.array(np.full(size, b"f"), pa.binary()),
                                    cq.cast(pa.binary()), pa.array(np.full(size, b""), pa.binary()),
                                    pa.array(n + 1), value.cast(pa.binary()), pa.array(np.zeros(size, dtype=bool))],
                                   schema=UPDATE_SCHEMA))
    return out


def cells_frame(spark, cells: int, partitions: int):  # noqa: ANN001, ANN201 - a Spark DataFrame
    return spark.range(0, cells, numPartitions=partitions).selectExpr(
        f"concat('r', lpad(cast(id div {PER_ROW} as string), 8, '0')) as row", "'f' as cf",
        f"concat('q', cast(id % {PER_ROW} as string)) as cq", "concat('v', lpad(cast(id as string), 31, '0')) as value",
        "id + 1 as seq")


def add_cells(conn, table: str, batches: list[pa.RecordBatch]) -> float:  # noqa: ANN001
    """Seconds to write the batches into a new table through one writer, flushed at the end."""
    conn.create_table(table)
    started = time.perf_counter()
    with conn.batch_writer(table) as writer:
        for cells in batches:
            writer.add_cells(cells)
    return time.perf_counter() - started


def count_cells(conn, table: str) -> int:  # noqa: ANN001
    return sum(b.num_rows for b in conn.scan_batches(table, batch_size=20_000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=2)
    opts = parser.parse_args()
    with clusters(["b"]) as running:
        b = running["b"]
        conn = b.connect()
        batches = cell_batches(opts.cells, 10_000)
        before_s = add_cells(conn, "bench_add_cells", batches)

        started = time.perf_counter()
        spark = spark_session("local[2]", "bench spark sink")
        session_s = time.perf_counter() - started
        options = {**b.gateway_options().to_options("dest."), "translator": "cells"}
        frame = cells_frame(spark, opts.cells, opts.partitions).cache()
        assert frame.count() == opts.cells  # generated and cached in the JVM: no Python worker started yet
        seconds = {}
        for table in ("bench_sink_first", "bench_sink"):  # the session's first write, then a later one
            conn.create_table(table)
            started = time.perf_counter()
            frame.write.format("accumulo-export").mode("append").options(table=table, **options).save()
            seconds[table] = time.perf_counter() - started
        spark.stop()
        after_s = add_cells(conn, "bench_add_cells_after", batches)
        raw_s = (before_s + after_s) / 2

        for table in ("bench_add_cells", "bench_add_cells_after", "bench_sink_first", "bench_sink"):
            got = count_cells(conn, table)
            assert got == opts.cells, f"{table}: {got} cells, expected {opts.cells}"
        conn.close()
        first_s, sink_s = seconds["bench_sink_first"], seconds["bench_sink"]
        raw_rate, sink_rate = opts.cells / raw_s, opts.cells / sink_s
        print(f"cells={opts.cells} partitions={opts.partitions} (local[2]); Spark session started in {session_s:.1f}s")
        print(f"add_cells:          {raw_s:.2f}s {raw_rate:,.0f} cells/s (mean of {before_s:.2f}s before and "
              f"{after_s:.2f}s after the sink)")
        print(f"spark_sink, first:  {first_s:.2f}s {opts.cells / first_s:,.0f} cells/s (the session's first write: "
              "starts the Python workers)")
        print(f"spark_sink, later:  {sink_s:.2f}s {sink_rate:,.0f} cells/s")
        print(f"ratio={sink_rate / raw_rate:.3f}")


if __name__ == "__main__":
    main()
