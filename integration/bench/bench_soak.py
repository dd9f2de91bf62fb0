"""Soak benchmark (not a test): the streaming drain under a steady load for a long time (default 2k entries/s for
30 minutes; ``--minutes 2`` for a short run).

The producer and the visibility poller are those of ``bench_drain_latency`` (entries add cell rows with
increasing sequence numbers; the poller scans B for newly visible cells). Samples the resident memory (RSS) of
every process of the run all through it (every ``--memory-every`` seconds): this Python driver, Spark's JVM,
its Python workers, the launcher JVM hosting the gateways, and the clusters' JVMs (tablet servers and the
other Accumulo/ZooKeeper processes), found in /proc; at the end of each window it also takes each JVM's heap
after a full collection (``jcmd <pid> GC.run``, then ``GC.heap_info``: the live heap, which a leak makes grow;
``--no-heap`` skips it). Prints the RSS at the start and the end, then per process the mean RSS of each window
and the heap after GC at each window's end, and how fast each grew after the first window (MiB per hour: a
plateau is ~0). Then the entries lost (added but never visible on B; must
be 0), the queue depth left on A, and the add-to-visible latency percentiles per window of added entries
(``--window`` seconds; default a sixth of the run, i.e. 5 minutes for 30).

The last line is ``ratio=<entries seen on B / entries added>``: 1.0 means nothing was lost; below 1.0 is a
failure (the script then also exits with status 1).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status  # noqa: E402
from connector.queue.compaction import queue_files  # noqa: E402
from connector.queue.status import KEYS_ONLY  # noqa: E402
from connector.spark import DrainJob, spark_session, start_stream  # noqa: E402
from connector.spark.drain_job import stop_stream  # noqa: E402
from integration.bench.bench_cpu_per_entry import kind_of  # noqa: E402
from integration.bench.bench_drain_latency import RateProducer, percentile, poll_visible  # noqa: E402
from integration.harness import Cluster, clusters  # noqa: E402

#: the process kinds of ``bench_cpu_per_entry.kind_of``, as this report names them
LABELS = {"python driver": "python driver", "python workers": "python worker", "spark jvm": "spark jvm",
          "gateways": "launcher+gateways jvm", "tablet servers": "tablet server", "other accumulo": "cluster jvm"}


def _ours() -> set[int]:
    """This process and its descendants (the launcher JVM and its cluster JVMs, Spark's JVM and its Python
    workers), not the processes of other runs on the same machine."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    me, ours = os.getpid(), {os.getpid()}
    for pid in parent:
        chain, p = [], pid
        while p > 1 and p not in ours and len(chain) < 64:
            chain.append(p)
            p = parent.get(p, 0)
        if p == me or p in ours:
            ours.update(chain)
    return ours


def rss_by_process() -> dict[int, tuple[str, str, int]]:
    """pid -> (kind, short command, RSS in KiB) for every process of this run, read from /proc."""
    out: dict[int, tuple[str, str, int]] = {}
    for pid in sorted(_ours()):
        entry = Path("/proc") / str(pid)
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (entry / "status").read_text()
        except OSError:
            continue  # gone meanwhile
        kind = kind_of(pid, cmdline)
        if kind is None or (kind not in ("python driver", "python workers") and _unexeced_fork(entry, cmdline)):
            continue
        rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        out[pid] = (LABELS[kind], _short(cmdline), rss)
    return out


def _unexeced_fork(entry: Path, cmdline: str) -> bool:
    """A JVM's child caught between fork and exec (starting a Python worker, or a shell command): it still has
    its parent's command line and, briefly, its parent's pages. Not a process of its own to count."""
    try:
        ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
        parent = (Path("/proc") / ppid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError):
        return False
    return parent == cmdline


def _short(cmdline: str) -> str:
    """The main class or module of a command line, enough to tell processes of one kind apart; a cluster's
    server processes get the cluster's name (their java.io.tmpdir is ``<cluster dir>-tmp``)."""
    words = cmdline.split()
    tmpdir = next((w.split("=", 1)[1] for w in words if w.startswith("-Djava.io.tmpdir=")), "")
    cluster = f" (cluster {os.path.basename(tmpdir)[:-4]})" if tmpdir.endswith("-tmp") else ""
    return _main_of(words) + cluster


def _main_of(words: list[str]) -> str:
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(("org.apache.", "exportconnector.")):
            return word.rsplit(".", 1)[-1] + (" " + words[i + 1] if i + 1 < len(words) and
                                              not words[i + 1].startswith("-") else "")
    return os.path.basename(words[0]) if words else "?"


