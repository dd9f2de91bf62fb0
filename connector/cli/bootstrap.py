"""``accumulo-export bootstrap`` and ``verify``: a destination built from A's committed rows, and checked (and
repaired) against them, while producers commit and the stream drains into it
(docs/bootstrap-and-cutover.md: The procedure)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
import time
from typing import Any

from connector.accumulo import AccumuloError
from connector.clusters_config import cluster
from connector.errors import ConnectorError
from connector.jobs.bootstrap import BootstrapJob, BootstrapReport, preflight, run_bootstrap
from connector.queue.settings import DEFAULT_PURGE_EVERY_SECONDS, seconds_or_off
from connector.snapshot import BootstrapSettings, Destination, VerifyReport, snapshot_source, verify_destination
from connector.snapshot.auto_purge import BackgroundPurge
from connector.snapshot.state import BootstrapState
from connector.snapshot.verify import DEFAULT_EXAMPLES

from .common import EXIT_NOT_CLEAN, UsageError, cluster_error, exit_status_of
from .engine import EngineChoice
from .every import repeat_every
from .metrics import BootstrapProgress, Metrics, PurgeMetrics, bootstrap_metrics
from .options import Help, check_table_name, int_at_least, port_number, positive_seconds, source_and_destination_args
from .queue import source_queue
from .verify_metrics import VerifyMetrics, metrics_file_path


def _common(p: argparse.ArgumentParser) -> None:
    source_and_destination_args(p)
    p.add_argument("--producer-table", required=True,
                   help="the table on A whose rows the destination derives from (row transactions' table, or a "
                        "combine queue's)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def register_bootstrap_commands(sub: Any) -> None:
    """Add ``bootstrap`` and ``verify`` to the ``accumulo-export`` parser's subcommands."""
    b = sub.add_parser("bootstrap", formatter_class=Help, help="build a destination table from A's committed rows",
                       description="Write what every row of the producer table implies into the destination, "
                                   "each cell at the row's version, resumably; then wait for the queue's older "
                                   "entries to be drained and verify and repair the destination. Start the "
                                   "stream into the destination first "
                                   "(docs/bootstrap-and-cutover.md: The procedure).")
    _common(b)
    BootstrapSettings.add_arguments(b)
    b.add_argument("--no-final-check", action="store_true", help="write the snapshot only (verify later)")
    EngineChoice.add_arguments(b)
    b.add_argument("--forget", action="store_true",
                   help="forget what an unfinished bootstrap of this destination recorded (then start afresh)")
    v = sub.add_parser("verify", formatter_class=Help, help="compare a destination table with what A's rows imply",
                       description="Compare the destination with what the rows of the producer table imply, per "
                                   "tablet range (digests first, cell by cell where they differ), twice: a "
                                   "difference still there after the queue drained is reported (exit status 1); "
                                   "--repair writes the fixes so later exports still win.")
    _common(v)
    BootstrapSettings.add_arguments(v, skip={"ranges_per_task", "create_dest_table"})
    v.add_argument("--repair", action="store_true", help="write the fixes of the differences found")
    v.add_argument("--examples", type=int_at_least(0), default=DEFAULT_EXAMPLES,
                   help="example differences shown per range and kind")
    v.add_argument("--every", type=positive_seconds, metavar="SECONDS",
                   help="a standing check: verify again every SECONDS (start to start) until SIGTERM or Ctrl-C; a "
                        "run that fails is reported and the next one runs; exit status: the last run's")
    v.add_argument("--purge-every", type=seconds_or_off, default=DEFAULT_PURGE_EVERY_SECONDS, metavar="SECONDS",
                   help="with --every: purge the destination's tombstones this often, as a stream's --purge-every "
                        "does (a verify --repair makes a purge in its grace give way); 0: never "
                        f"(default: {DEFAULT_PURGE_EVERY_SECONDS:g})")
    v.add_argument("--metrics-port", type=port_number, metavar="PORT",
                   help="serve Prometheus metrics (the last complete verify's differences, repairs, duration and "
                        "end time; runs by outcome) on this port while the command runs (with --every: for good)")
    v.add_argument("--metrics-file", metavar="PATH",
                   help="write those metrics to this file after every run (node_exporter's textfile collector: "
                        "name it *.prom), carrying the last complete verify over from the file a run before wrote")


