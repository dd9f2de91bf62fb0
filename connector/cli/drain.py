"""``accumulo-export drain``: export a queue into a destination table, in batch or as a stream, in this
process or with Spark. Everything a user can get wrong is checked before Spark starts."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from connector.accumulo import AccumuloError
from connector.clusters_config import cluster
from connector.export.translators import DEFAULT_TRANSLATOR
from connector.jobs import LOCAL_DRAIN_MAX_ENTRIES, DrainError, DrainJob, DrainReport, Engine, LocalEngine, run_drain
from connector.jobs.drain import preflight
from connector.queue import DrainSettings, count_entries
from connector.queue.progress import other_drains
from connector.queue.stored_config import read_translator

from .common import EXIT_DEAD_LETTERS, Terminated, UsageError, spark_output
from .drain_stream import stream_locally, stream_with_spark
from .options import Help, check_namespace, check_table_name, port_number, queue_args
from .progress import DrainProgressView
from .queue import stored_config

if TYPE_CHECKING:  # Spark loads only when a drain runs with it: local drains start faster without it
    from pyspark.sql import SparkSession


def register_drain_command(sub: Any) -> None:
    """Add the ``drain`` command to the ``accumulo-export`` parser's subcommands: the queue's flags, the
    destination, the engine and every :class:`~connector.queue.DrainSettings` setting."""
    d = sub.add_parser("drain", formatter_class=Help, help="export the queue into a destination table with Spark",
                       description="Export the queue's entries into a table on the destination cluster (created "
                                   "when missing), each cell at timestamp = seq, and delete each entry after "
                                   "its export is durable. Batch mode runs until the queue is empty; --stream "
                                   "runs until Ctrl-C.")
    queue_args(d, "--source")
    d.add_argument("--dest", required=True, help="destination cluster name from the config file")
    d.add_argument("--dest-table", required=True, help="destination table (created when missing)")
    d.add_argument("--allow-dead-letters", action="store_true",
                   help=f"exit 0 even when entries were dead-lettered (else exit status {EXIT_DEAD_LETTERS})")
    d.add_argument("--stream", action="store_true", help="keep draining new entries until Ctrl-C")
    d.add_argument("--master", help="Spark master (default: SPARK_MASTER or local[2])")
    d.add_argument("--metrics-port", type=port_number, metavar="PORT",
                   help="serve Prometheus metrics (counters, queue depth, lag per bucket) on this port while the "
                        "drain runs (README: Metrics)")
    d.add_argument("--engine", choices=["auto", "spark", "local"], default="auto",
                   help="local: drain in this process without Spark (a stream then starts in about a second and "
                        "drains whole buckets per micro-batch; it needs no checkpoint: the queue's marks are its "
                        "state); auto: local for a batch drain of a small queue (Spark's start-up would "
                        "dominate) when no --master is given, else Spark")
    DrainSettings.add_arguments(d, shown_defaults={
        "translator": f"the one 'queue init --translator' stored, else {DEFAULT_TRANSLATOR}"})


def drain_settings(args: argparse.Namespace, stored_translator: str | None) -> DrainSettings:
    """The drain's settings from its flags; the translator, when not given, is the one the queue stored."""
    given = {} if args.translator or not stored_translator else {"translator": stored_translator}
    try:
        return DrainSettings.from_args(args, **given)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_drain(args: argparse.Namespace) -> int:
    started = time.monotonic()
    source, dest = cluster(args.source), cluster(args.dest)
    # everything a user can get wrong is checked here, before Spark starts (seconds) and fails in a task
    check_table_name(args.table, "--table", f"the source {source.describe()}")
    check_table_name(args.dest_table, "--dest-table", f"the destination {dest.describe()}")
    with source.connect() as conn:
        try:
            queue = stored_config(conn, args, f"the source {source.describe()}")
            settings = drain_settings(args, read_translator(conn, queue))
        except AccumuloError as exc:
            raise UsageError(f"source {source.describe()}: {exc}") from None
    try:
        with dest.connect() as conn:
            if not conn.table_exists(args.dest_table):
                check_namespace(conn, args.dest_table, "--dest-table", f"the destination {dest.describe()}")
    except AccumuloError as exc:
        raise UsageError(f"destination {dest.describe()}: {exc}") from None
    job = DrainJob(source=source, dest=dest, queue=queue, dest_table=args.dest_table, settings=settings)
    preflight(job)
    from .metrics import drain_metrics

    metrics = drain_metrics(args.metrics_port, job)  # served until the command ends; a taken port fails here
    try:
        if _drain_locally(args, job):
            return _run_drain(args, job, None, started, metrics.observe)
        from connector.spark import spark_session

        with spark_output(verbose=args.verbose) as spark_log:
            master = args.master or os.environ.get("SPARK_MASTER") or "local[2]"
            print(f"starting Spark ({master}) ...", file=sys.stderr, flush=True)
            try:
                return _run_drain(args, job, spark_session(args.master, "accumulo-export drain"), started,
                                  metrics.observe)
            except DrainError as exc:
                if spark_log:
                    spark_log.keep = True
                    raise DrainError(f"{exc} (Spark's log: {spark_log.path})") from None
                raise
    finally:
        metrics.close()