def print_rss(title: str, rss: dict[int, tuple[str, str, int]], before: dict[int, tuple[str, str, int]] | None = None,
              ) -> None:
    print(f"RSS {title}:")
    for pid, (kind, what, kib) in sorted(rss.items(), key=lambda item: (item[1][0], item[0])):
        change = ""
        if before is not None:
            change = f"  ({(kib - before[pid][2]) / 1024:+.0f} MiB)" if pid in before else "  (new)"
        print(f"  {kind:22s} pid {pid:7d} {kib / 1024:8.0f} MiB  {what}{change}")
    if before is not None:
        for pid, (kind, what, kib) in sorted(before.items()):
            if pid not in rss:
                print(f"  {kind:22s} pid {pid:7d}      gone  {what} (was {kib / 1024:.0f} MiB)")


def jvm_heap_after_gc(pid: int) -> int | None:
    """The heap a JVM uses right after a full collection (KiB): ``jcmd GC.run`` then ``GC.heap_info``, whose
    generation lines (G1's one heap line, or Serial's young and tenured) say what is used. None when jcmd is
    missing or the JVM does not answer (gone, or attach refused)."""
    jcmd = shutil.which("jcmd") or (os.path.join(os.environ["JAVA_HOME"], "bin", "jcmd")
                                    if os.environ.get("JAVA_HOME") else None)
    if jcmd is None:
        return None
    try:
        subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=120, check=True)
        info = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = [int(m.group(1)) for m in re.finditer(r"^\s*\S.*?\btotal \d+K, used (\d+)K", info, re.MULTILINE)]
    return sum(used) if used else None


