"""The drain with Spark: batch rounds on the Spark engine, and the streaming drain as a structured streaming
query.

Batch mode is :func:`connector.jobs.run_drain` with each round one Spark job (one task per group of non-empty
buckets, each draining its buckets itself: see :mod:`connector.spark.engine`). Streaming mode runs a structured
streaming query at a trigger interval (or AvailableNow) over the ``export-queue-drain`` source, whose tasks
likewise drain the buckets each micro-batch planned and yield counters (:mod:`connector.spark.drain_source`);
its checkpoint and read limits are Spark's.

What a stream did reaches its starter three ways, all folded by :class:`StreamCounters`: each micro-batch's
report (``batch-*.json`` in ``report_dir``, written by ``foreachBatch`` once the micro-batch is done), what the
planner's relay moved (``relay-*.json`` there), and, while a micro-batch runs, its tasks' progress rows (with a
``progress_id``), which count until that micro-batch's report arrives and are then removed.
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from connector.accumulo import AccumuloError, Connection
from connector.jobs import DrainError, DrainJob, DrainReport, LocalEngine, run_drain
from connector.jobs.drain import preflight
from connector.jobs.drain_report import ProgressFn
from connector.jobs.stats import stats_ddl, stats_from_row, stats_schema
from connector.queue import DrainStats
from connector.queue.compaction import QueueCompactor
from connector.queue.progress import clear_progress, read_progress_runs

from .compat import ADMISSION_CONTROL
from .drain_source import MICRO_BATCH, RELAY_REPORT_PREFIX, stream_run_id
from .engine import SparkEngine
from .export_sink import write_report
from .session import is_connect

log = logging.getLogger(__name__)

#: one row of a drain task's counters (the ``export-queue-drain`` source's rows add ``micro_batch``)
STATS_SCHEMA = stats_schema(DrainStats)
STATS_DDL = stats_ddl(DrainStats)


def run_batch(spark: SparkSession | None, job: DrainJob, progress: ProgressFn | None = None,
              max_rounds: int = 1000, *, check: bool = True, progress_seconds: float = 2.0) -> DrainReport:
    """Drain what the queue holds when it starts (a cut: see :func:`connector.jobs.run_drain`), each round a
    Spark job on ``spark`` (None: in this process, on threads)."""
    engine = LocalEngine() if spark is None else SparkEngine(spark)
    return run_drain(engine, job, progress, max_rounds, check=check, progress_seconds=progress_seconds)


def start_stream(spark: SparkSession, job: DrainJob, checkpoint: str, report_dir: str,
                 available_now: bool = False, *, check: bool = True, progress_id: str | None = None) -> StreamingQuery:
    """Start the streaming drain; the caller awaits or stops the returned query. Its trigger interval, read
    limits and sweep are the job's settings (a read limit makes a backlog drain in bounded micro-batches);
    ``available_now`` drains what is there now and stops (on Spark before 4.2, whose fallback is one micro-batch,
    in one micro-batch without read limits). ``report_dir`` receives each micro-batch's counters
    and what the relay moved; with ``progress_id`` the tasks also keep progress rows, which the caller folds
    and removes with a :class:`StreamCounters` of the same id."""
    if check:
        job = preflight(job)
    warm_python_workers(spark, job)
    options = job.sink_options(report_dir)
    if progress_id is not None:
        options["progress_id"] = progress_id
    if available_now and not ADMISSION_CONTROL:  # Spark before 4.2 runs it as one micro-batch: read it all
        options["available_now"] = "true"
    reader = spark.readStream.format("export-queue-drain").options(**options)
    writer = (reader.load().writeStream.foreachBatch(_BatchReporter(report_dir, job))
              .option("checkpointLocation", checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{job.settings.trigger_seconds} seconds")
    try:
        return writer.start()
    except Exception as exc:
        if is_connect(spark) and _foreach_batch_unloadable(exc):
            raise DrainError(FOREACH_BATCH_NEEDS_INSTALL) from exc
        raise


#: why the streaming drain cannot start on a Spark Connect server that has only the session's copy
FOREACH_BATCH_NEEDS_INSTALL = (
    "the streaming drain cannot run over Spark Connect without the connector installed on the server: Spark runs "
    "a stream's Python (its sources, its foreachBatch) in server processes that do not load the session's "
    "artifacts (ship_connector); install the package in the server's Python, or drain in rounds with run_batch")


def _foreach_batch_unloadable(exc: BaseException) -> bool:
    """Whether the Connect server's foreachBatch process failed to load the reporter (the connector is not
    importable there)."""
    text = str(exc)
    return "STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE" in text and (
        "ModuleNotFoundError" in text or "ImportError" in text)


#: how long a stop waits for the running micro-batch to end
STOP_WAIT_SECONDS = 30.0


def stop_stream(query: StreamingQuery, wait_seconds: float = STOP_WAIT_SECONDS) -> None:
    """Stop the stream between micro-batches: wait (up to ``wait_seconds``) until none runs, then stop it.
    A stop in the middle of one interrupts its ``foreachBatch`` call into Python, and Spark (4.x) matches the
    error that makes with a regular expression that recurses per character of the Python traceback: a long
    one overflowed the driver thread's stack (a ``StackOverflowError`` printed at the end of ``make demo``)."""
    deadline = time.monotonic() + wait_seconds
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


