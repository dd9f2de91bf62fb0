"""Benchmark: add-to-visible latency of the streaming drain under a steady load (default 2k entries/s for
60 s). A producer adds entries at a fixed rate and remembers when; a poller scans B for newly visible
cells (rows are increasing sequence numbers, so each poll scans only what is new). Measures the Spark stream
and the in-process stream (``stream_drain`` on a ``LocalEngine``) in turn, each on a queue of its own, and prints
each one's p50/p99/max and a final ``ratio=<Spark's p50 / the in-process stream's p50>``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import Connection, Range  # noqa: E402
from connector.jobs import DrainReport, LocalEngine, stream_drain  # noqa: E402
from connector.queue import DrainSettings, ExportQueue, QueueConfig  # noqa: E402
from connector.spark import DrainJob, spark_session, start_stream  # noqa: E402
from integration.harness import Cluster, clusters  # noqa: E402


def percentile(values: Sequence[float] | np.ndarray, p: float) -> float:
    ordered = np.sort(np.asarray(values, dtype=float))
    return float(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))])


class RateProducer:
    """Adds entries seq = 0 .. total-1 to ``queue`` at ``rate`` per second (a flush per ``tick``), each putting the
    cell row ``<seq:012d>`` on B. ``added_at[seq]``: the ``perf_counter`` time the entry was added (before its
    tick's flush, as the adds themselves are); ``added``: how many so far."""

    def __init__(self, cluster: Cluster, queue: QueueConfig, rate: int, total: int, tick: float = 0.05) -> None:
        self.cluster, self.queue, self.rate, self.tick = cluster, queue, rate, tick
        self.added_at = np.full(total, np.nan)
        self.added = 0

    def export(self, seq: int) -> tuple[object, object, int]:
        """The entry added as ``seq``: (key, value, export seq); here it puts the cell row ``<seq:012d>``."""
        cell = {"row": f"{seq:012d}", "cf": "f", "cq": "q", "value": "x"}
        return seq, {"new": [cell]}, seq + 1

    def run(self) -> None:
        total = len(self.added_at)
        with ExportQueue(self.cluster.connect(), self.queue) as q:
            per_tick = max(1, int(self.rate * self.tick))
            start = time.perf_counter()
            seq = 0
            while seq < total:
                first = seq
                for _ in range(min(per_tick, total - seq)):
                    q.add(*self.export(seq))
                    seq += 1
                self.added_at[first:seq] = time.perf_counter()
                q.flush()
                self.added = seq
                next_tick = start + (seq / self.rate)
                now = time.perf_counter()
                if next_tick > now:
                    time.sleep(next_tick - now)


def poll_visible(conn_b: Connection, table: str, producer: RateProducer, deadline: float,
                 every: float = 0.05, settle: float | None = None) -> np.ndarray:
    """Scan ``table`` on B until every cell of ``producer``'s entries is visible or ``deadline`` (perf_counter)
    passes; with ``settle``, until ``settle`` seconds after the producer added its last entry instead (a producer
    slowed by a busy machine ends late), ``deadline`` still bounding it. Returns ``seen_at``: per seq, the start
    time of the poll that first saw its cell (NaN: never seen). Buckets drain in parallel, so cells appear out of
    seq order: each poll scans from the lowest unseen seq."""
    total = len(producer.added_at)
    seen_at = np.full(total, np.nan)
    lowest_unseen = 0

    def waiting(now: float) -> bool:
        if settle is None or now >= deadline:
            return now < deadline
        return producer.added < total or now < float(np.nanmax(producer.added_at)) + settle

    while lowest_unseen < total and waiting(time.perf_counter()):
        now = time.perf_counter()
        if lowest_unseen < producer.added:
            for cell in conn_b.scan(table, Range.rows(f"{lowest_unseen:012d}", None), batch_size=5000):
                s = int(cell.row)
                if np.isnan(seen_at[s]):
                    seen_at[s] = now
            while lowest_unseen < total and not np.isnan(seen_at[lowest_unseen]):
                lowest_unseen += 1
        time.sleep(every)
    return seen_at


class SparkStream:
    """The Spark stream (``start_stream``), with its micro-batches' phases printed at the end."""

    name = "spark"

    def __init__(self, job: DrainJob) -> None:
        self.spark = spark_session(app_name="bench latency")
        self.spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")  # keep every batch's phases
        tmp = tempfile.mkdtemp(prefix="latency-")
        self.query = start_stream(self.spark, job, f"{tmp}/ckpt", f"{tmp}/reports")
        self.first_measured = 0

    def measuring(self) -> None:
        self.first_measured = len(self.query.recentProgress)

    def stop(self) -> None:
        progress = self.query.recentProgress[self.first_measured:]
        self.query.stop()
        self.spark.stop()
        phases_seen = sorted({k for p in progress for k in p.durationMs})
        print("phase medians (ms): " + ", ".join(
            f"{k}={percentile([p.durationMs.get(k, 0) for p in progress], 50)}" for k in phases_seen))
        slow = sorted(progress, key=lambda p: -p.durationMs.get("triggerExecution", 0))[:5]
        print(f"micro-batches={len(progress)}; slowest, with their phases (ms):")
        for p in slow:
            phases = ", ".join(f"{k}={v}" for k, v in sorted(p.durationMs.items()) if v)
            print(f"  batch {p.batchId}: rows={p.numInputRows} {phases}")


class LocalStream:
    """The in-process stream (``stream_drain`` on a ``LocalEngine``: threads of this process, no Spark)."""

    name = "local"

    def __init__(self, job: DrainJob) -> None:
        self.stopping = threading.Event()
        self.report: DrainReport | None = None
        self.thread = threading.Thread(target=self._run, args=(job,), daemon=True)
        self.thread.start()
        self.first_measured = 0

    def _run(self, job: DrainJob) -> None:
        self.report = stream_drain(LocalEngine(), job, stop=self.stopping, progress=self._progress)

    def _progress(self, report: DrainReport) -> None:
        self.report = report  # the live report: stream_drain returns it only at the end

    def measuring(self) -> None:
        self.first_measured = len(self.report.batch_seconds) if self.report else 0

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=120)
        rounds = list(self.report.batch_seconds)[self.first_measured:] if self.report else []
        if rounds:
            print(f"rounds={len(rounds)} round seconds p50={percentile(rounds, 50):.3f} "
                  f"p99={percentile(rounds, 99):.3f} max={max(rounds):.3f}")


