"""Benchmark: add-to-visible latency of the streaming drain under a steady load (default 2k entries/s for
60 s). A producer adds entries at a fixed rate and remembers when; a poller scans B for newly visible
cells (rows are increasing sequence numbers, so each poll scans only what is new). Prints p50/p99/max and a
final ``ratio=<p50 target / p50>`` line (>= 1 means the 1 s p50 target is met).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import Range  # noqa: E402
from connector.queue import ExportQueue, QueueConfig  # noqa: E402
from connector.spark import DrainJob, spark_session, start_stream  # noqa: E402
from integration.harness import clusters  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--buckets", type=int, default=13)
    parser.add_argument("--trigger", type=float, default=0.2)
    parser.add_argument("--include-startup", action="store_true",
                        help="start the load with the stream, so its start-up counts in the latencies (by default "
                             "the load starts once a first entry has been exported, and start-up is printed apart)")
    opts = parser.parse_args()
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        queue = QueueConfig(table="lat_queue", qid="lq", num_buckets=opts.buckets)
        conn_a = a.connect()
        ExportQueue(conn_a, queue).init()
        spark = spark_session(app_name="bench latency")
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")  # keep every batch's phases
        # two partitions (one per core): fewer, larger tasks per micro-batch keep latency down
        job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue, dest_table="lat_dest",
                       buckets_per_partition=-(-opts.buckets // 2))
        tmp = tempfile.mkdtemp(prefix="latency-")
        conn_b = b.connect()
        conn_b.create_table("lat_dest", exist_ok=True)
        started = time.perf_counter()
        query = start_stream(spark, job, f"{tmp}/ckpt", f"{tmp}/reports", trigger_seconds=opts.trigger)
        if not opts.include_startup:
            # steady state: one entry through the stream first (bench_small_drain measures start-up)
            with ExportQueue(a.connect(), queue) as q:
                q.add(-1, {"new": [{"row": "warm-up", "cf": "f", "cq": "q", "value": "x"}]}, 1)
            while not any(True for _ in conn_b.scan("lat_dest", Range.rows("warm-up", "warm-up"))):
                time.sleep(0.05)
            print(f"stream start-up (start to first export visible): {time.perf_counter() - started:.1f}s")
        first_measured = len(query.recentProgress)
        added_at: dict[int, float] = {}
        total = opts.rate * opts.seconds
        done = threading.Event()

        def produce() -> None:
            with ExportQueue(a.connect(), queue) as q:
                tick = 0.05
                per_tick = max(1, int(opts.rate * tick))
                start = time.perf_counter()
                seq = 0
                while seq < total:
                    for _ in range(per_tick):
                        cell = {"row": f"{seq:012d}", "cf": "f", "cq": "q", "value": "x"}
                        q.add(seq, {"new": [cell]}, seq + 1)
                        added_at[seq] = time.perf_counter()
                        seq += 1
                    q.flush()
                    now = time.perf_counter()
                    next_tick = start + (seq / opts.rate)
                    if next_tick > now:
                        time.sleep(next_tick - now)
            done.set()

        latencies: list[float] = []
        producer = threading.Thread(target=produce)
        producer.start()
        # buckets drain in parallel, so cells appear out of seq order: scan from the lowest unseen seq
        seen: set[int] = set()
        lowest_unseen = 0
        deadline = time.perf_counter() + opts.seconds + 120
        while lowest_unseen < total and time.perf_counter() < deadline:
            now = time.perf_counter()
            for cell in conn_b.scan("lat_dest", Range.rows(f"{lowest_unseen:012d}", None), batch_size=5000):
                if not cell.row.isdigit():
                    continue  # the warm-up entry
                s = int(cell.row)
                if s not in seen:
                    seen.add(s)
                    latencies.append(now - added_at[s])
            while lowest_unseen in seen:
                lowest_unseen += 1
            time.sleep(0.05)
        producer.join()
        progress = query.recentProgress[first_measured:]
        query.stop()
        spark.stop()
        phases_seen = sorted({k for p in progress for k in p.durationMs})
        print("phase medians (ms): " + ", ".join(
            f"{k}={percentile([p.durationMs.get(k, 0) for p in progress], 50)}" for k in phases_seen))
        slow = sorted(progress, key=lambda p: -p.durationMs.get("triggerExecution", 0))[:5]
        print(f"micro-batches={len(progress)}; slowest, with their phases (ms):")
        for p in slow:
            phases = ", ".join(f"{k}={v}" for k, v in sorted(p.durationMs.items()) if v)
            print(f"  batch {p.batchId}: rows={p.numInputRows} {phases}")
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        print(f"entries={total} rate={opts.rate}/s buckets={opts.buckets} trigger={opts.trigger}s "
              f"seen={len(latencies)} (all must be seen)")
        print(f"latency p50={p50:.3f}s p99={p99:.3f}s max={max(latencies):.3f}s (targets p50<=0.5s p99<=2s)")
        print(f"ratio={1.0 / p50:.3f}")


if __name__ == "__main__":
    main()
