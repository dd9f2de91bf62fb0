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

Prints rows, cells and seconds per path, the split of the live bootstrap's time, and a final
``ratio=<java seconds / bulk seconds>`` line (>= 1: the bulk path is at least as fast as Java's
BatchWriter). Run: ``make bench`` or ``.venv/bin/python integration/bench/bench_bootstrap.py [--rows N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
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


def peak_rss() -> dict[str, int]:
    """The peak resident memory (MiB, VmHWM) of this process and of every process of the embedded clusters
    (their tablet servers and gateways), by kind."""
    out: dict[str, int] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if int(pid) == os.getpid():
            kind = "python (this bootstrap)"
        elif b"accumulo-harness" in command:
            found = re.search(rb"-Dproc=(\w+)", command)
            kind = found.group(1).decode() if found else "gateways and launcher"
        else:
            continue
        hwm = re.search(r"VmHWM:\s+(\d+) kB", status)
        if hwm:
            out[kind] = max(out.get(kind, 0), int(hwm.group(1)) // 1024)
    return out


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
    opts = parser.parse_args()
    with clusters(["a", "b"]) as running:
        a, b = running["a"], running["b"]
        combine = opts.snapshot.startswith("combine")
        with a.connect() as conn:
            (fill_combine if combine else fill_a)(conn, "boot_rows", opts.rows)
            queue = QueueConfig(table="boot_queue", qid="q", num_buckets=16)
            ExportQueue(conn, queue).init()
        per_row = 1 if combine else CELLS_PER_ROW
        cells = opts.rows * per_row
        print(f"A: {opts.rows:,} rows of {per_row} cells; B gets {cells:,} cells; snapshot form "
              f"{opts.snapshot}", flush=True)
        load = os.getloadavg()[0]
        java_s = java_write(b, running.classpath, "boot_java", cells)
        print(f"java BatchWriter: {cells:,} cells in {java_s:.2f} s ({cells / java_s:,.0f} cells/s)", flush=True)
        results = {}
        for method in ("live", "bulk"):
            seconds, detail = bootstrap(a, b, queue, "boot_rows", f"boot_{method}", method, SNAPSHOTS[opts.snapshot])
            results[method] = seconds
            assert count(b, f"boot_{method}") == cells, method
            print(f"bootstrap {method}: {detail['cells']:,} cells from {detail['rows']:,} rows in {seconds:.2f} s "
                  f"({detail['cells'] / seconds:,.0f} cells/s; tasks {detail['task_seconds']} s)", flush=True)
        print("peak RSS (MiB) by process kind: " + ", ".join(f"{k} {v:,}" for k, v in sorted(peak_rss().items())))
        print(f"load average at the start: {load:.1f}")
        print(f"live/java={java_s / results['live']:.2f}")
        print(f"ratio={java_s / results['bulk']:.2f}")


if __name__ == "__main__":
    main()
