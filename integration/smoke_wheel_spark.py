"""Run by ``integration/smoke_wheel.py`` with a smoke virtualenv's Python (the installed wheel, not this tree):
the Spark paths whose Spark-version fallbacks ``connector/spark/compat.py`` chooses, in one ``local[2]``
session against the clusters ``A`` and ``B`` of ``ACCUMULO_EXPORT_CONFIG``:

1. the streaming drain (``export-queue-drain``) with ``availableNow`` and a read limit of 6 entries (one
   micro-batch before Spark 4.2, several from 4.2 on);
2. the streaming sink: ``export-queue`` read as a stream into the ``accumulo-export`` sink (drain mode) at a
   processing-time trigger with a read limit of 8 entries, so in several micro-batches (the reader plans each
   from the last, without Spark's start offset before 4.2), stopped between micro-batches;
3. the read source: ``accumulo`` on B's table of step 2; where Spark lacks safe filter pushdown (before 5.0) the
   option ``pushdown`` is refused in one line.

Usage: ``python smoke_wheel_spark.py TAG WORKDIR``. Prints one JSON line: the tables written on B (the caller
checks their cells there), the micro-batches each stream ran, the PySpark and what compat found, each step's seconds.
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
    started = [time.monotonic()]
    spark = spark_session("local[2]", f"smoke{tag}")
    out: dict = {"compat": compat.summary(), "tables": {}, "micro_batches": {}, "seconds": {}}

    def lap(name: str) -> None:
        now = time.monotonic()
        out["seconds"][name] = round(now - started[0], 1)
        started[0] = now

    lap("spark_session")

    def fill(queue: QueueConfig, first: int, n: int) -> None:
        with ExportQueue(conn_a, queue) as q:
            for i in range(first, first + n):
                q.add(f"k{i}", cell(i), seq=i + 1)

    def filled_job(queue_table: str, qid: str, dest_table: str, read_limit: int) -> DrainJob:
        """A new queue of ENTRIES cells and the job draining it into ``dest_table``, ``read_limit`` per
        micro-batch."""
        queue = QueueConfig(table=queue_table, qid=qid, num_buckets=4)
        ExportQueue(conn_a, queue).init()
        fill(queue, 0, ENTRIES)
        return DrainJob(source=a, dest=b, queue=queue, dest_table=dest_table,
                        settings=DrainSettings(translator="cells", max_entries_per_trigger=read_limit,
                                               create_dest_table=True))

    def count(table: str) -> int:
        return sum(1 for _ in conn_b.scan(table)) if conn_b.table_exists(table) else 0

    def wait_for(table: str, n: int, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while count(table) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"{table} on B has {count(table)} cells after {seconds}s, expected {n}")
            time.sleep(0.2)

    def reports(folder: Path) -> int:
        return len(list(folder.glob("batch-*.json")))

    # 1. the streaming drain, availableNow, on a backlog larger than its read limit (6 entries)
    table = f"smoke{tag}_available_now"
    job = filled_job(f"smoke{tag}_an", "n", table, 6)
    queue = job.queue
    query = start_stream(spark, job, str(work / "cp1"), str(work / "r1"), available_now=True)
    if not query.awaitTermination(180):
        raise SystemExit("the availableNow stream did not end within 180 s")
    if query.exception() is not None:
        raise SystemExit(f"the availableNow stream failed: {query.exception()}")
    left = count_entries(conn_a, queue)
    if left:
        raise SystemExit(f"the availableNow stream left {left} entries in the queue")
    out["tables"]["available_now"] = table
    out["micro_batches"]["available_now"] = reports(work / "r1")
    lap("available_now")

    # 2. the streaming sink: the export-queue source into the accumulo-export sink (drain mode) at a
    # processing-time trigger with a read limit of 8 entries (2 per bucket: several micro-batches), then stopped
    table2 = f"smoke{tag}_sink"
    job2 = filled_job(f"smoke{tag}_sk", "k", table2, 8)
    query = (spark.readStream.format("export-queue").options(**job2.source_options()).load()
             .writeStream.format("accumulo-export").options(**job2.export_options(str(work / "r2")))
             .option("checkpointLocation", str(work / "cp2")).trigger(processingTime="0.5 seconds").start())
    wait_for(table2, ENTRIES)
    stop_stream(query)
    if query.exception() is not None:
        raise SystemExit(f"the sink's stream failed: {query.exception()}")
    out["tables"]["sink"] = table2
    out["micro_batches"]["sink"] = reports(work / "r2")
    lap("sink")

    # 3. the read source on what the sink wrote
    read = spark.read.format("accumulo").options(**b.to_options(""), table=table2).load()
    got = sorted((bytes(r.row), bytes(r.cf), bytes(r.cq), bytes(r.value)) for r in read.collect())
    scanned = sorted((c.row, c.cf, c.cq, c.value) for c in conn_b.scan(table2))
    if got != scanned or len(got) != ENTRIES:
        raise SystemExit(f"the accumulo source read {len(got)} cells, B's scan {len(scanned)}, expected {ENTRIES}")
    out["read_cells"] = len(got)
    lap("read")
    if not compat.FILTER_PUSHDOWN:
        try:
            spark.read.format("accumulo").options(**b.to_options(""), table=table2, pushdown="true").load()
        except Exception as exc:  # noqa: BLE001 - Spark wraps the source's error: its line must be in there
            needs = f"needs Spark {compat.NEEDS['filter_pushdown']} or newer"
            line = next((ln for ln in str(exc).splitlines() if needs in ln), None)
            if line is None:
                raise SystemExit(f"pushdown on PySpark {compat.summary()['pyspark']} failed unclearly: {exc}") from None
            out["pushdown_refused"] = line.strip()
        else:
            raise SystemExit("pushdown was accepted on a Spark without filter pushdown")
    spark.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))), flush=True)
