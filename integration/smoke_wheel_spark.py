"""Run by ``integration/smoke_wheel.py`` with a smoke virtualenv's Python (the installed wheel, not this tree):
the Spark paths whose Spark-version fallbacks ``connector/spark/compat.py`` chooses, in one ``local[2]``
session against the clusters ``A`` and ``B`` of ``ACCUMULO_EXPORT_CONFIG``:

1. the streaming drain (``export-queue-drain``) at a processing-time trigger with a read limit of 6 entries,
   entries added while it runs, stopped between micro-batches;
2. the streaming drain with ``availableNow`` and the same read limit (one micro-batch before Spark 4.2);
3. the streaming sink: ``export-queue`` read as a stream into the ``accumulo-export`` sink (drain mode),
   ``availableNow``;
4. the read source: ``accumulo`` on B's table of step 3; before Spark 4.1 the option ``pushdown`` is refused in
   one line.

Usage: ``python smoke_wheel_spark.py TAG WORKDIR``. Prints one JSON line: the tables written on B (the caller
checks their cells there), the micro-batches each stream ran, the PySpark and what compat found.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from connector import DrainJob, DrainSettings, ExportQueue, QueueConfig, cluster, spark_session
from connector.queue import count_entries
from connector.spark import compat, start_stream
from connector.spark.drain_job import stop_stream

ENTRIES = 20


def cell(i: int) -> dict[str, str]:
    return {"row": f"r{i:03d}", "cf": "f", "cq": "q", "value": f"v{i}"}


def main(tag: str, work: Path) -> dict:
    a, b = cluster("A"), cluster("B")
    conn_a, conn_b = a.connect(), b.connect()
    spark = spark_session("local[2]", f"smoke{tag}")
    out: dict = {"compat": compat.summary(), "tables": {}, "micro_batches": {}}

    def fill(queue: QueueConfig, first: int, n: int) -> None:
        with ExportQueue(conn_a, queue) as q:
            for i in range(first, first + n):
                q.add(f"k{i}", cell(i), seq=i + 1)

    def wait_for(table: str, n: int, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while sum(1 for _ in conn_b.scan(table)) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"{table} on B has {sum(1 for _ in conn_b.scan(table))} cells after {seconds}s, "
                                 f"expected {n}")
            time.sleep(0.5)

    def reports(folder: Path) -> int:
        return len(list(folder.glob("batch-*.json")))

    # 1. the streaming drain at a processing-time trigger, its own read limit, entries added while it runs
    queue = QueueConfig(table=f"smoke{tag}_st", qid="s", num_buckets=4)
    ExportQueue(conn_a, queue).init()
    fill(queue, 0, ENTRIES // 2)
    table = f"smoke{tag}_stream"
    job = DrainJob(source=a, dest=b, queue=queue, dest_table=table,
                   settings=DrainSettings(translator="cells", trigger_seconds=0.5, max_entries_per_trigger=6))
    query = start_stream(spark, job, str(work / "cp1"), str(work / "r1"))
    wait_for(table, ENTRIES // 2)
    fill(queue, ENTRIES // 2, ENTRIES // 2)
    wait_for(table, ENTRIES)
    stop_stream(query)
    if query.exception() is not None:
        raise SystemExit(f"the processing-time stream failed: {query.exception()}")
    out["tables"]["stream"] = table
    out["micro_batches"]["stream"] = reports(work / "r1")

    # 2. the streaming drain, availableNow, on a backlog larger than the read limit
    queue2 = QueueConfig(table=f"smoke{tag}_an", qid="n", num_buckets=4)
    ExportQueue(conn_a, queue2).init()
    fill(queue2, 0, ENTRIES)
    table2 = f"smoke{tag}_available_now"
    job2 = DrainJob(source=a, dest=b, queue=queue2, dest_table=table2,
                    settings=DrainSettings(translator="cells", max_entries_per_trigger=6))
    query = start_stream(spark, job2, str(work / "cp2"), str(work / "r2"), available_now=True)
    if not query.awaitTermination(180):
        raise SystemExit("the availableNow stream did not end within 180 s")
    if query.exception() is not None:
        raise SystemExit(f"the availableNow stream failed: {query.exception()}")
    left = count_entries(conn_a, queue2)
    if left:
        raise SystemExit(f"the availableNow stream left {left} entries in the queue")
    out["tables"]["available_now"] = table2
    out["micro_batches"]["available_now"] = reports(work / "r2")

    # 3. the streaming sink: the export-queue source into the accumulo-export sink, availableNow
    queue3 = QueueConfig(table=f"smoke{tag}_sk", qid="k", num_buckets=4)
    ExportQueue(conn_a, queue3).init()
    fill(queue3, 0, ENTRIES)
    table3 = f"smoke{tag}_sink"
    job3 = DrainJob(source=a, dest=b, queue=queue3, dest_table=table3, settings=DrainSettings(translator="cells"))
    query = (spark.readStream.format("export-queue").options(**job3.source_options())
             .option("available_now", "true")  # Spark 4.0/4.1 run availableNow as one micro-batch: read it all
             .load().writeStream.format("accumulo-export").options(**job3.export_options(str(work / "r3")))
             .option("checkpointLocation", str(work / "cp3")).trigger(availableNow=True).start())
    if not query.awaitTermination(180):
        raise SystemExit("the sink's availableNow stream did not end within 180 s")
    if query.exception() is not None:
        raise SystemExit(f"the sink's stream failed: {query.exception()}")
    left = count_entries(conn_a, queue3)
    if left:
        raise SystemExit(f"the sink's stream left {left} entries in the queue")
    out["tables"]["sink"] = table3
    out["micro_batches"]["sink"] = reports(work / "r3")

    # 4. the read source on what the sink wrote
    read = spark.read.format("accumulo").options(**b.to_options(""), table=table3).load()
    got = sorted((bytes(r.row), bytes(r.cf), bytes(r.cq), bytes(r.value)) for r in read.collect())
    scanned = sorted((c.row, c.cf, c.cq, c.value) for c in conn_b.scan(table3))
    if got != scanned or len(got) != ENTRIES:
        raise SystemExit(f"the accumulo source read {len(got)} cells, B's scan {len(scanned)}, expected {ENTRIES}")
    out["read_cells"] = len(got)
    if not compat.FILTER_PUSHDOWN:
        try:
            spark.read.format("accumulo").options(**b.to_options(""), table=table3, pushdown="true").load()
        except Exception as exc:  # noqa: BLE001 - Spark wraps the source's error: its line must be in there
            line = next((ln for ln in str(exc).splitlines() if "needs Spark 4.1 or newer" in ln), None)
            if line is None:
                raise SystemExit(f"pushdown on PySpark {compat.summary()['pyspark']} failed unclearly: {exc}") from None
            out["pushdown_refused"] = line.strip()
        else:
            raise SystemExit("pushdown was accepted on a Spark without filter pushdown")
    spark.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))), flush=True)
