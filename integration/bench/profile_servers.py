"""Profile of the servers during ``bench_cpu_per_entry``: where the gateways and tablet servers spend their CPU.

Runs the same drain as :mod:`bench_cpu_per_entry` and, around the measured round only, records the gateway
JVM (the launcher, which hosts both clusters' gateways) and both tablet servers with Java Flight Recorder
(``jcmd <pid> JFR.start``, the ``profile`` settings with every socket read and write recorded) and counts
their fsync/fdatasync calls (WAL syncs) with ``perf stat`` tracepoints when perf can. Prints per process:
the execution samples split by operation (scan, writes, conditional writes, WAL, Thrift I/O, ...), the top
leaf frames, GC pauses, socket traffic from the gateway to each tablet server (the batches that reach
them), and fsyncs per entry. Keeps the recordings in ``--out`` for ``jfr print`` or a flame graph (the
``.collapsed`` files are collapsed stacks).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration.bench.bench_cpu_per_entry import own_processes, run  # noqa: E402
from integration.harness import LAUNCHER  # noqa: E402

HERE = Path(__file__).resolve().parent

#: (category, pattern over the collapsed stack); the first that matches names a sample's operation
TSERVER_SPLIT = [
    ("wal sync", r"LogSyncingTask|DfsLogger\.(?:sync|hsync|flush)|FileDescriptor\.sync|FileChannelImpl\.force"),
    ("wal write", r"DfsLogger|TabletServerLogger|LogFileValue|WalStateManager"),
    ("minor compaction", r"MinorCompact|FileCompactor|MemoryIterator"),
    ("major compaction", r"CompactionService|CompactableImpl|ExternalCompaction|Compactor\b"),
    ("conditional writes", r"ConditionalSession|conditionalUpdate|ConditionCheckerContext|checkConditions"
                           r"|ConditionalMutation"),
    ("scan", r"ScanTask|LookupTask|NextBatchTask|ScanDataSource|continueScan|startScan|Tablet\.nextBatch"
             r"|SourceSwitchingIterator|TabletBase\.lookup"),
    ("writes (apply, in-memory map)", r"applyUpdates|closeUpdate|startUpdate|InMemoryMap|TabletMemory"
                                      r"|CommitSession|prepareMutationsForCommit|UpdateSession|Mutation"),
    ("thrift server I/O", r"TNonblockingServer|CustomNonBlockingServer|AbstractNonblockingServer|FrameBuffer"
                          r"|THsHaServer|TThreadPoolServer|SelectorThread|TimedProcessor"),
    ("zookeeper, metadata, other threads", r"zookeeper|ZooCache|ZooReader|ServiceLock|MetadataTable"),
]
GATEWAY_SPLIT = [
    ("update: Thrift decoding", r"update_args\.read|update_argsStandardScheme|ColumnUpdate.*\.read"
                                r"|TCompactProtocol\.read|TFramedTransport\.read"),
    ("update: to Mutations", r"Conversions\.toMutations|Conversions\.addUpdate|ColumnVisibility"),
    ("update: BatchWriter.addMutation", r"WriterSession\.update|TabletServerBatchWriter\.addMutation"),
    ("flush (waiting, bookkeeping)", r"WriterSession\.flush|WriterSession\.closeAndReport"),
    ("BatchWriter: binning, sending to tablet servers", r"TabletServerBatchWriter|MutationWriter"
                                                        r"|sendMutationsToTabletServer|TabletLocator"),
    ("nextK: scanning (client side)", r"ScannerIterator|ThriftScanner|ScannerImpl|ScannerSession\.next"
                                      r"|Conversions\.toThrift"),
    ("nextK: Thrift encoding", r"nextK_result|ScanResult.*write|KeyValue.*write"),
    ("conditional writes", r"ConditionalWriter|updateRowsConditionally"),
    ("thrift server I/O", r"TThreadPoolServer|TCompactProtocol|TFramedTransport|TSocket|SocketInputStream"
                          r"|SocketOutputStream|NioSocketImpl"),
    ("zookeeper, other threads", r"zookeeper|ZooCache|ZooReader"),
]


def _jfc(folder: Path) -> Path:
    """The JDK's ``profile`` settings with every socket read and write recorded (threshold 0)."""
    java_home = Path(os.path.realpath(shutil.which("java") or "java")).parent.parent
    text = (java_home / "lib" / "jfr" / "profile.jfc").read_text()
    text = re.sub(r'(<event name="jdk\.Socket(?:Read|Write)">.*?<setting name="threshold"[^>]*>)[^<]*',
                  r"\g<1>0 ms", text, flags=re.S)
    path = folder / "profile-sockets.jfc"
    path.write_text(text)
    return path


def _servers() -> dict[str, int]:
    """role -> pid of this run's gateway JVM and tablet servers (children of this process only)."""
    found: dict[str, int] = {}
    for pid, (cmdline, _) in own_processes().items():
        if LAUNCHER in cmdline:
            found["gateways"] = pid
        elif "-Dproc=TabletServer" in cmdline or "TabletServer" in cmdline.split(" -cp ")[-1][-200:]:
            side = "a" if "/a-tmp" in cmdline else "b" if "/b-tmp" in cmdline else str(pid)
            found[f"tserver {side}"] = pid
    return found