def _drain_locally(args: argparse.Namespace, job: DrainJob) -> bool:
    if args.engine != "auto":
        if args.engine == "local" and args.stream:
            spark_only = [s.flag for s in DrainSettings.settings()
                          if s.name in DrainSettings.spark_only() and getattr(args, s.name, None) is not None]
            spark_only += ["--master"] if args.master else []
            if spark_only:
                raise UsageError(f"{', '.join(map(str, spark_only))} applies to Spark streams, not to --engine local")
        return bool(args.engine == "local")
    from connector.spark.session import submitted

    if args.stream or args.master or os.environ.get("SPARK_MASTER") or submitted():
        return False
    with job.source.connect() as conn:
        return count_entries(conn, job.queue, limit=LOCAL_DRAIN_MAX_ENTRIES + 1) <= LOCAL_DRAIN_MAX_ENTRIES


def _engine(spark: SparkSession | None) -> Engine:
    if spark is None:
        return LocalEngine()
    from connector.spark.engine import SparkEngine

    return SparkEngine(spark)


def _run_drain(args: argparse.Namespace, job: DrainJob, spark: SparkSession | None, started: float,
               observer: Callable[[DrainReport], None] | None = None) -> int:
    from rich.console import Console

    view = DrainProgressView(Console(stderr=True), args.stream, observer)
    others = _other_drains(job) if not args.stream else set()
    folders: list[str] = []  # temporary ones, removed after Spark stopped
    stop: KeyboardInterrupt | None = None  # how a stream was stopped: Ctrl-C or SIGTERM (Terminated)
    try:
        if not args.stream:
            report = run_drain(_engine(spark), job, view, check=False)
        elif spark is None:
            report, stop = stream_locally(args, job, view)
        else:
            report, stop = stream_with_spark(args, job, spark, view, folders)
    finally:
        view.close()
        if spark is not None:
            spark.stop()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    if observer is not None:
        observer(report)  # the last counters, which no progress report showed
    if not args.stream:
        others |= _other_drains(job, warn=not others)
    summary = {"micro_batches" if args.stream else "rounds": report.rounds, "entries": report.entries,
               "exported": report.exported, "deleted": report.deleted, "dead_lettered": report.dead_lettered,
               "seconds": round(report.seconds, 2), "entries_per_s": round(report.rate, 1),
               "remaining": report.remaining, "relayed": report.relayed,
               # the whole command, with the checks and Spark's start-up that "seconds" leaves out
               "total_seconds": round(time.monotonic() - started, 2)}
    if not args.stream:
        summary["other_drains_seen"] = len(others)
    print(json.dumps(summary))
    if isinstance(stop, KeyboardInterrupt) and not isinstance(stop, Terminated):
        return 130
    if report.dead_lettered and not args.allow_dead_letters:
        print(f"accumulo-export: {report.dead_lettered:,} entries were dead-lettered (list them with 'accumulo-export "
              f"queue dead-letters', re-queue them after a fix with --requeue); exit status {EXIT_DEAD_LETTERS} "
              "(--allow-dead-letters: 0)", file=sys.stderr)
        return EXIT_DEAD_LETTERS
    return 0  # a stream stopped by SIGTERM ends normally


def _other_drains(job: DrainJob, warn: bool = True) -> set[str]:
    """Other batch drains of the queue running now (their live progress rows), with a warning when there are."""
    with job.source.connect() as conn:
        runs = other_drains(conn, job.queue)
    if runs and warn:
        print(f"accumulo-export: warning: another drain of queue {job.queue.qid!r} is running; concurrent drains "
              "are safe but repeat work (entries read by both are exported by both, so the summaries together "
              "count more exports than there were entries)", file=sys.stderr, flush=True)
    return runs

