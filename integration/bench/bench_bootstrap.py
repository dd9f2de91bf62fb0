"""Benchmark: a bootstrap of 2M destination cells derived from 200k rows of A (10 cells each), through the
live path (the exporter's writer) and the bulk path (sorted RFiles written by the gateway, then a bulk import
that keeps their timestamps), beside a Java BatchWriter writing the same number of cells of the same size into
B, all in one run.

A's producer table holds rows ``r%08d`` with a version cell and 10 cells ``c:q<j> = <value>``; the snapshot
function (``snapshot`` below) exports each row's cells as one difference update whose new cells are the
inverted index ``<value> i:<row>`` (so B's rows are spread over the whole key space, as an index's are). The
bootstrap's final check is off: this measures writing; ``bench_verify.py`` measures checking.

``--snapshot combine`` bootstraps a combine queue's table instead (``--rows`` keys, each one cell on B through the
``value`` translator; ``combine-row`` the same through the per-key form).

The Java writer first writes up to 2M cells unmeasured, so that B's tablet server is as warm for it as for
the bootstrap paths that follow (a cold one took 1.6-1.9 times as long at 2M cells). Each side's time ends when
its cells are on B (the writer's ``close()`` returned, the bulk load returned): compactions still running then
are left out on both sides.

Prints rows, cells and seconds per path; per path, the CPU seconds each kind of process used and each kind's
peak resident memory during that path alone (the peaks are reset before it, ``/proc/<pid>/clear_refs``) and
this process's resident memory at each tenth of the path (bounded memory shows as a plateau); and a final
``ratio=<java seconds / bulk seconds>`` line (>= 1: the bulk path is at least as fast as Java's BatchWriter).
``--paths bulk`` runs the bulk path only (a large ``--rows``: 2,000,000 rows are 20M cells).
Run: ``make bench`` or ``.venv/bin/python integration/bench/bench_bootstrap.py [--rows N] [--paths bulk]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from connector.accumulo import UPDATE_SCHEMA, Cell  # noqa: E402
from connector.combine import CombineConfig, CombineQueue  # noqa: E402
from connector.jobs import LocalEngine  # noqa: E402
from connector.jobs.bootstrap import BootstrapJob, run_bootstrap  # noqa: E402
from connector.queue import ExportQueue, QueueConfig  # noqa: E402
from connector.snapshot import BootstrapSettings, batch_snapshot  # noqa: E402
from connector.transactions import TxLayout  # noqa: E402
from connector.transactions.rows import prepare_producer_table  # noqa: E402
from integration.bench.bench_cpu_per_entry import TICK, own_processes  # noqa: E402
from integration.harness import BENCH_WRITER, clusters, java_command  # noqa: E402

CELLS_PER_ROW = 10
VALUE_BYTES = 32


def snapshot(row: bytes, cells: Sequence[Cell]) -> list[tuple[str, dict]]:
    """A row's cells as the inverted index ``<value> i:<row>`` (one difference update per row)."""
    name = row.decode()
    return [(name, {"old": [], "new": [{"row": c.value.decode(), "cf": "i", "cq": name, "value": ""}
                                       for c in cells]})]


@batch_snapshot
def snapshot_batch(cells: pa.RecordBatch) -> pa.RecordBatch:
    """The same inverted index in the batch form: every cell ``<value> i:<row>``, with pyarrow.compute."""
    n = cells.num_rows
    return pa.record_batch({"row": cells["value"], "cf": pa.array([b"i"] * n, pa.binary()), "cq": cells["row"],
                            "value": pa.array([b""] * n, pa.binary()), "source": cells["row"]})


#: --snapshot: the function each form names (mirror: the built-in replica, each row's own cells as they are;
#: combine: a combine queue's table, each key's current value as one cell through the value translator, in the
#: batch form; combine-row: the same observer named by module, which runs once per key as before issue 37)
SNAPSHOTS = {"row": "integration.bench.bench_bootstrap:snapshot",
             "batch": "integration.bench.bench_bootstrap:snapshot_batch", "mirror": "mirror", "combine": "combine=c",
             "combine-row": "combine=c:connector.combine.functions:changes_observer"}
