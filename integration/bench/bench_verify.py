"""Benchmark: verify of a correct destination of 2M cells derived from 200k rows of A, beside a plain read of
the same data: ``scan_batches`` of A's producer table plus the destination table, in the same run.

The destination is built first with a bootstrap (``bench_bootstrap.py``'s rows and snapshot function). Verify
reads A, computes what each row implies (snapshot, native translation), digests it per tablet range of the
destination (natively) and compares with the destination's digests; a correct destination needs no
cell-by-cell comparison and no second pass.

Prints both times, the CPU seconds each kind of process used in each (a round's mean), and a final
``ratio=<plain read seconds / verify seconds>`` line (>= 0.5: verify costs at most twice a plain read of both
sides). Run: ``.venv/bin/python integration/bench/bench_verify.py [--rows N]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.jobs import LocalEngine  # noqa: E402
from connector.jobs.bootstrap import BootstrapJob, run_bootstrap  # noqa: E402
from connector.queue import ExportQueue, QueueConfig  # noqa: E402
from connector.snapshot import BootstrapSettings, Destination, snapshot_source, verify_destination  # noqa: E402
from integration.bench.bench_bootstrap import CELLS_PER_ROW, SNAPSHOTS, cpu_by_kind, cpu_since, fill_a, print_cpu  # noqa: E402
from integration.harness import clusters  # noqa: E402


def plain_read(conn, table: str) -> int:
    return sum(page.num_rows for page in conn.scan_batches(table, batch_size=10_000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of each (medians)")
    parser.add_argument("--snapshot", choices=sorted(SNAPSHOTS), default="batch",
                        help="the snapshot function's form: batch (pyarrow.compute over whole rows) or row")
    opts = parser.parse_args()
    snapshot = SNAPSHOTS[opts.snapshot]
    with clusters(["a", "b"]) as running:
        a, b = running["a"], running["b"]
        with a.connect() as conn:
            fill_a(conn, "verify_rows", opts.rows)
            queue = QueueConfig(table="verify_queue", qid="q", num_buckets=16)
            ExportQueue(conn, queue).init()
        with b.connect() as conn:  # ten tablets: verify compares range by range
            conn.create_table("verify_dest")
            conn.add_splits("verify_dest", [f"v{i:031d}".encode() for i in range(opts.rows, opts.rows * 10,
                                                                                  opts.rows)])
        run_bootstrap(LocalEngine(), BootstrapJob(
            source=a.gateway_options(), dest=b.gateway_options(), queue=queue, table="verify_rows",
            dest_table="verify_dest", settings=BootstrapSettings(snapshot=snapshot, translator="difference",
                                                                 final_check=False)))
        load = os.getloadavg()[0]
        reads, verifies = [], []
        read_cpu: Counter[str] = Counter()  # CPU seconds by process kind, summed over the rounds
        verify_cpu: Counter[str] = Counter()
        with a.connect() as conn_a, b.connect() as conn_b:
            source = snapshot_source(conn_a, "verify_rows", snapshot)
            for _ in range(opts.rounds):
                before, started = cpu_by_kind(), time.perf_counter()
                n = plain_read(conn_a, "verify_rows") + plain_read(conn_b, "verify_dest")
                reads.append(time.perf_counter() - started)
                read_cpu.update(cpu_since(before))
                before, started = cpu_by_kind(), time.perf_counter()
                report = verify_destination(conn_a, "verify_rows", source, queue,
                                            Destination(conn_b, "verify_dest", "difference"))
                verifies.append(time.perf_counter() - started)
                verify_cpu.update(cpu_since(before))
                assert report.differences == 0 and report.expected == opts.rows * CELLS_PER_ROW, report.to_json()
        read_s, verify_s = sorted(reads)[len(reads) // 2], sorted(verifies)[len(verifies) // 2]
        print(f"plain read of A and B: {n:,} cells in {read_s:.2f} s")
        print_cpu({k: v / opts.rounds for k, v in read_cpu.items()}, sum(reads) / opts.rounds)
        print(f"verify: {report.expected:,} cells in {report.ranges} ranges, {report.matched} matched by digest, "
              f"in {verify_s:.2f} s")
        print_cpu({k: v / opts.rounds for k, v in verify_cpu.items()}, sum(verifies) / opts.rounds)
        print(f"load average at the start: {load:.1f}")
        print(f"ratio={read_s / verify_s:.2f}")


if __name__ == "__main__":
    main()
