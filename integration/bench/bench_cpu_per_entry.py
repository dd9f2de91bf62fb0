"""Benchmark: CPU microseconds per drained entry, by process kind, while Spark drains N difference updates.

Reads utime + stime of this process and its descendants (only those: other users of a shared machine do not
count) from /proc before and after the drain (children that exited and were reaped count through their
parent's cutime/cstime) and splits them into: the Python driver
(this process), Spark's Python workers, the Spark JVM, the gateways (our Launcher JVM, which hosts them),
tablet servers and the other Accumulo processes. Measures each queue value encoding of ``--encodings`` in
turn (default json, then packed). Prints each kind's CPU per entry, the wall rate, the bytes read per entry,
and a final ``ratio=`` line: our own processes' (Python workers, Spark JVM, gateways) microseconds per entry
with the last encoding against the first.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status  # noqa: E402
from connector.spark import DrainJob, run_batch, spark_session  # noqa: E402
from integration.harness import LAUNCHER, clusters  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
#: issue 8's budget per drained entry: Python workers 5 us plus Spark JVM 3 us
KINDS = ("python driver", "python workers", "spark jvm", "gateways", "tablet servers", "other accumulo")


def kind_of(pid: int, cmdline: str) -> str | None:
    if pid == os.getpid():
        return "python driver"
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline or "pyspark/daemon" in cmdline:
        return "python workers"
    if "java" not in cmdline:
        return None
    if "org.apache.spark.deploy.SparkSubmit" in cmdline:
        return "spark jvm"
    if LAUNCHER in cmdline or "accumulo-gateway-" in cmdline:  # the launcher's gateways, standalone ones
        return "gateways"
    if "TabletServer" in cmdline or " tserver" in cmdline:
        return "tablet servers"
    if "accumulo" in cmdline.lower():
        return "other accumulo"
    return None


def own_processes(root: int | None = None) -> dict[int, tuple[str, list[str]]]:
    """pid -> (command line, /proc stat fields after the name) of ``root`` (default: this process) and its
    descendants; other processes of the machine (other benchmarks, other clusters) are left out."""
    procs: dict[int, tuple[str, list[str]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        procs[int(entry.name)] = (cmdline, fields)
    parent = {pid: int(fields[1]) for pid, (_, fields) in procs.items()}
    root = os.getpid() if root is None else root
    mine = {}
    for pid in procs:
        p, hops = pid, 0
        while p not in (root, 0, 1) and p in parent and hops < 64:
            p, hops = parent[p], hops + 1
        if p == root:
            mine[pid] = procs[pid]
    return mine


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds per kind, own and reaped children's (a forked worker that exited counts in its daemon)."""
    totals = dict.fromkeys(KINDS, 0.0)
    for pid, (cmdline, fields) in own_processes().items():
        kind = kind_of(pid, cmdline)
        if kind is None:
            continue
        utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
        own = utime + stime
        # the driver's reaped children are the Spark JVM, counted on its own; elsewhere children belong to the kind
        reaped = 0 if kind == "python driver" else cutime + cstime
        totals[kind] += (own + reaped) / TICK
    return totals


Around = Callable[[Any], contextlib.AbstractContextManager[Any]]


def _update(i: int) -> dict[str, Any]:
    """The benchmark's difference update number ``i``: one index cell moves from one word row to the next."""
    return {"old": [{"row": f"w{i % 997}", "cf": "doc", "cq": f"d{i}", "value": "1"}],
            "new": [{"row": f"w{(i + 1) % 997}", "cf": "doc", "cq": f"d{i}", "value": "1"}]}


def run(entries: int, buckets: int, around: Around | None = None, java_maps: bool = False,
        warm_up: int = 2000, encodings: tuple[str, ...] = ("json",)) -> dict[str, float]:
    """For each queue value encoding of ``encodings`` in turn (one cluster pair, one Spark session): fill a
    queue of ``entries`` difference updates, drain it with Spark and print CPU per entry by kind and the bytes
    read per entry (row + value); returns microseconds per entry by kind of the last. ``around(running)``
    wraps each measured drain (a profiler, say). ``java_maps``: the tablet servers use Java's in-memory map,
    not the native one. ``warm_up``: entries drained first, unmeasured (the JVMs' just-in-time compilers work
    through the first ~50k)."""
    with clusters(("a", "b"), **({"native_maps": None} if java_maps else {})) as running:
        a, b = running["a"], running["b"]
        spark = spark_session(app_name="bench cpu per entry")
        # a warm-up round on a small queue first: the figures are then what each further entry costs, not the
        # one-off start of Spark's Python workers, their imports and the JVM's first job
        warm = QueueConfig(table="cpu_warm", qid="w", num_buckets=buckets)
        with a.connect() as conn_a, ExportQueue(conn_a, warm) as q:
            q.init()
            q.add_all((f"w{i}", _update(i), i) for i in range(warm_up))
        run_batch(spark, DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=warm,
                                  dest_table="cpu_warm_index", settings=DrainSettings(create_dest_table=True)))
        per_entry: dict[str, float] = {}
        own: dict[str, float] = {}
        for encoding in encodings:
            queue = QueueConfig(table=f"cpu_queue_{encoding}", qid="cq", num_buckets=buckets,
                                value_serializer=encoding)
            with a.connect() as conn_a:
                with ExportQueue(conn_a, queue) as q:
                    q.init()
                    q.add_all((f"doc{i}", _update(i), 1000 + i) for i in range(entries))
                assert queue_status(conn_a, queue).entries == entries
            job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue,
                           dest_table=f"cpu_index_{encoding}", settings=DrainSettings(create_dest_table=True))
            with around(running) if around is not None else contextlib.nullcontext():
                before, started = cpu_by_kind(), time.perf_counter()
                report = run_batch(spark, job)
                wall = time.perf_counter() - started
                after = cpu_by_kind()
            n = report.exported
            assert n == entries, f"exported {n} of {entries}"
            maps = "native" if all(c.native_maps for c in running) else "java"
            print(f"encoding={encoding} entries={n} buckets={buckets} rounds={report.rounds} wall={wall:.2f}s "
                  f"rate={n / wall:,.0f}/s bytes/entry={report.totals.bytes / n:.1f} (row + value) "
                  f"load={os.getloadavg()[0]:.1f} maps={maps}")
            per_entry = {kind: (after[kind] - before[kind]) / n * 1e6 for kind in KINDS}
            for kind in KINDS:
                print(f"{kind:>15}: {after[kind] - before[kind]:7.2f} s CPU  {per_entry[kind]:8.2f} us/entry")
            own[encoding] = sum(per_entry[k] for k in ("python workers", "spark jvm", "gateways"))
            print(f"servers (gateways + tablet servers): {per_entry['gateways'] + per_entry['tablet servers']:.2f} "
                  f"us/entry; our own (python workers + spark jvm + gateways): {own[encoding]:.2f} us/entry "
                  f"(issue 29's budget: 10)")
        spark.stop()
        # the last encoding against the first, measured in this run
        print(f"ratio={own[encodings[-1]] / own[encodings[0]]:.3f}")
        return per_entry


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--java-maps", action="store_true", help="tablet servers with Java's in-memory map")
    parser.add_argument("--warm-up", type=int, default=2000, help="entries drained first, unmeasured")
    parser.add_argument("--encodings", default="json,packed",
                        help="queue value encodings measured in turn, comma-separated (the ratio: last/first)")
    opts = parser.parse_args()
    run(opts.entries, opts.buckets, java_maps=opts.java_maps, warm_up=opts.warm_up,
        encodings=tuple(opts.encodings.split(",")))


if __name__ == "__main__":
    main()