COMBINE_TRANSLATOR = "value=count"


def fill_combine(conn, table: str, keys: int, batch_rows: int = 50_000) -> None:
    """A combine queue ``c`` (16 buckets) whose keys ``"k%08d"`` each hold a current value (a count) at a
    version, as ``combine run`` leaves them: ``s:seq`` and ``s:val``, both at ts = the version."""
    config = CombineConfig(table=table, cid="c", num_buckets=16)
    CombineQueue(conn, config).init()
    version = time.time_ns() // 1000
    with conn.batch_writer(table) as writer:
        for start in range(0, keys, batch_rows):
            n = range(start, min(start + batch_rows, keys))
            rows = [config.layout.key_row(b'"k%08d"' % i) for i in n]  # set-up only: one murmur3 per key
            size = len(rows)
            writer.add_cells(pa.record_batch(
                [pa.array([r for r in rows for _ in (0, 1)], pa.binary()),
                 pa.array([b"s"] * 2 * size, pa.binary()), pa.array([b"seq", b"val"] * size, pa.binary()),
                 pa.array([b""] * 2 * size, pa.binary()), pa.array([version] * 2 * size, pa.int64()),
                 pa.array([v for i in n for v in (str(version).encode(), str(i % 977 + 1).encode())], pa.binary()),
                 pa.array([False] * 2 * size)], schema=UPDATE_SCHEMA))


