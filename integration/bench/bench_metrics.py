"""Benchmark: what ``--metrics-port`` costs. (1) The lag scan (``queue_lag``: keys only, the whole queue) against
``count_entries`` (the progress lines' depth count) and ``queue_status``, on a queue of ``--entries``. (2) The
same batch drain (``--engine local``) of that queue with and without ``--metrics-port`` (scraped every second),
alternated ``--runs`` times each, after one uncounted warm-up drain. Final line: ``ratio=<median seconds with /
median seconds without>``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from connector.clusters_config import CONFIG_ENV, write_clusters  # noqa: E402
from connector.queue import ExportQueue, QueueConfig, count_entries, queue_lag, queue_status  # noqa: E402
from integration.harness import clusters  # noqa: E402


def fill(conn, queue: QueueConfig, entries: int, first_seq: int) -> None:  # noqa: ANN001
    with ExportQueue(conn, queue) as q:
        q.init()
        for i in range(entries):
            seq = first_seq + i
            q.add(f"k{i}", {"new": [{"row": f"r{i}", "cf": "f", "cq": "q", "value": str(seq)}]}, seq)


def timed(fn) -> float:  # noqa: ANN001
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def scrape_until(port: int, done: threading.Event, scrapes: list[int]) -> None:
    while not done.wait(1.0):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                reply.read()
                scrapes.append(1)
        except OSError:
            pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--entries", type=int, default=50_000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    with clusters(("a", "b")) as running, tempfile.TemporaryDirectory() as tmp:
        a, b = running["a"], running["b"]
        config = Path(tmp) / "clusters.toml"
        write_clusters(config, {"A": a.gateway_options(), "B": b.gateway_options()})
        env = dict(os.environ, **{CONFIG_ENV: str(config), "PYSPARK_PYTHON": sys.executable})
        queue = QueueConfig(table="metrics_q", qid="m", num_buckets=64)
        conn_a = a.connect()
        fill(conn_a, queue, args.entries, 1)
        scanners = {"queue_lag (keys only)": lambda: queue_lag(conn_a, queue),
                    "count_entries (keys only)": lambda: count_entries(conn_a, queue),
                    "queue_status (values too)": lambda: queue_status(conn_a, queue)}
        times: dict[str, list[float]] = {name: [] for name in scanners}
        for _ in range(5):  # interleaved, so that a compaction or a load spike hits each alike
            for name, fn in scanners.items():
                times[name].append(timed(fn))
        scans = {name: min(values) for name, values in times.items()}
        print(f"load: {os.getloadavg()}")
        for name, seconds in scans.items():
            print(f"{name:>28}: {seconds:6.3f} s for {args.entries:,} entries ({args.entries / seconds:,.0f} keys/s)")
        base = [sys.executable, "-m", "connector.cli", "drain", "--source", "A", "--dest", "B", "--table",
                queue.table, "--queue", queue.qid, "--dest-table", "metrics_dest", "--create-dest-table", "--engine",
                "local"]
        seconds: dict[bool, list[float]] = {False: [], True: []}
        seq = args.entries + 1
        for run in range(-1, 2 * args.runs):  # run -1 warms up (creates B's table), uncounted
            with_metrics = run >= 0 and bool(run % 2)
            if run >= 0:
                fill(conn_a, queue, args.entries, seq)
                seq += args.entries
            extra: list[str] = []
            done, scrapes = threading.Event(), []
            if with_metrics:
                with socket.socket() as s:
                    s.bind(("", 0))
                    port = s.getsockname()[1]
                extra = ["--metrics-port", str(port)]
                threading.Thread(target=scrape_until, args=(port, done, scrapes), daemon=True).start()
            out = subprocess.run([*base, *extra], env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800)
            done.set()
            summary = json.loads(out.stdout.splitlines()[-1])
            assert out.returncode == 0 and summary["exported"] == args.entries, out.stderr[-2000:]
            if run < 0:
                continue
            seconds[with_metrics].append(summary["seconds"])
            print(f"run {run + 1}: metrics={'on ' if with_metrics else 'off'} {summary['seconds']:7.2f} s "
                  f"({summary['entries_per_s']:,.0f} entries/s){f', {len(scrapes)} scrapes' if with_metrics else ''}"
                  f"; load {os.getloadavg()[0]:.1f}")
        off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
        print(f"median without: {off:.2f} s, with: {on:.2f} s")
        print(f"ratio={on / off:.3f}")


if __name__ == "__main__":
    main()
