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

``--moves`` (issue 47, item 2): B first gets ``--live`` cells (default 200,000), then every entry is a move: it
deletes B's oldest live cell and puts a new one, so B's live cells stay constant and it writes one tombstone per
entry. The stream purges them on its own, as ``drain --stream --purge-every`` does (the same ``BackgroundPurge``:
every ``--purge-every`` seconds, default 120, after the previous run ended, with the default grace of 600 s).
Every ``--scan-every`` seconds (default 60) B is scanned whole as a reader sees it (the tombstones hidden: its
time, and the live cells), its tombstones are counted as the purge lists them, and the keys in its files read from
Accumulo's metadata. Windows default to one purge cycle (purge-every + grace), so each holds one purge. Printed per
window: B's cells, tombstones included, the live cells, the full scan's time, the purge runs ended, by outcome (and
above: RSS, latency). Then the done-when checks of issue 47, each PASS or FAIL with its numbers:

- in every window B's cells <= its live cells + what one purge period writes. **One purge period** is the longest
  a tombstone can live: written just after a run listed the tombstones, it waits for that run's grace, the period,
  the next run's listing and that run's grace: purge-every + 2 x grace + 2 x the longest a run took beyond its grace
  (listing, watermark readings, deletes; measured). What it writes, checked at each sample: the moves added in
  that long before it (plus the drain's longest latency), one tombstone each: about rate x period;
- the full scan of B flat: the largest window median over the smallest, from the 2nd window to the last, <= 1.2
  (B's samples are those taken while the moves ran; a window the run ended early in, with fewer than half its
  scans, is printed but left out);
- memory flat from the 3rd window: for every process, the least-squares line through its window figures from the
  3rd window to the last (sampled for at least half its length) rises by at most 10% of the 3rd's (or 32 MiB); the
  figure is a Python process's mean RSS, and a JVM's heap after a full GC (its live set: a JVM's RSS is the heap
  its collector keeps committed, up to -Xmx, and swings with the allocation rate; it is printed, and named in the
  verdict when it rose past the bound);
- 0 entries lost: every entry's put seen on B, and at the end B holds exactly the live cells it should.

``--test-grace SECONDS`` is for checking this script in a few minutes only: it lowers the purge's minimum grace in
this process (unsound for real use; printed at the start). The real run leaves it out.

The last line is ``ratio=<entries seen on B / entries added>``: 1.0 means nothing was lost; below 1.0 is a
failure (the script then also exits with status 1, as it does when a check above fails).
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
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.accumulo import Connection  # noqa: E402
from connector.accumulo.writer import MIN_PURGE_GRACE_SECONDS  # noqa: E402
from connector.export.tombstones import tombstones_below  # noqa: E402
from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status  # noqa: E402
from connector.queue.compaction import queue_files, table_file_keys  # noqa: E402
from connector.queue.status import KEYS_ONLY  # noqa: E402
from connector.snapshot import purge as purge_module  # noqa: E402
from connector.snapshot.auto_purge import BackgroundPurge  # noqa: E402
from connector.snapshot.purge import DEFAULT_GRACE_SECONDS  # noqa: E402
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
        chain: list[int] = []
        p = pid
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

    def n_windows(self) -> int:
        return max(1, int(np.ceil((self.rss[-1][0] - self.start) / self.window))) if self.rss else 0

    def window_means(self) -> dict[tuple[str, int], list[float | None]]:
        """(kind, pid) -> the mean RSS (MiB) of each window's samples (None: not sampled in that window)."""
        out: dict[tuple[str, int], list[float | None]] = {}
        for pid, (kind, _) in self._processes().items():
            points = [(t - self.start, sample[pid][2] / 1024) for t, sample in self.rss if pid in sample]
            out[(kind, pid)] = [float(np.mean(mine)) if (mine := [mib for t, mib in points
                                                                  if w * self.window <= t < (w + 1) * self.window])
                                else None for w in range(self.n_windows())]
        return out

    def _processes(self) -> dict[int, tuple[str, str]]:
        procs: dict[int, tuple[str, str]] = {}
        for _, sample in self.rss:
            for pid, (kind, what, _) in sample.items():
                procs.setdefault(pid, (kind, what))
        return procs

    def table(self) -> list[str]:
        """Per process (by kind): the mean RSS per window, the heap after GC at each window's end, and how fast
        each grew from the end of the first window on (MiB/h, a least-squares slope)."""
        n_windows = self.n_windows()
        window_means = self.window_means()
        lines = [f"  {'process':52s} {'':4s}" + "".join(f"{'w' + str(w + 1):>7s}" for w in range(n_windows))
                 + "  growth after w1"]
        for pid, (kind, what) in sorted(self._processes().items(), key=lambda item: (item[1][0], item[0])):
            points = [(t - self.start, sample[pid][2] / 1024) for t, sample in self.rss if pid in sample]
            means = [f"{m:7.0f}" if m is not None else f"{'-':>7s}" for m in window_means[(kind, pid)]]
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


class MoveProducer(RateProducer):
    """``--moves``: each entry is a move on B, deleting one live cell and putting another, so B keeps ``live`` live
    cells. :meth:`prefill` first queues ``live`` entries that only put (rows ``!live<i>``, export seqs 1..live);
    then measured entry ``seq`` puts the row ``<seq:012d>`` (export seq ``live + seq + 1``, above every prefill's)
    and deletes the oldest live cell: prefill row ``seq`` while there is one, else the row of entry
    ``seq - live``."""

    def __init__(self, cluster: Cluster, queue: QueueConfig, rate: int, total: int, live: int) -> None:
        super().__init__(cluster, queue, rate, total)
        self.live = live

    def export(self, seq: int) -> tuple[object, object, int]:
        gone = _prefill_row(seq) if seq < self.live else f"{seq - self.live:012d}"
        return self.live + seq, {"old": [_cell(gone)], "new": [_cell(f"{seq:012d}")]}, self.live + seq + 1

    def prefill(self) -> None:
        with ExportQueue(self.cluster.connect(), self.queue) as q:
            q.add_all((i, {"new": [_cell(_prefill_row(i))]}, i + 1) for i in range(self.live))

    def expected_live(self) -> set[bytes]:
        """The rows B holds once every entry added so far is drained."""
        moved = self.added
        return ({_prefill_row(i).encode() for i in range(moved, self.live)}
                | {f"{seq:012d}".encode() for seq in range(max(0, moved - self.live), moved)})


def _prefill_row(i: int) -> str:
    return f"!live{i:012d}"  # sorts before every measured row: the visibility poller never scans these


def _cell(row: str) -> dict[str, str]:
    return {"row": row, "cf": "f", "cq": "q", "value": "x"}


class DestinationProbe:
    """Every ``every`` seconds (on a thread of its own, with its own connection to B): a full scan of ``table`` as
    a reader sees it (the table's filter hides tombstones; its time, and the live cells it returned), then a scan
    that sees only the tombstones (:func:`~connector.export.tombstones.tombstones_below`, as the purge lists them),
    and the keys in the table's files."""

    def __init__(self, cluster: Cluster, table: str, every: float) -> None:
        self.cluster, self.table, self.every = cluster, table, every
        # (time, live, tombstones, scan s, file keys, when the tombstone count ended)
        self.samples: list[tuple[float, int, int, float, int, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        conn = self.cluster.connect()
        while True:
            self.samples.append(self.sample(conn))
            if self.stop.wait(self.every):
                break

    def sample(self, conn: Connection) -> tuple[float, int, int, float, int, float]:
        began = time.perf_counter()
        live = sum(page.num_rows for page in conn.scan_batches(self.table, batch_size=10_000))
        scanned = time.perf_counter() - began
        tombstones = sum(page.num_rows for page in tombstones_below(conn, self.table, None))
        counted = time.perf_counter()  # tombstones written until now may be counted
        return began, live, tombstones, scanned, table_file_keys(conn, self.table), counted

    def by_window(self, start: float, window: float, until: float | None = None,
                  ) -> dict[int, list[tuple[float, int, int, float, int, float]]]:
        """The samples per window of ``window`` seconds from ``start`` (those begun by ``until``, when given)."""
        out: dict[int, list[tuple[float, int, int, float, int, float]]] = {}
        for sample in self.samples:
            if until is not None and sample[0] > until:
                continue
            out.setdefault(max(0, int((sample[0] - start) // window)), []).append(sample)
        return out


class TimedPurge(BackgroundPurge):
    """The stream's background purge, each round's start, end and outcomes kept (``runs``)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.runs: list[tuple[float, float, Counter[str], int, int]] = []  # start, end, outcomes, listed, deleted

    def run_once(self) -> None:
        began, before = time.perf_counter(), Counter(self.outcomes)
        super().run_once()
        outcomes = Counter({outcome: n for (_, outcome), n in (self.outcomes - before).items()})
        report = self.reports.get(f"{self.own.gateway.label}/{self.own.table}")
        fresh = report is not None and outcomes and not outcomes.get("failed")
        self.runs.append((began, time.perf_counter(), outcomes, report.listed if fresh and report else 0,
                          report.deleted if fresh and report else 0))


def verdict(ok: bool, what: str) -> str:
    return f"{'PASS' if ok else 'FAIL'}: {what}"


def moves_report(probe: DestinationProbe, purge: TimedPurge, memory: MemorySampler, started: float, window: float,
                 added_at: np.ndarray, latency_max: float, grace: float, lost: int, stale: int, missing: int,
                 ) -> list[str]:
    """Per window B's cells and scan time and the purge's runs, then the done-when checks of issue 47, each
    PASS or FAIL with its numbers. One purge period (the longest a tombstone lives) is the background purge's
    period, plus two graces, plus twice the longest a run took beyond its grace (listing, readings, deletes); what
    it writes, at a sample taken at t: the moves added from t - (that period + the drain's longest add-to-visible
    latency) to t, each one tombstone (at the target rate that is rate x period; a producer that fell behind and
    caught up wrote more)."""
    overhead = max([end - began - grace for began, end, outcomes, _, _ in purge.runs
                    if outcomes.get("purged") or outcomes.get("nothing")] + [0.0])
    period = purge.period + 2 * grace + 2 * overhead
    added = np.sort(added_at[~np.isnan(added_at)])

    def writes_before(t: float) -> int:
        """The moves added within one purge period (and the latency) before ``t``."""
        return int(np.searchsorted(added, t, "right") - np.searchsorted(added, t - period - latency_max, "left"))

    lines = [f"one purge period = purge-every {purge.period:g} s + 2 x grace {grace:g} s + 2 x {overhead:.0f} s (a "
             f"run's longest time beyond its grace) = {period:.0f} s; what it writes: the moves added in it and the "
             f"drain's longest latency ({latency_max:.1f} s) before each sample"]
    # the samples while the moves ran (after the last add B only drains and purges what is left)
    windows = probe.by_window(started, window, until=float(added[-1]) if added.size else None)
    scan_medians: dict[int, float] = {}
    over: list[str] = []
    closest = (-1.0, "")
    for w in sorted(windows):
        mine = windows[w]
        partial = len(mine) < window / probe.every / 2  # the run ended early in it: left out of the scan check
        live = [s[1] for s in mine]
        cells = [s[1] + s[2] for s in mine]
        scans = [s[3] for s in mine]
        bounds = [writes_before(s[5]) for s in mine]
        if not partial:
            scan_medians[w] = float(np.median(scans))
        runs = [r for r in purge.runs if w * window <= r[1] - started < (w + 1) * window]
        outcomes = sum((r[2] for r in runs), Counter())
        ran = ", ".join(f"{k}={v}" for k, v in sorted(outcomes.items())) or "none ended"
        deleted = sum(r[4] for r in runs)
        lines.append(f"  window {w + 1}: B cells (tombstones included) mean {np.mean(cells):,.0f} max {max(cells):,}; "
                     f"live mean {np.mean(live):,.0f} (min {min(live):,} max {max(live):,}); tombstones max "
                     f"{max(s[2] for s in mine):,} (one period's writes there: {min(bounds):,}-{max(bounds):,}); "
                     f"keys in B's files max {max(s[4] for s in mine):,}; full scan of B {np.median(scans):.2f} s "
                     f"median (min {min(scans):.2f} max {max(scans):.2f}, {len(mine)} scans"
                     f"{'; partial window, not in the scan check' if partial else ''}); purge runs ended: "
                     f"{ran}" + (f" (deleted {deleted:,})" if deleted else ""))
        for sample, bound in zip(mine, bounds, strict=True):
            t, live_now, tombstones = sample[0], sample[1], sample[2]
            if tombstones / max(bound, 1) > closest[0]:
                closest = (tombstones / max(bound, 1), f"{live_now + tombstones:,} cells = {live_now:,} live + "
                           f"{tombstones:,} tombstones at {t - started:.0f} s, one period's writes {bound:,}")
            if tombstones > bound:
                over.append(f"w{w + 1} at {t - started:.0f} s: {live_now + tombstones:,} > {live_now:,} + {bound:,}")
    lines.append(verdict(not over and bool(probe.samples),
                         "in every window B's cells <= live + what one purge period writes; closest: "
                         f"{closest[1]}" + (f"; over: {'; '.join(over[:5])}" if over else "")))
    later = [scan_medians[w] for w in sorted(scan_medians) if w >= 1]
    if len(later) >= 2:
        ratio = max(later) / min(later)
        lines.append(verdict(ratio <= 1.2, "full scan of B flat from the 2nd window to the last: max/min of the window "
                             f"medians {max(later):.2f}/{min(later):.2f} s = {ratio:.2f} (<= 1.2)"))
    else:
        lines.append(verdict(False, f"full scan of B flat from the 2nd window: only {len(later)} window(s) from the "
                                    "2nd on"))
    lines.append(rss_flat(memory))
    lines.append(verdict(lost == 0 and stale == 0 and missing == 0,
                         f"0 entries lost: {lost} added but never seen; at the end B holds {missing} expected live "
                         f"cells too few and {stale} cells it should not (deleted or never written)"))
    return lines


#: RSS "flat": from the 3rd window on, the least-squares line through a process's window means rises by at most
#: this share of its 3rd window's mean, or this many MiB (small processes)
RSS_FLAT_SHARE, RSS_FLAT_MIB = 0.10, 32.0


def rss_flat(memory: MemorySampler) -> str:
    """PASS when, for every process sampled in the 3rd window and a later one, the least-squares line through its
    window figures from the 3rd window to the last rises by at most RSS_FLAT_SHARE of the 3rd's (or RSS_FLAT_MIB):
    a slope, not one window's peak. A Python process is judged by its mean RSS; a JVM whose heap after a full GC was
    taken, by that live heap: its RSS follows how much heap its collector keeps committed (up to -Xmx), which grows
    and shrinks with the allocation rate, while a leak shows as a live heap that grows (the RSS is printed above,
    and every JVM whose RSS rose beyond the bound is named here). A last window sampled for less than half its
    length is left out."""
    excess: list[tuple[float, str]] = []  # (rise beyond what is allowed, which process and its numbers)
    span = memory.rss[-1][0] - memory.start if memory.rss else 0.0
    covered = int((span + memory.window / 2) // memory.window)  # windows sampled for at least half their length
    judged_by_heap = 0
    rss_past: list[str] = []  # JVMs judged by their heap whose RSS rose past the bound all the same
    for (kind, pid), per_window in memory.window_means().items():
        rss = [(w * memory.window, m) for w, m in enumerate(per_window[:covered]) if w >= 2 and m is not None]
        heap = [(w * memory.window, memory.heaps[w][pid] / 1024) for w in sorted(memory.heaps)
                if 2 <= w < covered and pid in memory.heaps[w]]
        rss_rise, rss_allowed = _rise(rss)
        if len(heap) >= 2:
            judged_by_heap += 1
            rise, allowed = _rise(heap)
            if rss_rise > rss_allowed:
                rss_past.append(f"{kind} {pid} RSS {', '.join(f'{m:.0f}' for _, m in rss)} MiB, rise "
                                f"{rss_rise:+.0f} (heap after GC {', '.join(f'{m:.0f}' for _, m in heap)})")
            excess.append((rise - allowed, f"{kind} {pid}: heap after GC from w3 "
                                           f"{', '.join(f'{m:.0f}' for _, m in heap)} MiB, rise {rise:+.0f} "
                                           f"(allowed +{allowed:.0f})"))
        elif len(rss) >= 2 and per_window[2:3] and per_window[2] is not None:
            excess.append((rss_rise - rss_allowed, f"{kind} {pid}: RSS window means from w3 "
                                                   f"{', '.join(f'{m:.0f}' for _, m in rss)} MiB, rise "
                                                   f"{rss_rise:+.0f} (allowed +{rss_allowed:.0f})"))
    if not excess:
        return verdict(False, "memory flat from the 3rd window: no process sampled in the 3rd window and a later one "
                              "(fewer than 4 windows?)")
    worst, which = max(excess)
    return verdict(worst <= 0, f"memory flat from the 3rd window ({len(excess)} processes, {judged_by_heap} JVMs "
                               f"judged by their heap after a full GC, the rest by RSS; the least-squares line through "
                               f"each one's window figures rises by at most {RSS_FLAT_SHARE:.0%} of its 3rd window's "
                               f"or {RSS_FLAT_MIB:.0f} MiB); the closest: {which}"
                               + (f"; JVMs whose RSS rose past that bound: {'; '.join(rss_past)}" if rss_past else ""))


def _rise(points: list[tuple[float, float]]) -> tuple[float, float]:
    """How much the least-squares line through ``points`` (seconds, MiB) rises over their span, and the rise
    allowed (RSS_FLAT_SHARE of the first point's figure, or RSS_FLAT_MIB); (0, allowed) for fewer than 2 points."""
    if not points:
        return 0.0, RSS_FLAT_MIB
    allowed = max(RSS_FLAT_SHARE * points[0][1], RSS_FLAT_MIB)
    if len(points) < 2:
        return 0.0, allowed
    return _slope(points) / 3600 * (points[-1][0] - points[0][0]), allowed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2000, help="entries added per second (default 2000)")
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to produce (default 30)")
    parser.add_argument("--window", type=float, help="seconds per window (default: a sixth of the run; with --moves, "
                                                     "one purge cycle: --purge-every plus the grace)")
    parser.add_argument("--buckets", type=int, default=13)
    parser.add_argument("--trigger", type=float, default=0.2, help="micro-batch interval, seconds")
    parser.add_argument("--compact-dead-keys", type=int,
                        help="the drain's compact_dead_keys (default: the drain's default; 0: never compact)")
    parser.add_argument("--memory-every", type=float, default=10.0, help="seconds between RSS samples (default 10)")
    parser.add_argument("--no-heap", action="store_true",
                        help="do not take the JVMs' heap after a full GC at each window's end (jcmd GC.run)")
    parser.add_argument("--moves", action="store_true",
                        help="every entry moves a cell on B (deletes one live cell, puts another), and the stream "
                             "purges its tombstones on its own (--purge-every); prints B's cells per window and the "
                             "checks of issue 47")
    parser.add_argument("--live", type=int, default=200_000,
                        help="with --moves: B's live cells, put before the run (default 200000)")
    parser.add_argument("--purge-every", type=float,
                        help="the stream's purge-every, seconds (default with --moves: 120; without: no purge)")
    parser.add_argument("--scan-every", type=float, default=60.0,
                        help="with --moves: seconds between full scans of B (default 60)")
    parser.add_argument("--test-grace", type=float,
                        help="TEST OF THIS SCRIPT ONLY: the purge's grace in seconds, below the "
                             f"{MIN_PURGE_GRACE_SECONDS:g} s minimum (the purge's bound on writers is lowered to "
                             "half of it in this process; unsound for real use)")
    opts = parser.parse_args()
    seconds = opts.minutes * 60
    purge_every = opts.purge_every if opts.purge_every is not None else 120.0 if opts.moves else 0.0
    grace = DEFAULT_GRACE_SECONDS
    if opts.test_grace is not None:
        grace = opts.test_grace
        if grace < MIN_PURGE_GRACE_SECONDS:  # the only way below the minimum; say so on every run that does it
            purge_module.MIN_PURGE_GRACE_SECONDS = grace
            purge_module.LATE_WRITE_SECONDS = grace / 2
            print(f"TEST OF THE SCRIPT ONLY: purge grace {grace:g} s (below the {MIN_PURGE_GRACE_SECONDS:g} s "
                  "minimum; the writers' bound is lowered to half of it in this process)")
    window = opts.window or (purge_every + grace if opts.moves and purge_every > 0 else seconds / 6)
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
                                              trigger_seconds=opts.trigger, purge_every=purge_every, **extra))
        tmp = tempfile.mkdtemp(prefix="soak-")
        query = start_stream(spark, job, f"{tmp}/ckpt", f"{tmp}/reports")
        if opts.moves:
            mover = MoveProducer(a, queue, opts.rate, total, opts.live)
            prefill(mover, conn_b, "soak_dest")
            producer: RateProducer = mover
        else:
            producer = RateProducer(a, queue, opts.rate, total)
        rss_start = rss_by_process()
        print_rss("at the start (stream running, nothing produced yet)", rss_start)
        # the stream's background purge, as the CLI's stream runs it (connector.cli.drain_stream)
        purge = TimedPurge(job.source, queue, job.dest, job.dest_table, period=job.settings.purge_every, grace=grace)
        producing = threading.Thread(target=producer.run, name="producer")
        probe = QueueProbe(a, queue)
        probing = threading.Thread(target=probe.run, name="queue probe", daemon=True)
        memory = MemorySampler(opts.memory_every, window, heap=not opts.no_heap)
        sampling = threading.Thread(target=memory.run, name="memory sampler", daemon=True)
        dest_probe = DestinationProbe(b, "soak_dest", opts.scan_every)
        dest_probing = threading.Thread(target=dest_probe.run, name="destination probe", daemon=True)
        started = time.perf_counter()
        purge.start()
        producing.start()
        probing.start()
        sampling.start()
        if opts.moves:
            dest_probing.start()
        # until 2 min after the last add (on a busy machine the producer falls behind its rate), at most 3x the run
        seen_at = poll_visible(conn_b, "soak_dest", producer, deadline=started + 3 * seconds + 120, settle=120)
        producing.join()
        probe.stop.set()
        memory.stop.set()
        dest_probe.stop.set()
        sampling.join()
        if opts.moves:
            dest_probing.join()
        purge.stop()
        produced_in = max(float(np.nanmax(producer.added_at)) - started, 1e-9)
        rss_end = rss_by_process()
        progress = list(query.recentProgress)
        depth = drained(conn_a, queue, deadline=time.perf_counter() + 300)
        stale = missing = 0
        if isinstance(producer, MoveProducer):
            on_b = {cell.row for cell in conn_b.scan("soak_dest", batch_size=10_000)}
            expected = producer.expected_live()
            stale, missing = len(on_b - expected), len(expected - on_b)
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
        checks_pass = True
        if purge.runs:
            print("the background purge's runs (seconds from the start of the run):")
            for began, ended, outcomes, listed, deleted in purge.runs:
                print(f"  {began - started:7.0f}-{ended - started:.0f} s: "
                      f"{', '.join(f'{k}={v}' for k, v in sorted(outcomes.items())) or 'no tombstone-mode table'}, "
                      f"listed {listed:,} below the horizon, deleted {deleted:,}")
        if opts.moves:
            print(f"B per window of {window:.0f} s (a full scan every {opts.scan_every:.0f} s; live {opts.live:,}, "
                  f"moves at {opts.rate}/s, purge every {purge_every:g} s with a grace of {grace:g} s):")
            latency_max = float(latency.max()) if latency.size else 0.0
            lines = moves_report(dest_probe, purge, memory, started, window, producer.added_at, latency_max, grace,
                                 lost, stale, missing)
            for line in lines:
                print(line)
            checks_pass = not any(line.startswith("FAIL") for line in lines)
        ratio = seen / producer.added if producer.added else 0.0
        print(f"ratio={ratio:.6f}")
        return 0 if lost == 0 and failure is None and checks_pass else 1


def prefill(producer: MoveProducer, conn_b: Connection, table: str, timeout: float = 900.0) -> None:
    """Queue the move producer's live cells and wait until B shows them all."""
    began = time.perf_counter()
    producer.prefill()
    while (shown := sum(p.num_rows for p in conn_b.scan_batches(table, batch_size=10_000))) < producer.live:
        if time.perf_counter() - began > timeout:
            raise SystemExit(f"prefill: B shows {shown:,} of {producer.live:,} live cells after {timeout:g} s")
        time.sleep(2.0)
    print(f"prefill: {producer.live:,} live cells on B in {time.perf_counter() - began:.0f} s")


def drained(conn_a: Connection, queue: QueueConfig, deadline: float) -> int:
    """Wait until A's queue is empty or ``deadline`` (perf_counter) passes; the entries left."""
    while (depth := queue_status(conn_a, queue).entries) and time.perf_counter() < deadline:
        time.sleep(2.0)
    return depth


if __name__ == "__main__":
    sys.exit(main())
