"""Supervising a streaming drain from the command line: it runs until Ctrl-C or SIGTERM, which end it after
the running micro-batch (a stream stopped so ends normally), with progress every ``PROGRESS_SECONDS``. A Spark
stream's counters include the micro-batch still running (its tasks' progress rows) and what the planner's
relay moved (:class:`connector.spark.drain_job.StreamCounters`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from typing import TYPE_CHECKING

from connector.jobs import DrainJob, DrainReport, LocalEngine, stream_drain
from connector.queue import count_entries
from connector.snapshot.auto_purge import BackgroundPurge

from .common import Terminated, sigterm_as_event
from .metrics import Metrics, PurgeMetrics
from .progress import PROGRESS_COUNT_LIMIT, PROGRESS_SECONDS, DrainProgressView


def background_purge(job: DrainJob, view: DrainProgressView) -> BackgroundPurge:
    """The stream's purger of its destinations' tombstones (every ``--purge-every`` seconds; 0: none), started,
    its metrics served with the stream's (the view's observer is the stream's ``Metrics.observe``)."""
    purge = BackgroundPurge(job.source, job.queue, job.dest, job.dest_table, period=job.settings.purge_every)
    metrics = getattr(view.observer, "__self__", None)
    if isinstance(metrics, Metrics) and purge.period > 0:
        metrics.registry.register(PurgeMetrics(purge))
    return purge.start()


if TYPE_CHECKING:  # Spark loads only when a Spark stream runs
    from pyspark.sql import SparkSession


def stream_with_spark(args: argparse.Namespace, job: DrainJob, spark: SparkSession, view: DrainProgressView,
                      folders: list[str]) -> tuple[DrainReport, KeyboardInterrupt | None]:
    """The Spark stream (a structured streaming query) until Ctrl-C or SIGTERM; the report, and what stopped
    it. The temporary folders it makes are added to ``folders``, for the caller to remove after Spark stops."""
    from connector.accumulo import AccumuloError
    from connector.spark.drain_job import StreamCounters, start_stream, stop_stream
    from connector.spark.engine import task_error

    report_dir = tempfile.mkdtemp(prefix="drain-stream-")
    folders.append(report_dir)
    checkpoint = job.settings.checkpoint
    if not checkpoint:
        checkpoint = tempfile.mkdtemp(prefix="drain-checkpoint-")
        folders.append(checkpoint)
    stop: KeyboardInterrupt | None = None  # how the stream was stopped: Ctrl-C or SIGTERM (Terminated)
    report = DrainReport()
    # the tasks keep progress rows under this id (one per stream run), which the counters fold and remove
    counters = StreamCounters(job, report_dir, uuid.uuid4().hex)
    purge = background_purge(job, view)
    with sigterm_as_event() as terminated:  # from the start: a SIGTERM while the query starts stops it once started
        query = start_stream(spark, job, checkpoint, report_dir, check=False, progress_id=counters.progress_id)
        stream_started = time.monotonic()
        kept = f" (checkpoint {checkpoint})" if job.settings.checkpoint else ""
        print(f"streaming drain started{kept}; Ctrl-C or SIGTERM stops it", file=sys.stderr, flush=True)
        try:
            with job.source.connect() as conn:
                while query.isActive and not terminated.is_set():
                    query.awaitTermination(PROGRESS_SECONDS)
                    counters.collect(conn, report)
                    report.seconds = time.monotonic() - stream_started
                    view(report, count_entries(conn, job.queue, limit=PROGRESS_COUNT_LIMIT))
            if terminated.is_set():
                raise Terminated()
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
            stop = exc
            print("stopping after the running micro-batch ...", file=sys.stderr, flush=True)
            stop_stream(query)
        finally:
            purge.stop()
    # the last reports; a micro-batch the stop cut short counts through its rows (its work was done)
    try:
        with job.source.connect() as conn:
            counters.collect(conn, report)
            counters.close(conn)
    except AccumuloError:  # A does not answer: the reports still count (the rows only hold counters)
        counters.collect(None, report)
    failure = None if stop else query.exception()
    if failure is not None:
        raise task_error(failure) or RuntimeError(str(failure))
    return report, stop


def stream_locally(args: argparse.Namespace, job: DrainJob,
                   view: DrainProgressView) -> tuple[DrainReport, KeyboardInterrupt | None]:
    """The in-process stream until Ctrl-C or SIGTERM (which end it after the running micro-batch); the report,
    and what stopped it."""
    stop, done = threading.Event(), threading.Event()
    holder: dict[str, DrainReport] = {}
    failure: list[BaseException] = []
    last_view = [0.0]

    def progress(report: DrainReport) -> None:
        if view.observer is not None:  # metrics see every micro-batch; the lines below are throttled
            view.observer(report)
        if time.monotonic() - last_view[0] >= PROGRESS_SECONDS:
            last_view[0] = time.monotonic()
            with job.source.connect() as conn:
                view(report, count_entries(conn, job.queue, limit=PROGRESS_COUNT_LIMIT))

    def run() -> None:
        try:
            holder["report"] = stream_drain(LocalEngine(), job, progress, stop=stop, check=False)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
            failure.append(exc)
        finally:
            done.set()

    # the stream runs in a thread so that Ctrl-C in the main thread ends it between micro-batches (an Event,
    # not Thread.join: a join interrupted by Ctrl-C may later return before the thread ends)
    threading.Thread(target=run, name="local-stream", daemon=True).start()
    purge = background_purge(job, view)
    print("streaming drain started (in this process); Ctrl-C or SIGTERM stops it", file=sys.stderr, flush=True)
    interrupted: KeyboardInterrupt | None = None
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        interrupted = exc
        print("stopping after the running micro-batch ...", file=sys.stderr, flush=True)
        stop.set()
        done.wait()
    finally:
        purge.stop()
    if failure:
        raise failure[0]
    return holder["report"], interrupted

