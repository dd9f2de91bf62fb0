"""The ``accumulo-export`` command. It only wires the layers together; see ``--help`` of each command.

Clusters are named in a config file (see :mod:`connector.clusters_config`); secrets come from the files or
environment variables that file names, never from a flag.
"""


from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

from connector.accumulo import AccumuloError, Connection, Mutation
from connector.accumulo.frames import DEFAULT_MAX_FRAME_BYTES
from connector.accumulo.writer import mutation_fits
from connector.clusters_config import cluster
from connector.errors import ConnectorError
from connector.export import translator_from_name
from connector.queue import (
    ExportQueue,
    QueueConfig,
    count_entries,
    dead_letters,
    queue_status,
    read_stored_config,
    requeue_dead_letters,
    resolve_config,
)
from connector.queue.planner import DEFAULT_SWEEP_SECONDS
from connector.queue.stored_config import read_translator, store_translator
from connector.transactions.layout import DEFAULT_OUTBOX_FAMILY
from connector.transactions.relay import DEFAULT_RELAY_SECONDS

from .common import (
    EXIT_DEAD_LETTERS,
    EXIT_SIGTERM,
    Help,
    Parser,
    Terminated,
    UsageError,
    check_namespace,
    check_table_name,
    handle_sigterm,
    int_at_least,
    port_number,
    positive_seconds,
    sigterm_as_event,
    spark_output,
)

if TYPE_CHECKING:  # Spark and rich load only when a drain runs: queue commands start faster without them
    from pyspark.sql import SparkSession
    from rich.console import Console

    from connector.spark import DrainJob
    from connector.spark.drain_job import DrainReport

log = logging.getLogger("accumulo-export")
PROGRESS_SECONDS = 2  # seconds between progress reports
PROGRESS_COUNT_LIMIT = 100_000  # a stream's progress report counts the queue up to here (keys only), then "+"

DESCRIPTION = "Export committed queue entries from cluster A into Accumulo tables on cluster B, with Spark."
EPILOG = """clusters:
  --cluster/--source/--dest name clusters of a TOML file: ~/.config/accumulo-export/clusters.toml, or the
  file that ACCUMULO_EXPORT_CONFIG names (`make cluster` writes one for the embedded clusters):
      [clusters.A]
      host = "a-gateway-host"
      port = 42424
      secret_file = "/etc/accumulo-export/a.secret"   # or: secret_env = "A_SECRET"
  Secrets come only from that file or variable (or ACCUMULO_GATEWAY_SECRET_FILE / ACCUMULO_GATEWAY_SECRET
  when a cluster names neither), never from a flag, and are never printed.

examples:
  accumulo-export queue init   --cluster A --table exports --queue idx --buckets 64
  accumulo-export queue add    --cluster A --table exports --queue idx < updates.jsonl
  accumulo-export queue status --cluster A --table exports --queue idx
  accumulo-export drain --source A --dest B --table exports --queue idx --dest-table index
  accumulo-export drain --source A --dest B --table exports --queue idx --dest-table index --stream
  accumulo-export queue dead-letters --cluster A --table exports --queue idx [--requeue]
  accumulo-export tx status --cluster A --table counts      (outboxes of row-transaction producers)
  accumulo-export tx relay  --cluster A --table counts

Exit status: 0 done (a stream stopped by SIGTERM, too: that is how systemd and Kubernetes stop it), 1 a
combine left keys failing, 2 a usage or input error (one line on stderr), 3 a drain dead-lettered entries
(unless --allow-dead-letters), 130 interrupted by Ctrl-C, 143 a batch command stopped by SIGTERM. -v shows
Spark's own output and tracebacks.
"""


#: exit status of a drain that dead-lettered entries (without --allow-dead-letters)