class MemorySampler:
    """On a thread of its own: every ``every`` seconds the RSS of every process of the run, and at the end of
    each window of ``window`` seconds (from ``start``) each JVM's heap after a full collection (``heap``)."""

    def __init__(self, every: float, window: float, heap: bool = True) -> None:
        self.every, self.window, self.heap = every, window, heap
        self.rss: list[tuple[float, dict[int, tuple[str, str, int]]]] = []  # (time, pid -> kind, what, KiB)
        self.heaps: dict[int, dict[int, int]] = {}  # window -> pid -> KiB after GC, at its end
        self.start = time.perf_counter()
        self.stop = threading.Event()

    def run(self) -> None:
        self.start = time.perf_counter()
        next_window = 0
        while True:
            now = time.perf_counter()
            sample = rss_by_process()
            self.rss.append((now, sample))
            if self.heap and now - self.start >= (next_window + 1) * self.window:
                next_window = int((now - self.start) // self.window)
                self._heaps(next_window - 1, sample)
            if self.stop.wait(self.every):
                break
        if self.heap:  # the end of the last window sampled (partial, or ended just now)
            self._heaps(int((self.rss[-1][0] - self.start) // self.window), rss_by_process())

    def _heaps(self, window: int, sample: dict[int, tuple[str, str, int]]) -> None:
        heaps = {pid: kib for pid, (kind, _, _) in sample.items() if kind not in ("python driver", "python worker")
                 and (kib := jvm_heap_after_gc(pid)) is not None}
        self.heaps[window] = heaps

    def table(self) -> list[str]:
        """Per process (by kind): the mean RSS per window, the heap after GC at each window's end, and how fast
        each grew from the end of the first window on (MiB/h, a least-squares slope)."""
        n_windows = max(1, int(np.ceil((self.rss[-1][0] - self.start) / self.window))) if self.rss else 0
        procs: dict[int, tuple[str, str]] = {}
        for _, sample in self.rss:
            for pid, (kind, what, _) in sample.items():
                procs.setdefault(pid, (kind, what))
        lines = [f"  {'process':52s} {'':4s}" + "".join(f"{'w' + str(w + 1):>7s}" for w in range(n_windows))
                 + "  growth after w1"]
        for pid, (kind, what) in sorted(procs.items(), key=lambda item: (item[1][0], item[0])):
            points = [(t - self.start, sample[pid][2] / 1024) for t, sample in self.rss if pid in sample]
            means = []
            for w in range(n_windows):
                mine = [mib for t, mib in points if w * self.window <= t < (w + 1) * self.window]
                means.append(f"{np.mean(mine):7.0f}" if mine else f"{'-':>7s}")
            later = [(t, mib) for t, mib in points if t >= self.window]
            name = re.sub(r"\b(?:[a-z]\w*\.)+([A-Z]\w*)", r"\1", f"{kind} {pid} {what}")  # a class's last part
            lines.append(f"  {name:52.52s} {'rss':4s}" + "".join(means)
                         + f"  {_slope(later):+.0f} MiB/h")
            heaps = [(w, self.heaps[w][pid] / 1024) for w in sorted(self.heaps) if pid in self.heaps[w]]
            if heaps:
                cells = dict(heaps)
                lines.append(f"  {'':52s} {'heap':4s}" + "".join(f"{cells[w]:7.0f}" if w in cells else f"{'-':>7s}"
                                                                  for w in range(n_windows))
                             + f"  {_slope([((w + 1) * self.window, mib) for w, mib in heaps if w >= 1]):+.0f} MiB/h")
        return lines


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) points in MiB per hour (0 with fewer than two)."""
    if len(points) < 2 or len({t for t, _ in points}) < 2:
        return 0.0
    t, mib = np.array(points).T
    return float(np.polyfit(t, mib, 1)[0] * 3600)


def window_latencies(added_at: np.ndarray, seen_at: np.ndarray, window: float) -> list[tuple[int, int, np.ndarray]]:
    """Per window of added entries: how many were added, how many seen, and their latencies."""
    start = float(np.nanmin(added_at))
    n_windows = int(np.ceil((np.nanmax(added_at) - start + 1e-9) / window)) or 1
    which = np.floor((added_at - start) / window).astype(int)
    out = []
    for w in range(n_windows):
        mine = which == w
        seen = mine & ~np.isnan(seen_at)
        out.append((int(mine.sum()), int(seen.sum()), (seen_at - added_at)[seen]))
    return out


def latency_windows(added_at: np.ndarray, seen_at: np.ndarray, window: float) -> list[str]:
    """One line per window of added entries: how many, how many seen, latency p50/p99/max; then the last
    window's p50 and p99 against the second's (the first holds the stream's warm-up)."""
    lines = []
    windows = window_latencies(added_at, seen_at, window)
    for w, (added, seen, latency) in enumerate(windows):
        head = f"  window {w + 1} ({w * window:.0f}-{(w + 1) * window:.0f} s): added {added}, seen {seen}"
        if latency.size:
            head += (f", latency p50={percentile(latency, 50):.3f}s p99={percentile(latency, 99):.3f}s "
                     f"max={latency.max():.3f}s")
        lines.append(head)
    if len(windows) >= 3 and windows[1][2].size and windows[-1][2].size:
        second, last = windows[1][2], windows[-1][2]
        lines.append(f"  last window / second window: p50 x{percentile(last, 50) / percentile(second, 50):.2f}, "
                     f"p99 x{percentile(last, 99) / percentile(second, 99):.2f} (flat: <= 1.2)")
    return lines


class QueueProbe:
    """Every ``every`` seconds (on a thread of its own, with its own connection to A): the keys in the files
    of the queue's tablets (Accumulo's metadata), and the time and result of a keys-only scan of all the
    queue's entries, as a drain's scans walk them (delete markers included, until a compaction drops them)."""

    def __init__(self, cluster: Cluster, queue: QueueConfig, every: float = 10.0) -> None:
        self.cluster, self.queue, self.every = cluster, queue, every
        self.samples: list[tuple[float, int, int, float, int]] = []  # (time, file keys, files, scan s, returned)
        self.stop = threading.Event()

    def run(self) -> None:
        conn = self.cluster.connect()
        while not self.stop.wait(self.every):
            files = queue_files(conn, self.queue)
            began = time.perf_counter()
            returned = sum(page.num_rows for page in conn.scan_batches(
                self.queue.table, self.queue.layout.queue_range(), iterators=[KEYS_ONLY], batch_size=10_000))
            self.samples.append((began, files.keys, files.files, time.perf_counter() - began, returned))

    def windows(self, start: float, window: float) -> list[str]:
        """One line per window: the mean keys in the queue's files, the mean entries a scan returned, their
        ratio, and the mean time of a full scan of the queue."""
        lines = []
        for w in range(int(np.ceil((self.samples[-1][0] - start) / window)) if self.samples else 0):
            mine = [s for s in self.samples if w * window <= s[0] - start < (w + 1) * window]
            if not mine:
                continue
            keys, files, seconds, returned = (float(np.mean([s[i] for s in mine])) for i in (1, 2, 3, 4))
            lines.append(f"  window {w + 1}: queue files {files:.1f} holding {keys:.0f} keys (max "
                         f"{max(s[1] for s in mine)}), scan returned {returned:.0f} entries: "
                         f"{(keys + returned) / max(returned, 1.0):.1f} keys per entry returned; full queue scan "
                         f"{seconds * 1000:.0f} ms (max {max(s[3] for s in mine) * 1000:.0f} ms)")
        return lines


def phase_windows(progress: list, started_epoch: float, window: float) -> list[str]:
    """One line per window: the micro-batches that started in it and the mean of each phase's duration."""
    by_window: dict[int, list] = {}
    for p in progress:
        began = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
        if began >= started_epoch:
            by_window.setdefault(int((began - started_epoch) // window), []).append(p)
    lines = []
    for w, batches in sorted(by_window.items()):
        phases = sorted({k for p in batches for k in p.durationMs})
        means = ", ".join(f"{k}={np.mean([p.durationMs.get(k, 0) for p in batches]):.0f}" for k in phases)
        lines.append(f"  window {w + 1}: {len(batches)} micro-batches, {means}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2000, help="entries added per second (default 2000)")
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to produce (default 30)")
    parser.add_argument("--window", type=float, help="seconds per latency window (default: a sixth of the run)")
    parser.add_argument("--buckets", type=int, default=13)
    parser.add_argument("--trigger", type=float, default=0.2, help="micro-batch interval, seconds")
    parser.add_argument("--compact-dead-keys", type=int,
                        help="the drain's compact_dead_keys (default: the drain's default; 0: never compact)")
    parser.add_argument("--memory-every", type=float, default=10.0, help="seconds between RSS samples (default 10)")
    parser.add_argument("--no-heap", action="store_true",
                        help="do not take the JVMs' heap after a full GC at each window's end (jcmd GC.run)")
    opts = parser.parse_args()
    seconds = opts.minutes * 60
    window = opts.window or seconds / 6
    total = int(opts.rate * seconds)
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        queue = QueueConfig(table="soak_queue", qid="sq", num_buckets=opts.buckets)
        conn_a, conn_b = a.connect(), b.connect()
        ExportQueue(conn_a, queue).init()
        conn_b.create_table("soak_dest", exist_ok=True)
        spark = spark_session(app_name="bench soak")
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "1000000")  # every micro-batch's phases
        extra = {} if opts.compact_dead_keys is None else {"compact_dead_keys": opts.compact_dead_keys}
        job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue, dest_table="soak_dest",
                       settings=DrainSettings(buckets_per_partition=-(-opts.buckets // 2),
                                              trigger_seconds=opts.trigger, **extra))
        tmp = tempfile.mkdtemp(prefix="soak-")
        query = start_stream(spark, job, f"{tmp}/ckpt", f"{tmp}/reports")
        rss_start = rss_by_process()
        print_rss("at the start (stream running, nothing produced yet)", rss_start)
        producer = RateProducer(a, queue, opts.rate, total)
        producing = threading.Thread(target=producer.run, name="producer")
        probe = QueueProbe(a, queue)
        probing = threading.Thread(target=probe.run, name="queue probe", daemon=True)
        memory = MemorySampler(opts.memory_every, window, heap=not opts.no_heap)
        sampling = threading.Thread(target=memory.run, name="memory sampler", daemon=True)
        started = time.perf_counter()
        producing.start()
        probing.start()
        sampling.start()
        seen_at = poll_visible(conn_b, "soak_dest", producer, deadline=started + seconds + 120)
        producing.join()
        probe.stop.set()
        memory.stop.set()
        sampling.join()
        produced_in = max(float(np.nanmax(producer.added_at)) - started, 1e-9)
        rss_end = rss_by_process()
        progress = list(query.recentProgress)
        depth = queue_status(conn_a, queue).entries
        failure = query.exception() if not query.isActive else None
        stop_stream(query)
        spark.stop()
        print_rss("at the end", rss_end, rss_start)
        seen = int(np.count_nonzero(~np.isnan(seen_at)))
        lost = producer.added - seen
        print(f"entries added={producer.added} in {produced_in:.0f} s ({producer.added / produced_in:.0f}/s, "
              f"target {opts.rate}/s); seen on B={seen}; lost={lost} (must be 0); queue depth left on A={depth}")
        if failure is not None:
            print(f"the stream failed: {failure}")
        print(f"latency per window of {window:.0f} s (by the time entries were added):")
        for line in latency_windows(producer.added_at[:producer.added], seen_at[:producer.added], window):
            print(line)
        latency = (seen_at - producer.added_at)[~np.isnan(seen_at)]
        if latency.size:
            print(f"whole run: latency p50={percentile(latency, 50):.3f}s p99={percentile(latency, 99):.3f}s "
                  f"max={latency.max():.3f}s")
        print("micro-batches per window of the run (mean ms per phase: latestOffset plans from the marks, "
              "addBatch runs the tasks that read, export and delete):")
        for line in phase_windows(progress, time.time() - (time.perf_counter() - started), window):
            print(line)
        print(f"memory per window of {window:.0f} s (rss: mean MiB of the samples every {opts.memory_every:.0f} s; "
              "heap: MiB a JVM uses after a full GC at the window's end):")
        for line in memory.table():
            print(line)
        print("A's queue, per window of the run (sampled every 10 s):")
        for line in probe.windows(started, window):
            print(line)
        ratio = seen / producer.added if producer.added else 0.0
        print(f"ratio={ratio:.6f}")
        return 0 if lost == 0 and failure is None else 1


if __name__ == "__main__":
    sys.exit(main())
