"""Benchmark: end-to-end Spark drain of N queue entries (default 1M over 1009 buckets) from cluster A into
cluster B, in entries/s, next to a raw Java BatchWriter ingest of the same destination cells into B, in
one run. Each entry is an insert of one cell (``difference`` update with no old cells), the cells being
exactly those BenchWriter generates (10 per row, 32-byte values). Each queue value encoding of
``--encodings`` (default json, then packed) is filled and drained in turn, in one Spark session, after a small
unmeasured drain that starts the session's Python workers (``--warm-up``). Final line:
``ratio=<drain/raw>`` of the last encoding.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status  # noqa: E402
from connector.spark import DrainJob, run_batch, spark_session  # noqa: E402
from integration.bench.bench_client_write import java_write  # noqa: E402
from integration.harness import clusters  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=1009)
    parser.add_argument("--per-row", type=int, default=10)
    parser.add_argument("--warm-up", type=int, default=2000,
                        help="entries of a first, unmeasured drain that starts the session's Python workers (0: none)")
    parser.add_argument("--encodings", default="json,packed",
                        help="queue value encodings drained in turn, comma-separated (the ratio: the last's)")
    opts = parser.parse_args()
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        raw_s = java_write(b, running.classpath, "bench_raw_ingest", opts.entries, opts.per_row, 32)

        rates = {}
        spark = spark_session(app_name="bench drain")
        if opts.warm_up:
            # Spark's Python workers start, and load the connector, in the first job of a session: a small drain
            # takes that, so each measured drain is a warm one whatever its place
            warm = QueueConfig(table="bench_warm", qid="w", num_buckets=opts.buckets)
            with ExportQueue(a.connect(), warm) as q:
                q.init()
                q.add_all((c, {"new": [{"row": f"w{c}", "cf": "f", "cq": "q", "value": "v"}]}, 1 + c)
                          for c in range(opts.warm_up))
            run_batch(spark, DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=warm,
                                      dest_table="bench_warm_drained",
                                      settings=DrainSettings(buckets_per_partition=max(1, opts.buckets // 8),
                                                             create_dest_table=True)))
        for encoding in opts.encodings.split(","):
            queue = QueueConfig(table=f"bench_queue_{encoding}", qid="bq", num_buckets=opts.buckets,
                                value_serializer=encoding)
            conn_a = a.connect()
            started = time.perf_counter()
            with ExportQueue(conn_a, queue) as q:
                q.init()
                q.add_all((c, {"new": [{"row": f"r{c // opts.per_row:08d}", "cf": "f", "cq": f"q{c % opts.per_row}",
                                        "value": f"v{c:031d}"}]}, 1000 + c) for c in range(opts.entries))
            fill_s = time.perf_counter() - started
            assert queue_status(conn_a, queue).entries == opts.entries
            job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue,
                           dest_table=f"bench_drained_{encoding}",
                           settings=DrainSettings(buckets_per_partition=max(1, opts.buckets // 8),
                                                  create_dest_table=True))
            started = time.perf_counter()
            report = run_batch(spark, job)
            drain_s = time.perf_counter() - started
            with b.connect() as conn_b:
                drained_cells = sum(1 for _ in conn_b.scan(f"bench_drained_{encoding}", batch_size=20_000))
            assert drained_cells == opts.entries, f"{drained_cells} cells on B"
            rates[encoding] = report.exported / drain_s
            print(f"encoding={encoding} entries={opts.entries} buckets={opts.buckets} rounds={report.rounds}")
            print(f"  queue_fill (python producer): {fill_s:.1f}s {opts.entries / fill_s:,.0f} entries/s")
            print(f"  spark_drain:      {drain_s:.2f}s {rates[encoding]:,.0f} entries/s "
                  f"({rates[encoding] / (opts.entries / raw_s):.3f} of raw ingest)")
        spark.stop()
        raw_rate = opts.entries / raw_s
        print(f"raw_java_ingest:  {raw_s:.2f}s {raw_rate:,.0f} cells/s")
        print(f"ratio={rates[opts.encodings.split(',')[-1]] / raw_rate:.3f}")


if __name__ == "__main__":
    main()