def _queue_args(p: argparse.ArgumentParser, cluster_flag: str = "--cluster") -> None:
    p.add_argument(cluster_flag, required=True, help="cluster name from the config file")
    p.add_argument("--table", required=True, help="the table holding the queue")
    p.add_argument("--queue", required=True, help="queue id (the row prefix)")
    p.add_argument("--buckets", type=int_at_least(1),
                   help="number of buckets (required by init; later commands read it from the queue)")
    p.add_argument("--key-serializer", help="json (default at init), bytes or module:callable")
    p.add_argument("--value-serializer", help="json (default at init), bytes or module:callable")


#: Accumulo's rule for table names: word characters (ASCII), after an optional namespace and a dot


def _stored_config(conn: Connection, args: argparse.Namespace, where: str) -> QueueConfig:
    """The queue's configuration as ``init`` stored it, checked against the flags given."""
    if not conn.table_exists(args.table):
        raise UsageError(f"table {args.table!r} does not exist on {where} (create the queue with 'queue init')")
    return resolve_config(conn, args.table, args.queue, num_buckets=args.buckets,
                          key_serializer=args.key_serializer, value_serializer=args.value_serializer)


def _init_config(conn: Connection, args: argparse.Namespace) -> QueueConfig:
    """The configuration ``init`` stores: the flags, or for a queue initialised before, what it stored."""
    if args.buckets is None:
        if conn.table_exists(args.table) and read_stored_config(conn, args.table, args.queue) is not None:
            return _stored_config(conn, args, "")
        raise UsageError("queue init needs --buckets")
    return QueueConfig(table=args.table, qid=args.queue, num_buckets=args.buckets,
                       buckets_per_tablet=args.buckets_per_tablet,
                       key_serializer=args.key_serializer or "json", value_serializer=args.value_serializer or "json")


