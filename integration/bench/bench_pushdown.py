"""Benchmark: a selective query on ``spark.read.format("accumulo")`` with the option ``pushdown`` (Spark's
row and family filters become the scan's range and columns) against the same query without it (every tablet
scanned, Spark filters), in one run on one embedded cluster and Spark ``local[2]``.

The table holds N cells (default 1M; 10 per row, rows ``r%08d``, family ``f``, 32-byte values) in 8 tablets,
flushed to files. The query keeps the rows of a 1% slice (``--fraction``) in the middle of the table. Each
variant runs ``--rounds`` times, alternating, after a warm-up read; the medians are compared. Prints both and
a final ``ratio=<full scan seconds / pushed-down seconds>`` line (above 1: pushdown is faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark.sql import functions as F  # noqa: E402, N812

from connector.spark import spark_session  # noqa: E402
from integration.bench.bench_client_write import cell_batches  # noqa: E402
from integration.harness import clusters  # noqa: E402

PER_ROW = 10
TABLE = "bench_pushdown"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--tablets", type=int, default=8)
    parser.add_argument("--fraction", type=float, default=0.01, help="share of the rows the query keeps")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    rows = opts.cells // PER_ROW
    first = int(rows * (0.5 - opts.fraction / 2))
    last = first + max(1, int(rows * opts.fraction))  # exclusive
    with clusters(["a"]) as running:
        a = running["a"]
        conn = a.connect()
        conn.create_table(TABLE)
        conn.add_splits(TABLE, [f"r{rows * i // opts.tablets:08d}" for i in range(1, opts.tablets)])
        with conn.batch_writer(TABLE) as writer:
            for cells in cell_batches(opts.cells, PER_ROW, 32, 10_000):
                writer.add_cells(cells)
        conn.flush_table(TABLE)
        conn.close()

        spark = spark_session("local[2]", "bench pushdown")
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        options = {**a.gateway_options().to_options(""), "table": TABLE}
        where = ((F.col("row") >= F.lit(bytearray(f"r{first:08d}".encode())))
                 & (F.col("row") < F.lit(bytearray(f"r{last:08d}".encode()))) & (F.col("cf") == F.lit(bytearray(b"f"))))

        def query(pushdown: bool) -> tuple[float, int, int]:
            df = spark.read.format("accumulo").options(**options, pushdown=str(pushdown).lower()).load().filter(where)
            started = time.perf_counter()
            count = df.count()
            return time.perf_counter() - started, count, df.rdd.getNumPartitions()

        query(True), query(False)  # warm-up: Python workers, JIT
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(opts.rounds):
            for pushdown in (True, False):
                seconds, count, tasks = query(pushdown)
                assert count == (last - first) * PER_ROW, f"pushdown={pushdown} read {count} cells"
                times[pushdown].append(seconds)
                print(f"pushdown={pushdown}: {seconds:.2f}s, {count} cells kept, {tasks} tasks")
        spark.stop()
    pushed, full = statistics.median(times[True]), statistics.median(times[False])
    print(f"cells={opts.cells} tablets={opts.tablets} kept={(last - first) * PER_ROW} ({opts.fraction:.1%} of "
          f"the rows), medians of {opts.rounds}: pushed down {pushed:.2f}s, full scan {full:.2f}s")
    print(f"ratio={full / pushed:.2f}")


if __name__ == "__main__":
    main()
