"""Benchmark: the servers' CPU per drained entry under drain variants, measured in one run, alternately.

The same queue contents (difference updates, as in ``bench_cpu_per_entry``) are drained in-process (no Spark:
only the servers' share is compared) once per variant and round, variants alternating so that the machine's
load drifts over all of them alike. A variant is a set of ``drain_buckets`` arguments: the deletes'
durability (``writer_options``), the scan page size (``batch_size``), the export batch size
(``buffer_bytes``). Prints per variant the gateway and tablet server microseconds per entry (median over the
rounds) and each variant's ratio to the first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.export import AccumuloExporter  # noqa: E402
from connector.queue import DrainSettings, ExportQueue, QueueConfig, drain_buckets, queue_status  # noqa: E402
from integration.bench.bench_cpu_per_entry import cpu_by_kind  # noqa: E402
from integration.harness import clusters  # noqa: E402

#: the first is the baseline every other is compared with (the final ratio= line: the last one over it)
VARIANTS: dict[str, dict[str, Any]] = {
    "deletes with the table's durability": {},
    "deletes sync": {"writer_options": {"durability": "sync"}},
    "pages of 4000": {"batch_size": 4000},
    "4 MiB batches": {"settings": DrainSettings(buffer_bytes=4 << 20)},
    "deletes skip the log (none)": {"writer_options": {"durability": "none"}},
}


def fill(conn: Any, queue: QueueConfig, entries: int, offset: int) -> None:
    with ExportQueue(conn, queue) as q:
        q.init()
        q.add_all((f"doc{i}", {"old": [{"row": f"w{i % 997}", "cf": "doc", "cq": f"d{i}", "value": "1"}],
                               "new": [{"row": f"w{(i + 1) % 997}", "cf": "doc", "cq": f"d{i}", "value": "1"}]},
                   offset + i) for i in range(entries))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=50_000, help="per variant and round")
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names of VARIANTS")
    opts = parser.parse_args()
    names = [v.strip() for v in opts.variants.split(",") if v.strip()]
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        with a.connect() as conn_a, b.connect() as conn_b:
            # warm-up: the servers' JIT and first tablets, not what an entry costs afterwards
            warm = QueueConfig(table="cuts_warm", qid="c", num_buckets=opts.buckets)
            fill(conn_a, warm, opts.entries, 1)
            with AccumuloExporter(conn_b, "cuts_warm_index", "difference").ensure_table() as exporter:
                drain_buckets(conn_a, warm, range(opts.buckets), exporter)
            for r in range(opts.rounds):
                for v, name in enumerate(names):
                    queue = QueueConfig(table=f"cuts_{r}_{v}", qid="c", num_buckets=opts.buckets)
                    fill(conn_a, queue, opts.entries, 1000 + (r * len(names) + v) * opts.entries)
                    exporter = AccumuloExporter(conn_b, f"cuts_index_{r}_{v}", "difference").ensure_table()
                    before, started = cpu_by_kind(), time.perf_counter()
                    stats = drain_buckets(conn_a, queue, range(opts.buckets), exporter, **VARIANTS[name])
                    wall = time.perf_counter() - started
                    after = cpu_by_kind()
                    exporter.close()
                    assert stats.exported == opts.entries, stats
                    assert queue_status(conn_a, queue).entries == 0
                    n = stats.exported
                    gw = (after["gateways"] - before["gateways"]) / n * 1e6
                    ts = (after["tablet servers"] - before["tablet servers"]) / n * 1e6
                    results[name].append((gw, ts, n / wall))
                    print(f"round {r} {name:<32} gateways {gw:6.2f} us/entry  tablet servers {ts:6.2f} us/entry  "
                          f"{n / wall:8,.0f} entries/s  load={os.getloadavg()[0]:.1f}", flush=True)
    base = last = None
    for name in names:
        gw = statistics.median(x[0] for x in results[name])
        ts = statistics.median(x[1] for x in results[name])
        rate = statistics.median(x[2] for x in results[name])
        base = base or (gw + ts)
        last = gw + ts
        print(f"{name:<32} gateways {gw:6.2f}  tablet servers {ts:6.2f}  servers {gw + ts:6.2f} us/entry  "
              f"ratio to first {(gw + ts) / base:.3f}  {rate:,.0f} entries/s")
    if base and last is not None:
        print(f"ratio={last / base:.3f}  # servers' CPU per entry, {names[-1]!r} over {names[0]!r}")


if __name__ == "__main__":
    main()