def measure(stream_kind: type[SparkStream] | type[LocalStream], a: Cluster, b: Cluster,
            opts: argparse.Namespace) -> tuple[float, float]:
    """Start one kind of stream on a queue of its own, put the steady load through it, print its latencies;
    returns (p50, p99) in seconds."""
    name = stream_kind.name
    queue = QueueConfig(table=f"lat_queue_{name}", qid="lq", num_buckets=opts.buckets,
                        value_serializer=opts.encoding)
    ExportQueue(a.connect(), queue).init()
    dest = f"lat_dest_{name}"
    # two groups (one per core): fewer, larger tasks per round keep latency down
    job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue, dest_table=dest,
                   settings=DrainSettings(buckets_per_partition=-(-opts.buckets // 2), trigger_seconds=opts.trigger))
    conn_b = b.connect()
    conn_b.create_table(dest, exist_ok=True)
    started = time.perf_counter()
    stream = stream_kind(job)
    if not opts.include_startup:
        # steady state: one entry through the stream first (bench_small_drain measures start-up); its row
        # sorts before the measured ones, which the poller scans
        with ExportQueue(a.connect(), queue) as q:
            q.add(-1, {"new": [{"row": "!warm-up", "cf": "f", "cq": "q", "value": "x"}]}, 1)
        while not any(True for _ in conn_b.scan(dest, Range.rows("!warm-up", "!warm-up"))):
            time.sleep(0.05)
        print(f"[{name}] stream start-up (start to first export visible): {time.perf_counter() - started:.1f}s")
    stream.measuring()
    total = opts.rate * opts.seconds
    producer = RateProducer(a, queue, opts.rate, total)
    producing = threading.Thread(target=producer.run)
    producing.start()
    seen_at = poll_visible(conn_b, dest, producer, deadline=time.perf_counter() + opts.seconds + 120)
    producing.join()
    stream.stop()
    latencies = (seen_at - producer.added_at)[~np.isnan(seen_at)]
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    print(f"[{name}] entries={total} rate={opts.rate}/s buckets={opts.buckets} trigger={opts.trigger}s "
          f"encoding={opts.encoding} seen={len(latencies)} (all must be seen)")
    print(f"[{name}] latency p50={p50:.3f}s p99={p99:.3f}s max={latencies.max():.3f}s")
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--buckets", type=int, default=13)
    parser.add_argument("--trigger", type=float, default=0.2)
    parser.add_argument("--encoding", default="json", help="the queues' value encoding: json or packed")
    parser.add_argument("--streams", default="spark,local",
                        help="the streams measured in turn, comma-separated: spark (start_stream), local (the "
                             "in-process stream_drain); the ratio: the first's p50 over the last's")
    parser.add_argument("--include-startup", action="store_true",
                        help="start the load with the stream, so its start-up counts in the latencies (by default "
                             "the load starts once a first entry has been exported, and start-up is printed apart)")
    opts = parser.parse_args()
    kinds: dict[str, type[SparkStream] | type[LocalStream]] = {"spark": SparkStream, "local": LocalStream}
    with clusters(("a", "b")) as running:
        results = [measure(kinds[name], running["a"], running["b"], opts) for name in opts.streams.split(",")]
    print("targets: spark p50<=0.5s p99<=2s; local p99<=1s")
    print(f"ratio={results[0][0] / results[-1][0]:.3f}")


if __name__ == "__main__":
    main()
