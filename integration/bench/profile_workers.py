"""Profile of Spark's Python workers during ``bench_cpu_per_entry``: where our own Python CPU per drained entry
goes.

Runs the same drain as :mod:`bench_cpu_per_entry` (one encoding, ``--encoding``) and, around the measured
round only, samples each of Spark's Python worker processes with ``py-spy record --native`` (threads on a CPU;
idle ones left out). Prints the share of samples per
operation (the first pattern of :data:`SPLIT` a stack matches), the top leaf frames, and keeps the collapsed
stacks in ``--out`` for a flame graph.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration.bench.bench_cpu_per_entry import kind_of, own_processes, run  # noqa: E402

PY_SPY = Path(sys.executable).parent / "py-spy"
#: (operation, pattern over a collapsed stack, innermost last); the first that matches names the sample
SPLIT = [
    ("reading: nextK, its socket and decoding", r"read_bucket_batches|_next_k|decode_next_k|scan_batches"),
    ("translating (native + pyarrow)", r"translate_batch|_native\.translate|translate_values"),
    ("writing B: frames and the update call", r"add_cells|encode_update_frames|_send_frames|update_message"),
    ("flushing B (waiting for the gateway)", r"flush\b|\(flush \(|_flush"),
    ("deleting from A", r"entry_deletes|_delete"),
    ("progress and stats rows", r"progress|stats_batch|write_progress"),
    ("Spark worker protocol (Arrow in/out)", r"pyspark/worker|pyspark/serializers|pyspark/sql/pandas"),
]


class Profile:
    """py-spy on every Python worker process of the session while the measured drain runs: the daemon and its
    forked workers, each recorded on its own (a thread starts a recorder for each worker as it appears)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.recorders: dict[int, subprocess.Popen[bytes]] = {}
        self._stop = threading.Event()

    def _record_new_workers(self) -> None:
        while not self._stop.is_set():
            for pid, (cmdline, _) in own_processes().items():
                if pid not in self.recorders and kind_of(pid, cmdline) == "python workers":
                    self.recorders[pid] = subprocess.Popen(
                        [str(PY_SPY) if PY_SPY.exists() else "py-spy", "record", "--native", "--rate", "250",
                         "--format", "raw", "--output", str(self.out / f"worker-{pid}.collapsed"), "--pid", str(pid)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self._stop.wait(0.1)

    @contextlib.contextmanager
    def around(self, _running: Any) -> Iterator[None]:
        self.out.mkdir(parents=True, exist_ok=True)
        watcher = threading.Thread(target=self._record_new_workers, daemon=True)
        watcher.start()
        time.sleep(0.5)  # the workers that exist already are being recorded before the drain starts
        try:
            yield
        finally:
            self._stop.set()
            watcher.join()
            for proc in self.recorders.values():
                proc.send_signal(signal.SIGINT)
            for proc in self.recorders.values():
                proc.wait(timeout=60)

    def report(self) -> None:
        stacks: collections.Counter[str] = collections.Counter()
        for raw in self.out.glob("worker-*.collapsed"):
            for line in raw.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if stack and count.isdigit():
                    stacks[stack] += int(count)
        total = sum(stacks.values())
        if not total:
            print("no samples")
            return
        split: collections.Counter[str] = collections.Counter()
        leaves: collections.Counter[str] = collections.Counter()
        for stack, n in stacks.items():
            split[next((name for name, pattern in SPLIT if re.search(pattern, stack)), "other")] += n
            leaves[stack.rsplit(";", 1)[-1]] += n
        print(f"python worker samples: {total}")
        for name, n in split.most_common():
            print(f"  {100 * n / total:5.1f}%  {name}")
        print("top leaf frames:")
        for frame, n in leaves.most_common(15):
            print(f"  {100 * n / total:5.1f}%  {frame[:150]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--warm-up", type=int, default=2000)
    parser.add_argument("--encoding", default="packed")
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="profile_workers_")))
    opts = parser.parse_args()
    profile = Profile(opts.out)
    run(opts.entries, opts.buckets, around=profile.around, warm_up=opts.warm_up, encodings=(opts.encoding,))
    profile.report()
    print(f"collapsed stacks: {opts.out}/worker-*.collapsed")


if __name__ == "__main__":
    main()