def _job(args: argparse.Namespace) -> BootstrapJob:
    source, dest = cluster(args.source), cluster(args.dest)
    check_table_name(args.producer_table, "--producer-table", f"the source {source.describe()}")
    check_table_name(args.dest_table, "--dest-table", f"the destination {dest.describe()}")
    try:
        settings = BootstrapSettings.from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if settings.snapshot is None:
        raise UsageError("--snapshot is required: module:callable (what one row implies) or combine=<cid>")
    queue = source_queue(source, dest, args, settings.create_dest_table)
    return BootstrapJob(source=source, dest=dest, queue=queue, table=args.producer_table,
                        dest_table=args.dest_table, settings=settings)


def _say(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def cmd_bootstrap(args: argparse.Namespace) -> int:
    job = _job(args)
    if args.no_final_check:
        job = dataclasses.replace(job, settings=dataclasses.replace(job.settings, final_check=False))
    if args.forget:
        with job.source.connect() as conn:
            state = BootstrapState(conn, job.queue, job.destination)
            state.acquire()
            try:
                state.clear()
            finally:
                state.release()
        _say(f"forgot the unfinished bootstrap of {job.destination}")
    choice = EngineChoice.from_args(args)
    metrics = bootstrap_metrics(choice.metrics_port, job)  # a taken port fails here, before anything runs
    watcher = _watch(job, metrics) if choice.metrics_port else None
    try:
        with choice.running(choice.local(), "accumulo-export bootstrap", args.verbose) as (engine, _):
            report = run_bootstrap(engine, job, _say)
    except AccumuloError as exc:
        raise cluster_error(exc, f"source {job.source.describe()} / destination {job.dest.describe()}") from None
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: running ranges finished or stopped unrecorded; the lease is free
        try:
            with job.source.connect() as conn:
                done = f"{len(BootstrapState(conn, job.queue, job.destination).done())} ranges"
        except AccumuloError:  # A does not answer: the stop still goes on
            done = "the recorded ranges"
        _say(f"stopped with {done} of {job.table} written; run the same command again to resume")
        raise
    finally:
        if watcher is not None:
            watcher.set()
        metrics.close()
    _print_bootstrap(report, args.json)
    return EXIT_NOT_CLEAN if report.totals.failed or (report.check is not None and not report.check.clean) else 0


def _watch(job: BootstrapJob, metrics: Metrics) -> threading.Event:
    """Feed the metrics what the bootstrap's state rows say it has written, every 2 s, until the event is set."""
    stop = threading.Event()

    def watch() -> None:
        with job.source.connect() as conn:
            state = BootstrapState(conn, job.queue, job.destination)
            while not stop.wait(2.0):
                done = state.done().values()
                metrics.observe(BootstrapProgress(len(done), sum(d.get("rows") or 0 for d in done),
                                                  sum(d.get("cells") or 0 for d in done)))

    threading.Thread(target=watch, name="bootstrap-metrics", daemon=True).start()
    return stop


def _print_bootstrap(report: BootstrapReport, as_json: bool) -> None:
    t = report.totals
    summary: dict[str, Any] = {"ranges": report.ranges, "resumed_ranges": report.resumed, "rows": t.rows,
                               "exports": t.exports, "cells": t.cells, "failed": t.failed,
                               "outbox_relayed": report.relayed, "seconds": round(report.seconds, 2)}
    if report.check is not None:
        c = report.check
        summary["final_check"] = {"differences": c.differences, "repaired": c.repaired, "unrepaired": c.unrepaired,
                                  "unrepairable_ranges": c.unrepairable, "failed_rows": c.failed_rows,
                                  "in_flight": c.in_flight}
    if t.errors:
        summary["errors"] = t.errors
    if as_json:
        print(json.dumps(summary))
        return
    print(f"bootstrap: {t.rows:,} rows, {t.cells:,} cells written in {report.seconds:.1f} s "
          f"({report.resumed} of {report.ranges} ranges done by an earlier run)")
    if report.check is not None:
        c = report.check
        print(f"final check: {c.differences} differences found, {c.repaired} repaired; {c.in_flight} were in "
              "flight (exported meanwhile)" + (f"; {c.unrepaired} do not show their fix (verify again)"
                                              if c.unrepaired else "")
              + (f"; {c.unrepairable} ranges left untouched because {c.failed_rows} rows failed"
                 if c.unrepairable else ""))
    for error in t.errors:
        print(f"  failed: {error}", file=sys.stderr)


def cmd_verify(args: argparse.Namespace) -> int:
    job = _job(args)
    path = metrics_file_path(args.metrics_file) if args.metrics_file else None
    metrics = VerifyMetrics(job.queue.table, job.queue.qid, job.dest_table, path)
    if args.metrics_port:
        metrics.serve(args.metrics_port)  # a taken port fails here, before anything runs
    try:
        if args.every is None:
            return _verify_once(job, args, metrics, standing=False)
        purge = BackgroundPurge(job.source, job.queue, job.dest, job.dest_table, period=args.purge_every).start()
        metrics.registry.register(PurgeMetrics(purge))
        try:
            return repeat_every(args.every, lambda: _verify_once(job, args, metrics, standing=True), _say)
        finally:
            purge.stop()
    finally:
        metrics.close()


def _verify_once(job: BootstrapJob, args: argparse.Namespace, metrics: VerifyMetrics, standing: bool) -> int:
    """One verify, published to ``metrics``; its exit status. A run that fails raises, except in a standing
    check, which prints the error and returns its status (the next run may succeed)."""
    try:
        job, _ = preflight(job)
        s = job.settings
        assert s.snapshot is not None and s.translator is not None
        try:
            with job.source.connect() as a, job.dest.connect() as b:
                report = verify_destination(a, job.table, snapshot_source(a, job.table, s.snapshot), job.queue,
                                            Destination(b, job.dest_table, s.translator, s.delete_mode),
                                            repair=args.repair, settle_seconds=s.settle_seconds,
                                            other_feeders=s.other_feeders, progress=_say)
        except AccumuloError as exc:  # named as the drain's errors are: which clusters the run talked to
            raise cluster_error(exc, f"source {job.source.describe()} / destination {job.dest.describe()}") from None
    except ConnectorError as exc:
        metrics.failed()
        metrics.publish()
        if not standing:
            raise
        print(f"accumulo-export: error: {exc}", file=sys.stderr, flush=True)
        return exit_status_of(exc)
    metrics.completed(report)
    metrics.publish()
    _print_verify(report, args)
    sys.stdout.flush()  # a standing check's summaries reach a pipe as each run ends
    return 0 if report.clean else EXIT_NOT_CLEAN


def _bound(row: str | None, unbounded: str) -> str:
    return unbounded if row is None else repr(row)


def _print_verify(report: VerifyReport, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(report.to_json(args.examples)))
        return
    print(f"verify: {report.expected:,} cells expected from {report.snapshot.rows:,} rows of A, {report.actual:,} "
          f"held by B in {report.ranges} tablet ranges of B ({report.matched} matched by digest); "
          f"{report.differences} differences ({report.count('missing')} missing, "
          f"{report.count('unexpected')} unexpected, {report.count('different')} different), confirmed twice; "
          f"{report.in_flight} more were in flight (exported meanwhile)"
          + (f"; repaired {report.repaired}" if args.repair else "")
          + (f", {report.unrepaired} do not show their fix (a newer export got there first: verify again)"
             if report.unrepaired else ""))
    if report.failed_rows:
        print(f"  {report.failed_rows:,} rows of A could not be snapshotted; what they imply is unknown, so the "
              f"{report.unrepairable} ranges that may hold their cells are left untouched:", file=sys.stderr)
        for error in report.snapshot.errors:
            print(f"    {error}", file=sys.stderr)
    for r in report.results:
        data = r.to_json(args.examples)
        print(f"  range {r.index} [{_bound(data['start'], 'first row')}, {_bound(data['stop'], 'end')}): "
              f"{data['missing']} missing, {data['unexpected']} unexpected, {data['different']} different"
              + (f" (unrepairable: {r.unrepairable})" if r.unrepairable else ""))
        for kind, examples in data["examples"].items():
            for e in examples:
                expected = "nothing" if e["expected"] is None else f"{e['expected']!r} (at version {e['version']})"
                actual = "nothing" if e["actual"] is None else f"{e['actual']!r} (ts {e['ts']})"
                print(f"    {kind}: row {e['row']!r} {e['cf']}:{e['cq']} expected {expected}, B holds {actual}")
    if report.pending:
        print(f"note: {report.pending:,} outbox cells and queue entries were still waiting; is a drain into the "
              "destination running?", file=sys.stderr)