def fill_a(conn, table: str, rows: int, batch_rows: int = 20_000) -> None:
    """Rows ``r%08d``: a version cell ``!tx:v`` and 10 cells ``c:q<j>`` of 32-byte values, all at ts = the version."""
    conn.create_table(table)
    prepare_producer_table(conn, table, TxLayout())  # the visibility summarizer: bootstraps refuse a table without
    conn.add_splits(table, [f"r{i:08d}".encode() for i in range(rows // 8, rows, rows // 8)])
    version = time.time_ns() // 1000
    with conn.batch_writer(table) as writer:
        for start in range(0, rows, batch_rows):
            n = np.arange(start, min(start + batch_rows, rows), dtype=np.int64)
            per = CELLS_PER_ROW + 1
            idx = np.repeat(n, per)
            j = np.tile(np.arange(per), len(n))
            row = pc.binary_join_element_wise("r", pc.utf8_lpad(pa.array(idx).cast(pa.string()), 8, "0"), "")
            cf = pa.array(np.where(j == 0, "!tx", "c")).cast(pa.binary())
            cq = pa.array(np.where(j == 0, "v", np.char.add("q", (j - 1).astype(str)))).cast(pa.binary())
            cell_no = idx * CELLS_PER_ROW + (j - 1)
            value = pc.binary_join_element_wise(
                "v", pc.utf8_lpad(pa.array(cell_no).cast(pa.string()), VALUE_BYTES - 1, "0"), "")
            value = pc.if_else(pa.array(j == 0), pa.scalar(str(version)), value)
            size = len(idx)
            writer.add_cells(pa.record_batch(
                [row.cast(pa.binary()), cf, cq, pa.array(np.full(size, b""), pa.binary()),
                 pa.array(np.full(size, version), pa.int64()), value.cast(pa.binary()),
                 pa.array(np.zeros(size, dtype=bool))], schema=UPDATE_SCHEMA))


def java_write(cluster, classpath: str, table: str, cells: int) -> float:
    args = [*cluster.java_args(), "--table", table, "--cells", str(cells), "--cells-per-row", "1",
            "--value-bytes", "1"]
    out = subprocess.run(java_command(classpath, BENCH_WRITER, *args), env=cluster.java_env(),
                         capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["seconds"])


def bootstrap(a, b, queue: QueueConfig, table: str, dest: str, method: str, snapshot: str) -> tuple[float, dict]:
    translator = COMBINE_TRANSLATOR if snapshot.startswith("combine") else "difference"
    settings = BootstrapSettings(snapshot=snapshot, translator=translator, final_check=False, method=method,
                                 create_dest_table=True)
    job = BootstrapJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue, table=table,
                       dest_table=dest, settings=settings)
    started = time.perf_counter()
    report = run_bootstrap(LocalEngine(), job)
    seconds = time.perf_counter() - started
    t = report.totals
    return seconds, {"rows": t.rows, "cells": t.cells, "failed": t.failed, "task_seconds": round(t.seconds, 2)}


def _harness_processes() -> dict[int, tuple[str, list[str]]]:
    """pid -> (kind, ``/proc`` stat fields) of this process and of the embedded clusters' processes among its
    descendants. A cluster's process is ``<process> <cluster>`` (``TabletServer b``, say); the gateways are
    one kind (one JVM hosts both)."""
    out: dict[int, tuple[str, list[str]]] = {}
    for pid, (cmdline, fields) in own_processes().items():
        if pid == os.getpid():
            kind = "python (this benchmark)"
        elif "accumulo-harness" in cmdline:
            found = re.search(r"-Dproc=(\w+)", cmdline)
            cluster = re.search(r"/(\w+)-tmp(?: |$)", cmdline)
            kind = (f"{found.group(1)} {cluster.group(1) if cluster else '?'}" if found
                    else "gateways and launcher")
        else:
            continue
        out[pid] = (kind, fields)
    return out


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds (user + system) each kind of ``_harness_processes`` has used so far."""
    out: dict[str, float] = {}
    for kind, fields in _harness_processes().values():
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


def reset_peak_rss() -> None:
    """Start every harness process's peak resident memory (VmHWM) over from its current size."""
    for pid in _harness_processes():
        with contextlib.suppress(OSError):  # gone, or not ours to reset: its peak then covers its whole life
            Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss() -> dict[str, int]:
    """The peak resident memory (MiB, VmHWM, since the last ``reset_peak_rss``) by process kind."""
    out: dict[str, int] = {}
    for pid, (kind, _) in _harness_processes().items():
        try:
            hwm = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
        except OSError:
            continue
        if hwm:
            out[kind] = max(out.get(kind, 0), int(hwm.group(1)) // 1024)
    return out


def _children_cpu() -> float:
    """CPU seconds of this process's exited, reaped children (the Java writer's JVM)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_since(before: dict[str, float]) -> dict[str, float]:
    """CPU seconds each kind of process used since ``before`` (``cpu_by_kind``)."""
    return {k: v - before.get(k, 0.0) for k, v in sorted(cpu_by_kind().items()) if v - before.get(k, 0.0) >= 0.05}


def print_cpu(cpu: dict[str, float], seconds: float) -> None:
    """One line: each kind's CPU seconds, their sum, and the cores they kept busy over ``seconds``."""
    print("  CPU seconds by process kind: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items()))
          + f" (all {sum(cpu.values()):.1f}; {sum(cpu.values()) / seconds:.2f} cores busy on average)", flush=True)


class RssSampler:
    """This process's resident memory once a second while the block runs (is it bounded, or does it grow with
    the work done?)."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            found = re.search(r"VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text())
            self.samples.append(int(found.group(1)) // 1024 if found else 0)
            if self._stop.wait(1.0):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def tenths(self) -> list[int]:
        """The samples at 10%, 20%, ..., 100% of the block's time (MiB)."""
        n = len(self.samples)
        return [self.samples[min(n - 1, max(0, round(n * k / 10) - 1))] for k in range(1, 11)] if n else []


def _flush(cluster, table: str) -> None:
    """Flush ``table`` to files (after its path was timed): its minor compaction is not the next path's cost."""
    with cluster.connect() as conn:
        conn.flush_table(table, wait=True)


def count(cluster, table: str) -> int:
    with cluster.connect() as conn:
        return sum(p.num_rows for p in conn.scan_batches(table, batch_size=20_000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--snapshot", choices=sorted(SNAPSHOTS), default="batch",
                        help="the snapshot function's form: batch (pyarrow.compute over whole rows), row, or the "
                             "built-in mirror; or combine: a combine queue's table of --rows keys, one cell each "
                             "(the value translator), through the built-in combine snapshot")
    parser.add_argument("--paths", default="live,bulk",
                        help="the bootstrap paths to run, in order, comma separated (live, bulk); the ratio= line "
                             "takes the bulk path's time")
    opts = parser.parse_args()
    paths = opts.paths.split(",")
    if not set(paths) <= {"live", "bulk"} or not paths:
        parser.error(f"--paths: expected live and/or bulk, got {opts.paths!r}")
    with clusters(["a", "b"]) as running:
        a, b = running["a"], running["b"]
        combine = opts.snapshot.startswith("combine")
        with a.connect() as conn:
            (fill_combine if combine else fill_a)(conn, "boot_rows", opts.rows)
            queue = QueueConfig(table="boot_queue", qid="q", num_buckets=16)
            ExportQueue(conn, queue).init()
            conn.flush_table("boot_rows", wait=True)  # A's minor compaction of the fill is not any path's cost
        per_row = 1 if combine else CELLS_PER_ROW
        cells = opts.rows * per_row
        print(f"A: {opts.rows:,} rows of {per_row} cells; B gets {cells:,} cells; snapshot form "
              f"{opts.snapshot}", flush=True)
        load = os.getloadavg()[0]
        # a warm-up first: the bootstrap paths run on JVMs (B's tablet server's above all) that earlier work warmed
        warm_cells = min(cells, 2_000_000)
        warm_s = java_write(b, running.classpath, "boot_java_warm_up", warm_cells)
        _flush(b, "boot_java_warm_up")
        print(f"java BatchWriter, warm-up (not compared): {warm_cells:,} cells in {warm_s:.2f} s", flush=True)
        cpu_before, children_before = cpu_by_kind(), _children_cpu()
        java_s = java_write(b, running.classpath, "boot_java", cells)
        cpu = cpu_since(cpu_before)
        cpu["java writer"] = _children_cpu() - children_before
        _flush(b, "boot_java")
        print(f"java BatchWriter: {cells:,} cells in {java_s:.2f} s ({cells / java_s:,.0f} cells/s)", flush=True)
        print_cpu(cpu, java_s)
        results = {}
        for method in paths:
            reset_peak_rss()
            cpu_before = cpu_by_kind()
            with RssSampler() as rss:
                seconds, detail = bootstrap(a, b, queue, "boot_rows", f"boot_{method}", method,
                                            SNAPSHOTS[opts.snapshot])
            cpu = cpu_since(cpu_before)
            peaks = peak_rss()
            results[method] = seconds
            _flush(b, f"boot_{method}")
            assert count(b, f"boot_{method}") == cells, method
            print(f"bootstrap {method}: {detail['cells']:,} cells from {detail['rows']:,} rows in {seconds:.2f} s "
                  f"({detail['cells'] / seconds:,.0f} cells/s; tasks {detail['task_seconds']} s)", flush=True)
            print_cpu(cpu, seconds)
            print("  peak RSS (MiB) by process kind: " + ", ".join(f"{k} {v:,}" for k, v in sorted(peaks.items())),
                  flush=True)
            print("  this process's RSS (MiB) at each tenth of the path: " + " ".join(map(str, rss.tenths())),
                  flush=True)
        print(f"load average at the start: {load:.1f}")
        if "live" in results:
            print(f"live/java={java_s / results['live']:.2f}")
        print(f"ratio={java_s / results.get('bulk', results.get('live', 0.0)):.2f}")


if __name__ == "__main__":
    main()