def _ports(pid: int) -> set[int]:
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if f"pid={pid}," in line}


class Profile:
    """JFR and perf around the measured drain; ``report(entries)`` prints the figures afterwards."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.pids: dict[str, int] = {}
        self.ports: dict[str, set[int]] = {}
        self.perf: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    @contextlib.contextmanager
    def around(self, _running: Any) -> Iterator[None]:
        self.out.mkdir(parents=True, exist_ok=True)
        settings = _jfc(self.out)
        self.pids = _servers()
        self.ports = {role: _ports(pid) for role, pid in self.pids.items() if role.startswith("tserver")}
        for role, pid in self.pids.items():
            subprocess.run(["jcmd", str(pid), "JFR.start", "name=profile_servers", f"settings={settings}",
                            f"filename={self._jfr(role)}"], check=True, capture_output=True)
            if role.startswith("tserver") and shutil.which("perf"):
                counts = self.out / f"{role.replace(' ', '_')}.perf"
                proc = subprocess.Popen(["perf", "stat", "-x", ",", "-o", str(counts), "-e",
                                         "syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync", "-p", str(pid)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                self.perf[role] = (proc, counts)
        try:
            yield
        finally:
            for pid in self.pids.values():
                subprocess.run(["jcmd", str(pid), "JFR.stop", "name=profile_servers"], capture_output=True)
            for proc, _ in self.perf.values():
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=30)

    def _jfr(self, role: str) -> Path:
        return self.out / f"{role.replace(' ', '_')}.jfr"

    def report(self, entries: int) -> None:
        for role in sorted(self.pids):
            lines = subprocess.run(["java", str(HERE / "JfrSplit.java"), str(self._jfr(role))], check=True,
                                   capture_output=True, text=True).stdout.splitlines()
            self._report_one(role, lines, entries)

    def _report_one(self, role: str, lines: list[str], entries: int) -> None:
        split = GATEWAY_SPLIT if role == "gateways" else TSERVER_SPLIT
        by_cat: collections.Counter[str] = collections.Counter()
        by_thread_cat: collections.Counter[str] = collections.Counter()
        leaves: collections.Counter[str] = collections.Counter()
        total = 0
        collapsed = []
        for line in lines:
            kind, rest = line.split(" ", 1)
            if kind == "sample":
                n_text, key = rest.split(" ", 1)
                n = int(n_text)
                thread, stack = key.split("|", 1)
                collapsed.append(f"{thread};{stack} {n}")
                cat = next((name for name, pattern in split if re.search(pattern, stack)), "other")
                if role == "gateways" and thread.startswith("gateway-"):
                    by_thread_cat[f"{thread.split('-')[1]}: {cat}"] += n
                by_cat[cat] += n
                leaves[stack.rsplit(";", 1)[-1]] += n
                total += n
            elif kind == "socket":
                direction, port, events, nbytes = rest.split()
                side = next((r for r, ports in self.ports.items() if int(port) in ports), None)
                if side is not None and role == "gateways":
                    print(f"  {role} -> {side} socket {direction}: {int(events):,} calls, {int(nbytes):,} bytes, "
                          f"{int(nbytes) / max(1, int(events)):,.0f} bytes/call, "
                          f"{int(events) / entries * 1000:.2f} calls per 1000 entries")
            elif kind == "gc":
                count, ms = rest.split()
                print(f"  {role}: GC {count} collections, {float(ms):.0f} ms paused")
        (self.out / f"{role.replace(' ', '_')}.collapsed").write_text("\n".join(collapsed) + "\n")
        print(f"== {role}: {total} execution samples")
        for cat, n in by_cat.most_common():
            print(f"  {cat:<50} {n:6d}  {n / max(1, total):6.1%}")
        if by_thread_cat:
            print("  by gateway (connection threads only):")
            for cat, n in sorted(by_thread_cat.items()):
                print(f"    {cat:<55} {n:6d}")
        print("  top leaf frames:")
        for leaf, n in leaves.most_common(15):
            print(f"    {n:6d}  {n / max(1, total):6.1%}  {leaf}")
        perf = self.perf.get(role)
        if perf is not None and perf[1].exists():
            for line in perf[1].read_text().splitlines():
                parts = line.split(",")
                if len(parts) > 2 and parts[0].strip().isdigit():
                    print(f"  {role} {parts[2]}: {int(parts[0]):,} ({int(parts[0]) / entries * 1000:.2f} "
                          f"per 1000 entries)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--out", default=None, help="folder for the recordings (default: a new temporary one)")
    parser.add_argument("--java-maps", action="store_true", help="tablet servers with Java's in-memory map")
    parser.add_argument("--warm-up", type=int, default=2000,
                        help="entries drained first, unprofiled (100000: the servers' JIT has compiled the path)")
    parser.add_argument("--encoding", default="json", help="the queue's value encoding: json or packed")
    opts = parser.parse_args()
    out = Path(opts.out or tempfile.mkdtemp(prefix="profile-servers-"))
    profile = Profile(out)
    run(opts.entries, opts.buckets, around=profile.around, java_maps=opts.java_maps, warm_up=opts.warm_up,
        encodings=(opts.encoding,))
    print(f"recordings in {out}")
    profile.report(opts.entries)


if __name__ == "__main__":
    main()
