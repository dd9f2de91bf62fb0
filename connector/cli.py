"""The ``accumulo-export`` command. It only wires the layers together; see ``--help`` of each command.

Clusters are named in a config file (see :mod:`connector.clusters_config`); secrets come from the files or
environment variables that file names, never from a flag.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from connector.accumulo import AccumuloError
from connector.clusters_config import ConfigError, cluster
from connector.queue import ExportQueue, QueueConfig, queue_status
from connector.spark.options import OptionError

log = logging.getLogger("accumulo-export")


def _queue_args(p: argparse.ArgumentParser, cluster_flag: str = "--cluster") -> None:
    p.add_argument(cluster_flag, required=True, help="cluster name from the config file")
    p.add_argument("--table", required=True, help="the table holding the queue")
    p.add_argument("--queue", required=True, help="queue id (the row prefix)")
    p.add_argument("--buckets", type=int, required=True, help="number of buckets of the queue")
    p.add_argument("--key-serializer", default="json")
    p.add_argument("--value-serializer", default="json")


def _config(args: argparse.Namespace) -> QueueConfig:
    return QueueConfig(table=args.table, qid=args.queue, num_buckets=args.buckets,
                       buckets_per_tablet=getattr(args, "buckets_per_tablet", None),
                       key_serializer=args.key_serializer, value_serializer=args.value_serializer)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="accumulo-export", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    q = sub.add_parser("queue", help="create, fill and inspect an export queue").add_subparsers(
        dest="queue_command", required=True)
    init = q.add_parser("init", help="create the queue table with its bucket split points")
    _queue_args(init)
    init.add_argument("--buckets-per-tablet", type=int)
    add = q.add_parser("add", help='add JSON lines {"key": ..., "value": ..., "seq": N} from stdin')
    _queue_args(add)
    status = q.add_parser("status", help="entries, bytes and oldest seq per bucket")
    _queue_args(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")

    d = sub.add_parser("drain", help="export the queue's entries into a destination table with Spark")
    _queue_args(d, "--source")
    d.add_argument("--dest", required=True, help="destination cluster name")
    d.add_argument("--dest-table", required=True)
    d.add_argument("--translator", default="difference", help="difference, replicator, cells or module:callable")
    d.add_argument("--delete-mode", default="delete", choices=["delete", "tombstone"])
    d.add_argument("--buffer-bytes", type=int, default=1 << 20, help="max bytes per exported batch")
    d.add_argument("--fail-fast", action="store_true", help="stop at a malformed entry instead of dead-lettering")
    d.add_argument("--stream", action="store_true", help="run continuously at --trigger-seconds")
    d.add_argument("--trigger-seconds", type=float, default=1.0)
    d.add_argument("--max-entries-per-trigger", type=int)
    d.add_argument("--checkpoint", help="streaming checkpoint folder (default: a temporary one)")
    d.add_argument("--master", help="Spark master (default local[2] or SPARK_MASTER)")
    return p


def cmd_queue(args: argparse.Namespace) -> int:
    gateway = cluster(args.cluster)
    config = _config(args)
    with gateway.connect() as conn:
        if args.queue_command == "init":
            ExportQueue(conn, config).init()
            print(f"queue {config.qid} ready in {config.table}: {config.num_buckets} buckets, "
                  f"{len(config.split_points())} split points")
            return 0
        if args.queue_command == "add":
            items = _read_json_lines(sys.stdin)
            with ExportQueue(conn, config) as queue:
                n = queue.add_all(items)
            print(f"added {n} entries to {config.qid}")
            return 0
        st = queue_status(conn, config)
        if args.json:
            print(json.dumps({"entries": st.entries, "bytes": st.bytes, "oldest_seq": st.oldest_seq,
                              "buckets": {b.bucket: {"entries": b.entries, "bytes": b.bytes,
                                                     "oldest_seq": b.oldest_seq}
                                          for b in st.buckets if b.entries}}))
        else:
            print(f"queue {config.qid}: {st.entries} entries, {st.bytes} bytes, oldest seq {st.oldest_seq}")
            for b in st.buckets:
                if b.entries:
                    print(f"  bucket {b.bucket:>5}: {b.entries:>9} entries {b.bytes:>12} bytes  oldest {b.oldest_seq}")
        return 0


def _read_json_lines(stream: Any) -> list[tuple[Any, Any, int]]:
    """Parse and check every line before anything is written: a bad line aborts the whole add."""
    items = []
    for n, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise OptionError(f"stdin line {n}: not JSON ({exc.msg}); nothing was added") from None
        if not isinstance(obj, dict) or not {"key", "value", "seq"} <= obj.keys():
            raise OptionError(f'stdin line {n}: expected {{"key", "value", "seq"}}; nothing was added')
        seq = obj["seq"]
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 1 << 63:
            raise OptionError(f"stdin line {n}: seq must be an integer in [0, 2**63), got {seq!r}; "
                              "nothing was added")
        items.append((obj["key"], obj["value"], seq))
    return items


def cmd_drain(args: argparse.Namespace) -> int:
    from rich.console import Console

    from connector.spark import DrainJob, run_batch, spark_session
    from connector.spark.drain_job import DrainReport, collect_stream_reports, start_stream

    console = Console(stderr=True)
    source, dest = cluster(args.source), cluster(args.dest)
    job = DrainJob(source=source, dest=dest, queue=_config(args), dest_table=args.dest_table,
                   translator=args.translator, delete_mode=args.delete_mode, buffer_bytes=args.buffer_bytes,
                   fail_fast=args.fail_fast)
    spark = spark_session(args.master, "accumulo-export drain")

    def progress(r: DrainReport) -> None:
        console.print(f"round {r.rounds}: drained {r.exported} entries ({r.rate:,.0f}/s), "
                      f"{r.dead_lettered} dead-lettered; queue depth before round "
                      f"{r.history[-1]['queue_before'] if r.history else '?'}")

    try:
        if not args.stream:
            report = run_batch(spark, job, progress)
        else:
            report = DrainReport()
            report_dir = tempfile.mkdtemp(prefix="drain-stream-")
            checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="drain-checkpoint-")
            query = start_stream(spark, job, checkpoint, report_dir, args.trigger_seconds,
                                 max_entries_per_trigger=args.max_entries_per_trigger)
            started = time.monotonic()
            console.print(f"streaming drain started (checkpoint {checkpoint}); Ctrl-C stops it")
            try:
                while query.isActive:
                    query.awaitTermination(5)
                    collect_stream_reports(report_dir, report)
                    report.seconds = time.monotonic() - started
                    with source.connect() as conn:
                        depth = queue_status(conn, job.queue).entries
                    console.print(f"drained {report.exported} entries ({report.rate:,.0f}/s), queue depth {depth}")
            except KeyboardInterrupt:
                console.print("stopping ...")
                query.stop()
            collect_stream_reports(report_dir, report)
            if query.exception():
                raise RuntimeError(str(query.exception()))
    finally:
        spark.stop()
    print(json.dumps({"rounds": report.rounds, "entries": report.entries, "exported": report.exported,
                      "deleted": report.deleted, "dead_lettered": report.dead_lettered,
                      "seconds": round(report.seconds, 2), "entries_per_s": round(report.rate, 1),
                      "remaining": report.remaining}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return cmd_queue(args) if args.command == "queue" else cmd_drain(args)
    except (ConfigError, OptionError, AccumuloError, ValueError) as exc:
        print(f"accumulo-export: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