def parser() -> argparse.ArgumentParser:
    fmt = Help
    p = Parser(prog="accumulo-export", description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="show Spark's output, debug logs and tracebacks")
    sub = p.add_subparsers(dest="command", required=True, metavar="{queue,drain,combine,tx}")

    q = sub.add_parser("queue", help="create, fill and inspect an export queue",
                       description="Create, fill and inspect an export queue on one cluster.").add_subparsers(
        dest="queue_command", required=True)
    init = q.add_parser("init", formatter_class=fmt, help="create the queue (table, split points, stored config)",
                        description="Create the queue table if missing, store the queue's configuration "
                                    "(buckets, serializers) in it and add the bucket split points. Running it "
                                    "again with the same configuration is harmless; a different one is refused.")
    _queue_args(init)
    init.add_argument("--buckets-per-tablet", type=int_at_least(1),
                      help="buckets sharing one tablet (default: about 8-16 tablets)")
    init.add_argument("--translator", metavar="{difference,replicator,cells,value[=CF[:CQ]],module:callable}",
                      help="store the translator the queue's entries are meant for: 'queue add' then checks each "
                           "line with it, and 'drain' uses it when given no --translator")
    add = q.add_parser("add", formatter_class=fmt, help="add JSON lines from stdin, all or nothing",
                       description='Add JSON lines {"key": ..., "value": ..., "seq": N} from stdin. Every line '
                                   "is checked and serialized before the first is written: a bad line adds "
                                   "nothing and names its line number. For data already committed elsewhere "
                                   "(e.g. by Fluo): a producer whose own writes must commit together with its "
                                   "exports uses row transactions (README: Producing transactionally).")
    _queue_args(add)
    status = q.add_parser("status", formatter_class=fmt, help="entries, bytes and oldest seq per bucket",
                          description="What waits in the queue: entries, bytes and the oldest seq per bucket, "
                                      "malformed rows and dead letters.")
    _queue_args(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    dead = q.add_parser("dead-letters", formatter_class=fmt, help="list dead letters, or re-queue them",
                        description="List the entries a drain set aside (undecodable or untranslatable), with "
                                    "their reasons; with --requeue, put them back in the queue (after fixing "
                                    "the cause) so the next drain exports them.")
    _queue_args(dead)
    dead.add_argument("--requeue", action="store_true", help="write them back as queue entries and remove them")
    dead.add_argument("--json", action="store_true", help="print JSON lines instead of text")

    d = sub.add_parser("drain", formatter_class=fmt, help="export the queue into a destination table with Spark",
                       description="Export the queue's entries into a table on the destination cluster (created "
                                   "when missing), each cell at timestamp = seq, and delete each entry after "
                                   "its export is durable. Batch mode runs until the queue is empty; --stream "
                                   "runs until Ctrl-C.")
    _queue_args(d, "--source")
    d.add_argument("--dest", required=True, help="destination cluster name from the config file")
    d.add_argument("--dest-table", required=True, help="destination table (created when missing)")
    d.add_argument("--translator", metavar="{difference,replicator,cells,value[=CF[:CQ]],module:callable}",
                   help="turns each export into cell changes; value=CF[:CQ] writes each key's value (a combine's "
                        "new value) into the cell (key, CF, CQ); module:callable: see the README (default: the "
                        "one 'queue init --translator' stored, else difference)")
    d.add_argument("--delete-mode", default="delete", choices=["delete", "tombstone"],
                   help="tombstone: deletes as tombstone puts, immune to the compaction hazard (README)")
    d.add_argument("--buffer-bytes", type=int_at_least(1), default=1 << 20,
                   help="max bytes (row + value) of entries per exported batch")
    d.add_argument("--fail-fast", action="store_true",
                   help="stop at the first malformed or untranslatable entry instead of dead-lettering it")
    d.add_argument("--allow-dead-letters", action="store_true",
                   help=f"exit 0 even when entries were dead-lettered (else exit status {EXIT_DEAD_LETTERS})")
    d.add_argument("--server-wait", type=positive_seconds, default=300.0, metavar="SECONDS",
                   help="how long a read or write on A or B may wait for a tablet server (one restarting after a "
                        "crash) before the drain fails; nothing unexported is deleted, a rerun finishes")
    d.add_argument("--stream", action="store_true", help="keep draining new entries until Ctrl-C")
    d.add_argument("--trigger-seconds", type=positive_seconds, default=1.0, help="--stream: micro-batch interval")
    limits = d.add_mutually_exclusive_group()
    limits.add_argument("--max-entries-per-trigger", type=int_at_least(1),
                        help="--stream with Spark: at most this many entries per micro-batch (default: all pending)")
    limits.add_argument("--max-bytes-per-trigger", type=int_at_least(1),
                        help="--stream with Spark: at most about this many bytes (row + value) per micro-batch, "
                             "shared among the pending buckets (default: all pending)")
    d.add_argument("--checkpoint", help="--stream with Spark: checkpoint folder, kept (default: a temporary one, "
                                        "removed)")
    d.add_argument("--sweep-seconds", type=positive_seconds, default=DEFAULT_SWEEP_SECONDS,
                   help="--stream: the longest an entry written without a bucket mark waits (a full sweep of "
                        "the queue runs this often)")
    d.add_argument("--relay-seconds", type=positive_seconds, default=DEFAULT_RELAY_SECONDS,
                   help="--stream: relay what crashed row-transaction producers left in the outboxes feeding the "
                        "queue within about this long (a batch drain relays them once before it starts)")
    d.add_argument("--master", help="Spark master (default: SPARK_MASTER or local[2])")
    d.add_argument("--metrics-port", type=port_number, metavar="PORT",
                   help="serve Prometheus metrics (counters, queue depth, lag per bucket) on this port while the "
                        "drain runs (README: Metrics)")
    d.add_argument("--engine", choices=["auto", "spark", "local"], default="auto",
                   help="local: drain in this process without Spark (a stream then starts in about a second and "
                        "drains whole buckets per micro-batch; it needs no checkpoint: the queue's marks are its "
                        "state); auto: local for a batch drain of a small queue (Spark's start-up would "
                        "dominate) when no --master is given, else Spark")
    _tx_commands(sub, fmt)
    from .combine import register_combine_commands

    register_combine_commands(sub)
    return p


def _tx_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    t = sub.add_parser("tx", help="outboxes of row-transaction producers: relay and status",
                       description="Row transactions (connector.transactions) commit a row's cells and an outbox "
                                   "of its exports and updates together; the producer then relays the outbox into "
                                   "the queues. These commands relay what a crashed producer left, and show it."
                       ).add_subparsers(dest="tx_command", required=True)
    for name, text in (("relay", "copy the outbox cells of a table into their queues, then delete them "
                                 "(repeating it is harmless)"),
                       ("status", "outbox cells waiting in a table: count, rows, destination tables, oldest")):
        c = t.add_parser(name, formatter_class=fmt, help=text, description=text[0].upper() + text[1:] + ".")
        c.add_argument("--cluster", required=True, help="cluster name from the config file")
        c.add_argument("--table", required=True, help="the producers' table")
        c.add_argument("--outbox-family", default=DEFAULT_OUTBOX_FAMILY.decode(),
                       help="the outbox column family the producers use")
        if name == "relay":
            c.add_argument("--min-age", type=float, default=0.0, metavar="SECONDS",
                           help="leave outbox cells younger than this (a live producer relays them itself)")
        else:
            c.add_argument("--json", action="store_true", help="print JSON instead of text")


def cmd_tx(args: argparse.Namespace) -> int:
    from connector.transactions import TxLayout, outbox_status, relay_table

    gateway = cluster(args.cluster)
    layout = TxLayout(outbox_family=args.outbox_family)
    try:
        with gateway.connect() as conn:
            if not conn.table_exists(args.table):
                raise UsageError(f"table {args.table!r} does not exist on {gateway.describe()}")
            if args.tx_command == "relay":
                stats = relay_table(conn, args.table, layout, max(0.0, args.min_age))
                print(json.dumps({"relayed": stats.relayed, "exports": stats.exports, "updates": stats.updates,
                                  "young": stats.young, "malformed": stats.malformed}))
                for error in stats.errors:
                    print(f"accumulo-export: malformed outbox cell left in place: {error}", file=sys.stderr)
                return 1 if stats.malformed else 0
            st = outbox_status(conn, args.table, layout)
    except AccumuloError as exc:
        raise UsageError(f"{gateway.describe()}: {exc}") from None
    if args.json:
        print(json.dumps({"table": st.table, "cells": st.cells, "rows": st.rows, "by_target": dict(st.by_target),
                          "oldest_seq": st.oldest_seq, "age_seconds": st.age_seconds, "malformed": st.malformed}))
    else:
        age = f", oldest {st.age_seconds:.1f} s old (seq {st.oldest_seq})" if st.age_seconds is not None else ""
        targets = ", ".join(f"{n} to {t}" for t, n in sorted(st.by_target.items()))
        print(f"table {st.table}: {st.cells} outbox cells waiting in {st.rows} rows{age}"
              + (f" ({targets})" if targets else "") + (f"; {st.malformed} malformed" if st.malformed else ""))
    return 0


def cmd_queue(args: argparse.Namespace) -> int:
    gateway = cluster(args.cluster)
    check_table_name(args.table, "--table", gateway.describe())
    try:
        with gateway.connect() as conn:
            return _queue_command(conn, args, gateway.describe())
    except AccumuloError as exc:
        raise UsageError(f"{gateway.describe()}: {exc}") from None


def _queue_command(conn: Connection, args: argparse.Namespace, where: str) -> int:
    if args.queue_command == "init":
        config = _init_config(conn, args)
        if args.translator is not None:
            try:
                translator_from_name(args.translator)
            except ValueError as exc:
                raise UsageError(f"--translator: {exc}") from None
        if not conn.table_exists(config.table):
            check_namespace(conn, config.table, "--table", where)
        ExportQueue(conn, config).init()
        if args.translator is not None:
            store_translator(conn, config, args.translator)
        per_tablet = config.tablet_buckets
        tablets = -(-config.num_buckets // per_tablet)
        print(f"queue {config.qid} ready in table {config.table}: {config.num_buckets} buckets, in {tablets} "
              f"tablet{'s' if tablets > 1 else ''} of up to {per_tablet} bucket{'s' if per_tablet > 1 else ''} "
              f"(the table got {len(config.split_points())} split points)")
        return 0
    config = _stored_config(conn, args, where)
    if args.queue_command == "add":
        if read_stored_config(conn, config.table, config.qid) is None:
            # a bucket count nobody stored would disagree with the drain's sooner or later
            raise UsageError(f"queue {config.qid!r} in table {config.table!r} on {where} was never initialised: run "
                             "'accumulo-export queue init ... --buckets N' first; nothing was added")
        translator = read_translator(conn, config)
        with ExportQueue(conn, config) as queue:
            mutations = _read_json_lines(sys.stdin.buffer, queue, translator, conn.max_frame_bytes)
            queue.add_mutations(mutations)
        rows = len({m.row for m in mutations})
        same = (f" as {rows:,} entries (lines with the same key and seq make one entry; the last line wins)"
                if rows != len(mutations) else "")
        print(f"added {len(mutations):,} lines to queue {config.qid}{same}")
        return 0
    if args.queue_command == "dead-letters":
        return _dead_letters(conn, config, args)
    st = queue_status(conn, config)
    now = time.time()

    def lag(seconds: float | None) -> float | None:
        return None if seconds is None else round(seconds, 1)

    if args.json:
        print(json.dumps({"entries": st.entries, "bytes": st.bytes, "oldest_seq": st.oldest_seq,
                          "lag_seconds": lag(st.lag_seconds(now)),
                          "dead_letters": st.dead_letters, "marked": list(st.marked),
                          "buckets": {b.bucket: {"entries": b.entries, "bytes": b.bytes,
                                                 "oldest_seq": b.oldest_seq, "lag_seconds": lag(b.lag_seconds(now))}
                                      for b in st.buckets if b.entries}}))
    else:
        marked = ", ".join(map(str, st.marked[:20])) + (" ..." if len(st.marked) > 20 else "")
        oldest = (f", oldest seq {st.oldest_seq}, waiting {st.lag_seconds(now):,.1f} s" if st.entries else "")
        print(f"queue {config.qid}: {st.entries:,} entries, {st.bytes:,} bytes{oldest}; {st.dead_letters:,} dead "
              f"letters; {len(st.marked)} buckets marked as holding new entries (a stream visits them)"
              + (f": {marked}" if marked else ""))
        for b in st.buckets:
            if b.entries:
                print(f"  bucket {b.bucket:>5}: {b.entries:>9,} entries {b.bytes:>12,} bytes  oldest seq "
                      f"{b.oldest_seq}, waiting {b.lag_seconds(now):,.1f} s")
    return 0


def _dead_letters(conn: Connection, config: QueueConfig, args: argparse.Namespace) -> int:
    if args.requeue:
        n = requeue_dead_letters(conn, config)
        print(f"re-queued {n} dead letters into {config.qid}; the next drain exports them")
        return 0
    n = 0
    for d in dead_letters(conn, config):
        n += 1
        if args.json:
            print(json.dumps({"row": d.row.decode("utf-8", "backslashreplace"), "ts": d.ts, "reason": d.reason,
                              "value": d.value.decode("utf-8", "backslashreplace")}))
        else:
            print(f"{d.row!r} (ts {d.ts}): {d.reason}")
    if not args.json:
        print(f"{n} dead letters in {config.qid}" + ("; re-queue them with --requeue after a fix" if n else ""))
    return 0


def _read_json_lines(stream: IO[bytes], queue: ExportQueue, translator: str | None = None,
                     max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> list[Mutation]:
    """Parse, check and serialize every line before anything is written: a bad line aborts the whole add. With
    the queue's stored ``translator``, each line must also translate (what the drain would dead-letter)."""
    from connector.export import SequencedExport
    from connector.export.core import DATA_ERRORS, translation_reason

    translate = translator_from_name(translator) if translator else None
    mutations = []
    for n, raw in enumerate(stream, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"stdin line {n}: not UTF-8 ({exc.reason} at byte {exc.start}); "
                             "nothing was added") from None
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"stdin line {n}: not JSON ({exc.msg}); nothing was added") from None
        if not isinstance(obj, dict) or not {"key", "value", "seq"} <= obj.keys():
            raise UsageError(f'stdin line {n}: expected {{"key", "value", "seq"}}; nothing was added')
        seq = obj["seq"]
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 1 << 63:
            raise UsageError(f"stdin line {n}: seq must be an integer in [0, 2**63), got {seq!r}; "
                             "nothing was added")
        try:
            mutations.append(queue.mutation(obj["key"], obj["value"], seq))
        except (TypeError, ValueError) as exc:  # what the serializers refuse (NaN in strict JSON, say)
            raise UsageError(f"stdin line {n}: cannot serialize: {exc}; nothing was added") from None
        if not mutation_fits(mutations[-1], max_frame_bytes):
            raise UsageError(
                f"stdin line {n}: the entry is {mutations[-1].size:,} bytes, too large for one queue entry: an entry "
                f"travels in one Thrift frame of at most {max_frame_bytes:,} bytes (the client's max_frame_bytes), "
                "frame and largest value together, so values up to about half of that fit. The CLI keeps the "
                "default; store large values elsewhere and queue a reference to them, or add from Python with "
                "Connection(max_frame_bytes=...) against a gateway whose gateway.max.frame.bytes allows it; "
                "nothing was added")
        if translate is not None:
            try:
                list(translate(SequencedExport(obj["key"], obj["value"], seq)))
            except DATA_ERRORS as exc:
                raise UsageError(f"stdin line {n}: the queue's translator {translator!r} refuses it: "
                                 f"{translation_reason(exc)}; nothing was added") from None
    return mutations


def cmd_drain(args: argparse.Namespace) -> int:
    from connector.spark import DrainJob, spark_session
    from connector.spark.drain_job import DrainError, preflight

    started = time.monotonic()
    source, dest = cluster(args.source), cluster(args.dest)
    # everything a user can get wrong is checked here, before Spark starts (seconds) and fails in a task
    check_table_name(args.table, "--table", f"the source {source.describe()}")
    check_table_name(args.dest_table, "--dest-table", f"the destination {dest.describe()}")
    with source.connect() as conn:
        try:
            queue = _stored_config(conn, args, f"the source {source.describe()}")
            translator = args.translator or read_translator(conn, queue) or "difference"
        except AccumuloError as exc:
            raise UsageError(f"source {source.describe()}: {exc}") from None
    try:
        with dest.connect() as conn:
            if not conn.table_exists(args.dest_table):
                check_namespace(conn, args.dest_table, "--dest-table", f"the destination {dest.describe()}")
    except AccumuloError as exc:
        raise UsageError(f"destination {dest.describe()}: {exc}") from None
    job = DrainJob(source=source, dest=dest, queue=queue, dest_table=args.dest_table,
                   translator=translator, delete_mode=args.delete_mode, buffer_bytes=args.buffer_bytes,
                   fail_fast=args.fail_fast, server_wait=args.server_wait, relay_seconds=args.relay_seconds)
    preflight(job)
    from .metrics import drain_metrics

    metrics = drain_metrics(args.metrics_port, job)  # served until the command ends; a taken port fails here
    try:
        if _drain_locally(args, job):
            return _run_drain(args, job, None, started, metrics.observe)
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


class _ProgressView:
    """Live drain progress: a rich bar on a terminal, plain unwrapped lines otherwise. The rate is that of the
    last interval, not the average since the start."""

    def __init__(self, console: Console, stream: bool, observer: Callable[[DrainReport], None] | None = None) -> None:
        self.console, self.stream, self.observer = console, stream, observer
        self._last = (time.monotonic(), 0)
        self._bar: Any = None
        self._waiting_said = False
        if console.is_terminal and not stream:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            from rich.table import Column

            # on a narrow terminal the bar shrinks and the tail of the info is cut, never the count
            self._bar = Progress(
                TextColumn("draining"), BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=5)),
                TextColumn("{task.fields[count]}", table_column=Column(no_wrap=True)),
                TextColumn("{task.fields[info]}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=3)),
                TimeElapsedColumn(table_column=Column(no_wrap=True)), console=console, expand=True)
            self._task = self._bar.add_task("drain", total=None, count="", info="")
            self._bar.start()

    def __call__(self, report: DrainReport, depth: int | None = None) -> None:
        if self.observer is not None:  # --metrics-port
            self.observer(report)
        now, exported = time.monotonic(), report.exported
        then, before = self._last
        rate = (exported - before) / (now - then) if now > then else 0.0
        self._last = (now, exported)
        depth = report.queue_depth if depth is None else depth
        what = "micro-batches" if self.stream else "rounds"
        shown = f"{depth:,}+" if self.stream and depth >= PROGRESS_COUNT_LIMIT else f"{depth:,}"
        info = (f"{rate:,.0f}/s, queue depth {shown}, dead-lettered {report.dead_lettered:,}, "
                f"{what} {report.rounds}")
        if self._bar is not None:
            total = report.deleted + depth
            self._bar.update(self._task, completed=report.deleted, total=total,
                             count=f"{report.deleted:,}/{total:,}", info=info)
        elif not self.stream and not report.rounds and not report.deleted:
            # the first round's tasks have not reported anything: Spark is still starting them
            if not self._waiting_said:
                self._waiting_said = True
                print("waiting for the first round's tasks to start ...", file=sys.stderr, flush=True)
        else:  # print, not console.print: a log file must get whole lines, not text wrapped at 80 columns
            print(f"drained {exported:,} entries, {info}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _drain_locally(args: argparse.Namespace, job: DrainJob) -> bool:
    from connector.spark.drain_job import LOCAL_DRAIN_MAX_ENTRIES

    if args.engine != "auto":
        if args.engine == "local" and args.stream:
            spark_only = [flag for flag, value in (("--checkpoint", args.checkpoint), ("--master", args.master),
                                                   ("--max-entries-per-trigger", args.max_entries_per_trigger),
                                                   ("--max-bytes-per-trigger", args.max_bytes_per_trigger))
                          if value]
            if spark_only:
                raise UsageError(f"{', '.join(spark_only)} applies to Spark streams, not to --engine local")
        return bool(args.engine == "local")
    from connector.spark.session import submitted

    if args.stream or args.master or os.environ.get("SPARK_MASTER") or submitted():
        return False
    with job.source.connect() as conn:
        return count_entries(conn, job.queue, limit=LOCAL_DRAIN_MAX_ENTRIES + 1) <= LOCAL_DRAIN_MAX_ENTRIES


def _run_drain(args: argparse.Namespace, job: DrainJob, spark: SparkSession | None, started: float,
               observer: Callable[[DrainReport], None] | None = None) -> int:
    from rich.console import Console

    from connector.spark import run_batch
    from connector.spark.drain_job import DrainReport, collect_stream_reports, start_stream, task_error

    view = _ProgressView(Console(stderr=True), args.stream, observer)
    others = _other_drains(job) if not args.stream else set()
    report_dir = tempfile.mkdtemp(prefix="drain-stream-") if args.stream else None
    own_checkpoint = args.stream and not args.checkpoint
    checkpoint = args.checkpoint or (tempfile.mkdtemp(prefix="drain-checkpoint-") if args.stream else "")
    stop: KeyboardInterrupt | None = None  # how a stream was stopped: Ctrl-C or SIGTERM (Terminated)
    try:
        if report_dir is None:
            report = run_batch(spark, job, view, check=False)
        elif spark is None:
            report, stop = _stream_locally(args, job, view)
        else:
            report = DrainReport()
            query = start_stream(spark, job, checkpoint, report_dir, args.trigger_seconds,
                                 max_entries_per_trigger=args.max_entries_per_trigger,
                                 max_bytes_per_trigger=args.max_bytes_per_trigger, sweep_seconds=args.sweep_seconds,
                                 check=False)
            stream_started = time.monotonic()
            kept = f" (checkpoint {checkpoint})" if args.checkpoint else ""
            print(f"streaming drain started{kept}; Ctrl-C or SIGTERM stops it", file=sys.stderr, flush=True)
            with sigterm_as_event() as terminated:
                try:
                    with job.source.connect() as conn:
                        while query.isActive and not terminated.is_set():
                            query.awaitTermination(PROGRESS_SECONDS)
                            collect_stream_reports(report_dir, report)
                            report.seconds = time.monotonic() - stream_started
                            view(report, count_entries(conn, job.queue, limit=PROGRESS_COUNT_LIMIT))
                    if terminated.is_set():
                        raise Terminated()
                except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
                    stop = exc
                    print("stopping after the running micro-batch ...", file=sys.stderr, flush=True)
                    query.stop()
            collect_stream_reports(report_dir, report)
            failure = None if stop else query.exception()
            if failure is not None:
                raise task_error(failure) or RuntimeError(str(failure))
    finally:
        view.close()
        if spark is not None:
            spark.stop()
        for folder in (report_dir, checkpoint if own_checkpoint else None):
            if folder:
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
    from connector.queue.drain import other_drains

    with job.source.connect() as conn:
        runs = other_drains(conn, job.queue)
    if runs and warn:
        print(f"accumulo-export: warning: another drain of queue {job.queue.qid!r} is running; concurrent drains "
              "are safe but repeat work (entries read by both are exported by both, so the summaries together "
              "count more exports than there were entries)", file=sys.stderr, flush=True)
    return runs


def _stream_locally(args: argparse.Namespace, job: DrainJob,
                    view: _ProgressView) -> tuple[DrainReport, KeyboardInterrupt | None]:
    """The in-process stream until Ctrl-C or SIGTERM (which end it after the running micro-batch); the report,
    and what stopped it."""
    from connector.spark.drain_job import run_local_stream

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
            holder["report"] = run_local_stream(job, args.trigger_seconds, progress, stop=stop,
                                                sweep_seconds=args.sweep_seconds, check=False)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
            failure.append(exc)
        finally:
            done.set()

    # the stream runs in a thread so that Ctrl-C in the main thread ends it between micro-batches (an Event,
    # not Thread.join: a join interrupted by Ctrl-C may later return before the thread ends)
    threading.Thread(target=run, name="local-stream", daemon=True).start()
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
    if failure:
        raise failure[0]
    return holder["report"], interrupted


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    handle_sigterm()
    try:
        if args.command == "combine":
            from .combine import cmd_combine

            return cmd_combine(args)
        if args.command == "tx":
            return cmd_tx(args)
        return cmd_queue(args) if args.command == "queue" else cmd_drain(args)
    except (ConnectorError, ValueError) as exc:  # ours (every one derives from ConnectorError), and bad input
        if args.verbose:
            log.exception("failed")
        print(f"accumulo-export: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"accumulo-export: {'stopped by SIGTERM' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_SIGTERM if terminated else 130
    except BrokenPipeError:
        # the reader went away (`queue status | head`): not an error; stop Python complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