class _BatchReporter:
    """The streaming drain's ``foreachBatch``: runs the micro-batch (its tasks drain their buckets: see
    :mod:`connector.spark.drain_source`), writes the summed counters as the batch's report, and counts the
    entries deleted towards the next compaction of the queue's tablets (the planner, in a process of its own,
    only sees the files)."""

    def __init__(self, report_dir: str, job: DrainJob) -> None:
        self.report_dir, self.job = report_dir, job
        self.compactor = QueueCompactor(job.queue, job.settings.compact_dead_keys)

    def __getstate__(self) -> dict:
        # over Spark Connect the function is pickled to the server, which calls it in a Python process of its
        # own: the compactor (a lock, a request thread) starts afresh there
        return {"report_dir": self.report_dir, "job": self.job}

    def __setstate__(self, state: dict) -> None:
        self.report_dir, self.job = state["report_dir"], state["job"]
        self.compactor = QueueCompactor(self.job.queue, self.job.settings.compact_dead_keys)

    def __call__(self, counters: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        rows = [row.asDict() for row in counters.collect()]
        total = sum((stats_from_row(DrainStats, row) for row in rows), DrainStats())
        micro_batches = sorted({row[MICRO_BATCH] for row in rows if row.get(MICRO_BATCH) is not None})
        write_report(self.report_dir, total, batch_id, wall_seconds=time.monotonic() - started,
                     micro_batches=micro_batches)
        if total.deleted and self.compactor.dead_keys:
            try:
                self.compactor.deleted(self.job.source.shared(), total.deleted)
            except Exception as exc:  # noqa: BLE001 - the micro-batch is done: a compaction never fails it
                log.warning("queue %s: no compaction asked for: %s", self.job.queue.qid, exc)


def warm_python_workers(spark: SparkSession, job: DrainJob) -> None:
    """Start the Python workers a streaming drain's tasks will run in, load the connector there and open the
    drain's connections (workers, and what they opened, are reused), so that the first micro-batches of a
    stream do not pay for it: that start-up was the latency tail of a fresh stream. The warm-up is a read of
    a data source (``export-queue-warm-up``), not a ``mapInArrow``: Spark keeps the workers of data-source
    reads apart from those of other Python steps."""
    parallelism = max(1, default_parallelism(spark))
    (spark.read.format("export-queue-warm-up").options(**job.sink_options(""))
     .option("partitions", str(parallelism)).load().collect())


def default_parallelism(spark: SparkSession) -> int:
    """Spark's default parallelism (the tasks it runs at once): from the SparkContext, or, over Spark Connect
    (no SparkContext in this process), as the partitions Spark gives a ``range`` by default (one small job)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    from pyspark.sql import functions as F  # noqa: N812

    last = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()
    return 1 if last is None or last[0] is None else int(last[0]) + 1


def collect_stream_reports(report_dir: str, report: DrainReport) -> set[int]:
    """Fold the reports the stream wrote into ``report`` (and remove them): each micro-batch's counters, and
    the outbox cells the planner's relay moved (``report.relayed``). Returns the micro-batches (the planner's
    numbers) whose reports were folded."""
    done: set[int] = set()
    for path in sorted(glob.glob(os.path.join(report_dir, "*.json"))):
        with open(path) as f:
            written = json.load(f)
        os.remove(path)
        if os.path.basename(path).startswith(RELAY_REPORT_PREFIX):
            report.relayed += int(written.get("relayed", 0))
            continue
        report.totals += stats_from_row(DrainStats, written)
        report.rounds += 1
        report.batch_seconds.append(written.get("wall_seconds") or 0.0)
        done.update(int(n) for n in written.get("micro_batches") or ())
    return done


class StreamCounters:
    """Folds what a Spark stream (started with ``report_dir`` and ``progress_id``) did into a ``DrainReport``:
    the reports of finished micro-batches and the relay into ``report.totals``, ``rounds`` and ``relayed``, and
    the progress rows of the micro-batch still running into ``report.live``, so a long micro-batch is counted
    while it runs. A micro-batch counts through its rows until its report is folded, then through the report
    only (its rows are removed): nothing is counted twice."""

    #: folded micro-batches remembered (a stream runs them one at a time; their rows are removed at once)
    REMEMBERED = 4096

    def __init__(self, job: DrainJob, report_dir: str, progress_id: str | None) -> None:
        self.job, self.report_dir, self.progress_id = job, report_dir, progress_id
        self._done: set[int] = set()

    def collect(self, conn: Connection | None, report: DrainReport) -> None:
        """Fold what arrived since the last call. The rows are read before the reports: a report that arrives
        in between then replaces its micro-batch's rows, never adds to them. The rows are best effort (without
        ``conn``, or when A does not answer, ``report.live`` keeps its last value); the reports are not."""
        runs = None
        if self.progress_id is not None and conn is not None:
            try:
                runs = read_progress_runs(conn, self.job.queue, f"{self.progress_id}.")
            except AccumuloError as exc:
                log.debug("progress rows of stream %s unreadable: %s", self.progress_id, exc)
        done = collect_stream_reports(self.report_dir, report)
        self._done |= done
        if len(self._done) > self.REMEMBERED:
            self._done = set(sorted(self._done)[-self.REMEMBERED // 2:])
        if self.progress_id is None:
            return
        if conn is not None:
            for micro_batch in sorted(done):
                with contextlib.suppress(AccumuloError):  # left rows only hold counters; close() tries again
                    clear_progress(conn, self.job.queue, stream_run_id(self.progress_id, micro_batch))
        if runs is not None:
            report.live = sum((stats for run, stats in runs.items() if _micro_batch_of(run) not in self._done),
                              DrainStats())
        elif done:  # unread rows: at least what was folded must leave the live counts
            report.live = DrainStats()

    def close(self, conn: Connection) -> None:
        """Remove every progress row of the stream (it stopped; the last :meth:`collect` counted them)."""
        if self.progress_id is not None:
            clear_progress(conn, self.job.queue, f"{self.progress_id}.", prefix=True)


def _micro_batch_of(run: str) -> int | None:
    try:
        return int(run.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        return None
