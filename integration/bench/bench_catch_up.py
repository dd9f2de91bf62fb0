"""Benchmark: a streaming drain catching up with a backlog, against the batch drain of the same backlog in the
same run. Fills N entries (default 1M) and drains them with ``run_batch``; fills N again and starts the
streaming drain, while a trickle producer adds new entries whose add-to-visible latency shows whether they
starve behind the backlog. Prints both rates, the trickle's latencies, the peak RSS of any Python worker,
and ``ratio=<stream rate / batch rate>`` (target >= 0.8).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import Range  # noqa: E402
from connector.queue import DrainSettings, ExportQueue, QueueConfig, count_entries  # noqa: E402
from connector.spark import DrainJob, run_batch, spark_session, start_stream  # noqa: E402
from integration.harness import clusters  # noqa: E402


def fill(conn, queue: QueueConfig, n: int, first: int) -> None:  # noqa: ANN001
    with ExportQueue(conn, queue) as q:
        q.init()
        q.add_all((f"k{i}", {"new": [{"row": f"b{i:09d}", "cf": "f", "cq": "q", "value": "v" * 24}]}, i)
                  for i in range(first, first + n))


def python_worker_rss_kb() -> int:
    peak = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            # Spark's Python daemon and the workers it forks (not the JVM, whose class path names pyspark)
            if not (b"python" in argv[0] and any(a.startswith(b"pyspark.") for a in argv[1:])):
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return peak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--trickle-rate", type=int, default=50, help="new entries/s added during catch-up")
    parser.add_argument("--max-bytes-per-trigger", type=int, default=64 << 20,
                        help="the stream's read limit (row + value bytes per micro-batch; 0: none)")
    opts = parser.parse_args()
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        conn_a, conn_b = a.connect(), b.connect()
        queue = QueueConfig(table="catch_q", qid="c", num_buckets=opts.buckets)
        spark = spark_session(app_name="bench catch-up")
        job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue, dest_table="catch_dest",
                       settings=DrainSettings(create_dest_table=True))

        fill(conn_a, queue, opts.entries, 0)
        started = time.perf_counter()
        report = run_batch(spark, job)
        batch_rate = report.exported / (time.perf_counter() - started)

        fill(conn_a, queue, opts.entries, opts.entries)
        peak_rss = 0
        tmp = tempfile.mkdtemp(prefix="catch-up-")
        trickle_added: dict[int, float] = {}
        stop = threading.Event()

        def trickle() -> None:
            with ExportQueue(a.connect(), queue) as q:
                i = 0
                while not stop.is_set():
                    q.add(f"t{i}", {"new": [{"row": f"t{i:09d}", "cf": "f", "cq": "q", "value": "t"}]}, 10**12 + i)
                    q.flush()
                    trickle_added[i] = time.perf_counter()
                    i += 1
                    time.sleep(1 / opts.trickle_rate)

        started = time.perf_counter()
        job = dataclasses.replace(job, settings=DrainSettings(
            trigger_seconds=0.5, max_bytes_per_trigger=opts.max_bytes_per_trigger or None))
        query = start_stream(spark, job, f"{tmp}/ckpt", f"{tmp}/reports")
        adder = threading.Thread(target=trickle)
        adder.start()
        trickle_seen: dict[int, float] = {}
        while count_entries(conn_a, queue, limit=200) >= 200:  # the trickle keeps a few dozen in flight at most
            peak_rss = max(peak_rss, python_worker_rss_kb())
            now = time.perf_counter()
            for cell in conn_b.scan("catch_dest", Range.prefix("t")):
                trickle_seen.setdefault(int(cell.row[1:]), now)
            if query.exception() is not None:
                raise SystemExit(f"stream failed: {query.exception()}")
            time.sleep(1)
        stream_seconds = time.perf_counter() - started
        if query.exception() is not None:
            raise SystemExit(f"stream failed: {query.exception()}")
        stop.set()
        adder.join()
        latencies = sorted(trickle_seen[i] - trickle_added[i] for i in trickle_seen if i in trickle_added)
        batches = len([p for p in query.recentProgress if p.numInputRows])
        query.stop()
        spark.stop()
        stream_rate = opts.entries / stream_seconds
        print(f"entries={opts.entries} buckets={opts.buckets}")
        print(f"batch drain:  {batch_rate:,.0f} entries/s")
        limit = f"{opts.max_bytes_per_trigger:,} bytes" if opts.max_bytes_per_trigger else "none"
        print(f"stream read limit per micro-batch: {limit}; micro-batches: {batches}, "
              f"{opts.entries / max(1, batches):,.0f} entries each on average")
        print(f"stream catch-up: {stream_rate:,.0f} entries/s ({stream_seconds:.1f} s)")
        p50 = latencies[len(latencies) // 2] if latencies else float("nan")
        print(f"trickle: {len(trickle_added)} entries added during catch-up, {len(latencies)} visible before it "
              f"ended; their latency p50={p50:.1f}s max={max(latencies, default=float('nan')):.1f}s")
        print(f"peak RSS of a Python worker: {peak_rss / 1024:.0f} MiB")
        print(f"ratio={stream_rate / batch_rate:.3f}")


if __name__ == "__main__":
    main()
