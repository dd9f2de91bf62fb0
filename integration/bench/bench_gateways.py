"""Benchmark: the same drain through one gateway per cluster vs through two, on one machine, in one run.

Two queues of N entries (default 100k over 257 buckets) are filled on A; the first is drained into B through
one standalone gateway per cluster, the second through a pool of two per cluster (each socket takes the next
gateway in turn), with the in-process engine (``--spark``: a local[2] Spark session). Each entry is an insert
of one cell on B. On one machine the second gateway adds a JVM that competes for the same cores, so expect
little gain: the point is that spreading works and what it costs. Final line: ``ratio=<two/one>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status  # noqa: E402
from connector.spark import DrainJob, run_batch, spark_session  # noqa: E402
from integration.harness import clusters, gateway_pool, pool_options  # noqa: E402


def fill(conn, queue: QueueConfig, entries: int, per_row: int) -> float:  # noqa: ANN001
    started = time.perf_counter()
    with ExportQueue(conn, queue) as q:
        q.init()
        for c in range(entries):
            cell = {"row": f"r{c // per_row:08d}", "cf": "f", "cq": f"q{c % per_row}", "value": f"v{c:031d}"}
            q.add(c, {"new": [cell]}, 1000 + c)
    assert queue_status(conn, queue).entries == entries
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--buckets", type=int, default=257)
    parser.add_argument("--per-row", type=int, default=10)
    parser.add_argument("--spark", action="store_true", help="drain with a local[2] Spark session")
    parser.add_argument("--two-first", action="store_true", help="drain through two gateways first (order check)")
    opts = parser.parse_args()
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        conn_a = a.connect()
        queues = {n: QueueConfig(table=f"bench_gw{n}_queue", qid=f"g{n}", num_buckets=opts.buckets) for n in (1, 2)}
        fill_s = sum(fill(conn_a, q, opts.entries, opts.per_row) for q in queues.values())
        spark = spark_session(app_name="bench gateways") if opts.spark else None
        rates: dict[int, float] = {}
        for n, queue in sorted(queues.items(), reverse=opts.two_first):
            with gateway_pool(a, n) as source, gateway_pool(b, n) as dest:
                job = DrainJob(source=pool_options(source), dest=pool_options(dest), queue=queue,
                               dest_table=f"bench_gw{n}_drained",
                               settings=DrainSettings(buckets_per_partition=max(1, opts.buckets // 8),
                                                      create_dest_table=True))
                load = os.getloadavg()[0]
                started = time.perf_counter()
                report = run_batch(spark, job)
                seconds = time.perf_counter() - started
            with b.connect() as conn_b:
                cells = sum(1 for _ in conn_b.scan(job.dest_table, batch_size=20_000))
            assert cells == opts.entries, f"{cells} cells on B through {n} gateway(s)"
            rates[n] = report.exported / seconds
            print(f"{n} gateway(s) per cluster: {seconds:.2f}s {rates[n]:,.0f} entries/s "
                  f"(load average at start {load:.1f}, at end {os.getloadavg()[0]:.1f})", flush=True)
        if spark is not None:
            spark.stop()
        print(f"entries={opts.entries} buckets={opts.buckets} engine={'spark' if opts.spark else 'local'} "
              f"queue_fill={2 * opts.entries / fill_s:,.0f} entries/s")
        print(f"ratio={rates[2] / rates[1]:.3f}")


if __name__ == "__main__":
    main()
