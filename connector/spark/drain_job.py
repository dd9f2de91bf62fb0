"""The drain with Spark: batch rounds on the Spark engine, and the streaming drain as a structured streaming
query.

Batch mode is :func:`connector.jobs.run_drain` with each round one Spark job (one task per group of non-empty
buckets, each draining its buckets itself: see :mod:`connector.spark.engine`). Streaming mode runs a structured
streaming query at a trigger interval (or AvailableNow) over the ``export-queue-drain`` source, whose tasks
likewise drain the buckets each micro-batch planned and yield counters (:mod:`connector.spark.drain_source`);
its checkpoint and read limits are Spark's.
"""

from __future__ import annotations

import glob
import json
import os
import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from connector.jobs import DrainJob, DrainReport, LocalEngine, run_drain
from connector.jobs.drain import preflight
from connector.jobs.drain_report import ProgressFn
from connector.jobs.stats import stats_ddl, stats_from_row, stats_schema
from connector.queue import DrainStats

from .engine import SparkEngine
from .export_sink import write_report

#: one row of a drain task's counters (the ``export-queue-drain`` source's schema)
STATS_SCHEMA = stats_schema(DrainStats)
STATS_DDL = stats_ddl(DrainStats)


def run_batch(spark: SparkSession | None, job: DrainJob, progress: ProgressFn | None = None,
              max_rounds: int = 1000, *, check: bool = True, progress_seconds: float = 2.0) -> DrainReport:
    """Drain until the queue is empty, each round a Spark job on ``spark`` (None: in this process, on
    threads); see :func:`connector.jobs.run_drain`."""
    engine = LocalEngine() if spark is None else SparkEngine(spark)
    return run_drain(engine, job, progress, max_rounds, check=check, progress_seconds=progress_seconds)


def start_stream(spark: SparkSession, job: DrainJob, checkpoint: str, report_dir: str,
                 available_now: bool = False, *, check: bool = True) -> StreamingQuery:
    """Start the streaming drain; the caller awaits or stops the returned query. Its trigger interval, read
    limits and sweep are the job's settings (a read limit makes a backlog drain in bounded micro-batches);
    ``available_now`` drains what is there now and stops."""
    if check:
        preflight(job)
    warm_python_workers(spark, job)
    reader = spark.readStream.format("export-queue-drain").options(**job.sink_options(report_dir))
    writer = (reader.load().writeStream.foreachBatch(_BatchReporter(report_dir))
              .option("checkpointLocation", checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{job.settings.trigger_seconds} seconds")
    return writer.start()


@dataclass(frozen=True)
class _BatchReporter:
    """The streaming drain's ``foreachBatch``: runs the micro-batch (its tasks drain their buckets: see
    :mod:`connector.spark.drain_source`) and writes the summed counters as the batch's report."""

    report_dir: str

    def __call__(self, counters: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        total = sum((DrainStats(**row.asDict()) for row in counters.collect()), DrainStats())
        write_report(self.report_dir, total, batch_id, wall_seconds=time.monotonic() - started)


def warm_python_workers(spark: SparkSession, job: DrainJob) -> None:
    """Start the Python workers a streaming drain's tasks will run in, load the connector there and open the
    drain's connections (workers, and what they opened, are reused), so that the first micro-batches of a
    stream do not pay for it: that start-up was the latency tail of a fresh stream. The warm-up is a read of
    a data source (``export-queue-warm-up``), not a ``mapInArrow``: Spark keeps the workers of data-source
    reads apart from those of other Python steps."""
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    (spark.read.format("export-queue-warm-up").options(**job.sink_options(""))
     .option("partitions", str(parallelism)).load().collect())


def collect_stream_reports(report_dir: str, report: DrainReport) -> None:
    """Fold the per-batch reports the stream's commits wrote into ``report``."""
    for path in sorted(glob.glob(os.path.join(report_dir, "*.json"))):
        with open(path) as f:
            written = json.load(f)
        os.remove(path)
        report.totals += stats_from_row(DrainStats, written)
        report.rounds += 1
        report.batch_seconds.append(written.get("wall_seconds") or 0.0)
