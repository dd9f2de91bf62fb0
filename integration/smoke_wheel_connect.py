"""Run by ``integration/smoke_wheel.py`` with a smoke virtualenv's Python (the installed wheel, not this tree), as
a Spark Connect client of a server of that virtualenv's PySpark whose Python workers find no connector: the
client ships its own copy (``ship_connector``), drains a queue of 20 cells in rounds (``run_batch``) through it,
and asks for the streaming drain, which must be refused in one line (a stream's Python runs in server
processes that load no artifact).

Usage: ``python smoke_wheel_connect.py TAG WORKDIR sc://HOST:PORT``. Prints one JSON line: the table written on B
(the caller checks its cells), the entries the batch drain exported, the refusal's text (None if the stream
started), each step's seconds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from connector import DrainJob, DrainSettings, ExportQueue, QueueConfig, cluster
from connector.spark import DrainError, run_batch, ship_connector, start_stream
from connector.spark.drain_job import stop_stream

ENTRIES = 20


def main(tag: str, work: Path, url: str) -> dict:
    started = [time.monotonic()]
    out: dict = {"seconds": {}}

    def lap(name: str) -> None:
        now = time.monotonic()
        out["seconds"][name] = round(now - started[0], 1)
        started[0] = now

    a, b = cluster("A"), cluster("B")
    queue = QueueConfig(table=f"smoke{tag}_connect", qid="c", num_buckets=4)
    with a.connect() as conn, ExportQueue(conn, queue) as q:
        q.init()
        for i in range(ENTRIES):
            q.add(f"k{i}", {"row": f"r{i:03d}", "cf": "f", "cq": "q", "value": f"v{i}"}, seq=i + 1)
    job = DrainJob(source=a, dest=b, queue=queue, dest_table=f"smoke{tag}_connect_d",
                   settings=DrainSettings(translator="cells", create_dest_table=True))
    session = SparkSession.builder.remote(url).create()
    try:
        ship_connector(session, str(work))
        lap("ship")
        out["exported"] = run_batch(session, job).exported
        out["table"] = job.dest_table
        lap("run_batch")
        try:
            query = start_stream(session, job, str(work / "connect-ckpt"), str(work / "connect-reports"),
                                 available_now=True)
        except DrainError as exc:
            out["refused"] = str(exc)
        else:
            out["refused"] = None
            stop_stream(query)
        lap("start_stream")
    finally:
        session.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3])), flush=True)
