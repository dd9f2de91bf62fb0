"""``accumulo-export drain``: export a queue into a destination table, in batch or as a stream, in this
process or with Spark. Everything a user can get wrong is checked before Spark starts."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from connector.accumulo.options import GatewayOptions
from connector.clusters_config import cluster
from connector.jobs import LOCAL_DRAIN_MAX_ENTRIES, DrainJob, DrainReport, Engine, run_drain
from connector.jobs.drain import preflight
from connector.queue import DrainSettings, count_entries
from connector.queue.progress import other_drains
from connector.queue.settings import DEFAULT_SERVER_WAIT

from .common import EXIT_DEAD_LETTERS, EXIT_INTERRUPTED, Terminated, UsageError
from .drain_stream import stream_locally, stream_with_spark
from .engine import EngineChoice
from .options import Help, check_table_name, source_and_destination_args
from .progress import DrainProgressView
from .queue import source_queue

if TYPE_CHECKING:  # Spark loads only when a drain runs with it: local drains start faster without it
    from pyspark.sql import SparkSession


def register_drain_command(sub: Any) -> None:
    """Add the ``drain`` command to the ``accumulo-export`` parser's subcommands: the queue's flags, the
    destination, the engine and every :class:`~connector.queue.DrainSettings` setting."""
    d = sub.add_parser("drain", formatter_class=Help, help="export the queue into a destination table with Spark",
                       description="Export the queue's entries into a table on the destination cluster (which must "
                                   "exist, unless --create-dest-table), each cell at timestamp = seq, and delete "
                                   "each entry after its export is durable. Batch mode drains what the queue "
                                   "holds when it starts, then stops (entries queued meanwhile are left for the "
                                   "next run: the summary's 'remaining'); --stream runs until Ctrl-C.")
    source_and_destination_args(d)
    d.add_argument("--allow-dead-letters", action="store_true",
                   help=f"exit 0 even when entries were dead-lettered (else exit status {EXIT_DEAD_LETTERS})")
    d.add_argument("--stream", action="store_true", help="keep draining new entries until Ctrl-C")
    EngineChoice.add_arguments(d)
    GatewayOptions.add_arguments(d, shown_defaults={
        "server_wait": f"the cluster's server_wait, else {DEFAULT_SERVER_WAIT:g}"})
    DrainSettings.add_arguments(d)


def drain_settings(args: argparse.Namespace) -> DrainSettings:
    """The drain's settings from its flags (the translator, when not given, is settled by the preflight: the one
    the queue stored, else the default)."""
    try:
        return DrainSettings.from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_drain(args: argparse.Namespace) -> int:
    started = time.monotonic()
    choice = EngineChoice.from_args(args)
    source, dest = _with_server_wait(cluster(args.source), args), _with_server_wait(cluster(args.dest), args)
    # everything a user can get wrong is checked here, before Spark starts (seconds) and fails in a task
    check_table_name(args.table, "--table", f"the source {source.describe()}")
    check_table_name(args.dest_table, "--dest-table", f"the destination {dest.describe()}")
    settings = drain_settings(args)
    if args.stream and choice.engine == "local":
        spark_only = [s.flag for s in DrainSettings.settings()
                      if s.name in DrainSettings.spark_only() and getattr(args, s.name, None) is not None]
        if spark_only:
            raise UsageError(f"{', '.join(map(str, spark_only))} applies to Spark streams, not to --engine local")
    queue = source_queue(source, dest, args, settings.create_dest_table)
    job = preflight(DrainJob(source=source, dest=dest, queue=queue, dest_table=args.dest_table, settings=settings))
    from .metrics import drain_metrics

    metrics = drain_metrics(choice.metrics_port, job)  # served until the command ends; a taken port fails here
    folders: list[str] = []  # a Spark stream's temporary ones, removed after Spark stopped
    try:
        local = choice.local(stream=args.stream, small=lambda: _small(job))
        with choice.running(local, "accumulo-export drain", args.verbose) as (engine, spark):
            return _run_drain(args, job, engine, spark, folders, started, metrics.observe)
    finally:
        metrics.close()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def _with_server_wait(gateway: GatewayOptions, args: argparse.Namespace) -> GatewayOptions:
    """The cluster's gateway, with the ``--server-wait`` given (else the cluster's own, else the drain's)."""
    return gateway if args.server_wait is None else replace(gateway, server_wait=args.server_wait)


def _small(job: DrainJob) -> bool:
    """Whether the queue holds few enough entries that Spark's start-up would dominate their drain."""
    with job.source.connect() as conn:
        return count_entries(conn, job.queue, limit=LOCAL_DRAIN_MAX_ENTRIES + 1) <= LOCAL_DRAIN_MAX_ENTRIES


def _run_drain(args: argparse.Namespace, job: DrainJob, engine: Engine, spark: SparkSession | None,
               folders: list[str], started: float, observer: Callable[[DrainReport], None] | None = None) -> int:
    from rich.console import Console

    view = DrainProgressView(Console(stderr=True), args.stream, observer)
    others = _other_drains(job) if not args.stream else set()
    stop: KeyboardInterrupt | None = None  # how a stream was stopped: Ctrl-C or SIGTERM (Terminated)
    try:
        if not args.stream:
            report = run_drain(engine, job, view, check=False)
        elif spark is None:
            report, stop = stream_locally(args, job, view)
        else:
            report, stop = stream_with_spark(args, job, spark, view, folders)
    finally:
        view.close()
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
    if not args.stream and report.remaining:
        print(f"accumulo-export: drained what the queue held when the drain started; {report.remaining:,} entries "
              "queued since are left for the next run", file=sys.stderr)
    if isinstance(stop, KeyboardInterrupt) and not isinstance(stop, Terminated):
        return EXIT_INTERRUPTED
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

