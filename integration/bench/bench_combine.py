"""Benchmark: 1M updates over 100k keys with a Zipf skew, queued to a combine queue and combined with Spark
(the sum combiner, an observer exporting every changed value to an export queue), next to a raw Java
BatchWriter ingest of the same number of cells into the same embedded cluster.

Prints updates/s for queueing and for combining, the Java cells/s, and a final ``ratio=<combine/java>``.
Run: ``make bench`` or ``.venv/bin/python integration/bench/bench_combine.py [--updates N --keys K]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.combine import CombineConfig, CombineQueue, combine_status  # noqa: E402
from connector.queue import ExportQueue, QueueConfig, queue_status  # noqa: E402
from connector.spark import spark_session  # noqa: E402
from connector.spark.combine_job import CombineJob, run_combine  # noqa: E402
from integration.bench.bench_client_write import java_write  # noqa: E402
from integration.harness import clusters  # noqa: E402


def zipf_keys(updates: int, keys: int, skew: float, seed: int = 1) -> np.ndarray:
    weights = 1.0 / np.arange(1, keys + 1) ** skew
    return np.random.default_rng(seed).choice(keys, size=updates, p=weights / weights.sum())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--skew", type=float, default=1.0)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--buckets-per-task", type=int, default=None)
    opts = parser.parse_args()
    with clusters(["a"]) as running:
        a = running["a"]
        java_s = java_write(a, running.classpath, "bench_java", opts.updates, 10, 8)

        conn = a.connect()
        combine = CombineConfig(table="bench_combine", cid="c", num_buckets=opts.buckets)
        export = QueueConfig(table="bench_exports", qid="x", num_buckets=opts.buckets)
        CombineQueue(conn, combine).init()
        ExportQueue(conn, export).init()
        keys = zipf_keys(opts.updates, opts.keys, opts.skew)
        distinct = len(np.unique(keys))
        names = [f"k{i:06d}" for i in range(opts.keys)]
        t0 = time.perf_counter()
        with CombineQueue(conn, combine) as q:
            q.update_all((names[k], 1) for k in keys.tolist())
        queue_s = time.perf_counter() - t0

        spark = spark_session(opts.master, app_name="bench_combine")
        job = CombineJob(source=a.gateway_options(), combine=combine, observer="changes", export_queue=export,
                         buckets_per_partition=opts.buckets_per_task)
        t1 = time.perf_counter()
        report = run_combine(spark, job)
        combine_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        run_combine(spark, job)  # nothing left: what a round costs by itself
        empty_s = time.perf_counter() - t2
        spark.stop()

        assert report.totals.updates == opts.updates, f"combined {report.totals.updates} of {opts.updates}"
        assert combine_status(conn, combine).empty, "updates or outbox cells left"
        top = CombineQueue(conn, combine).get(names[0])
        assert top == int((keys == 0).sum()), "the hottest key's count is wrong"
        exported = queue_status(conn, export).entries

        java_rate, queue_rate, combine_rate = opts.updates / java_s, opts.updates / queue_s, opts.updates / combine_s
        print(f"updates={opts.updates} keys={opts.keys} distinct_keys_updated={distinct} zipf_skew={opts.skew} "
              f"hottest_key_updates={top} buckets={opts.buckets}")
        print(f"java_batchwriter: {java_s:.2f}s {java_rate:,.0f} cells/s")
        print(f"python_queue_updates: {queue_s:.2f}s {queue_rate:,.0f} updates/s")
        print(f"spark_combine: {combine_s:.2f}s {combine_rate:,.0f} updates/s ({report.rounds} rounds, "
              f"{report.totals.changed} keys changed, {exported} exports queued, "
              f"{report.totals.conflicts} lost conditions; tasks' own time {report.totals.seconds:.1f}s; "
              f"a round over the empty queue takes {empty_s:.2f}s)")
        print(f"ratio={combine_rate / java_rate:.3f}")


if __name__ == "__main__":
    main()
