"""``accumulo-export combine init|update|status|run``: the combine queue from the command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from typing import IO, Any

from connector.accumulo import AccumuloError, Connection, Mutation
from connector.clusters_config import cluster
from connector.combine.config import CombineConfig, read_combine_config, resolve_combine_config
from connector.combine.producer import CombineQueue
from connector.combine.status import combine_status, count_updates
from connector.jobs import (
    LOCAL_COMBINE_MAX_UPDATES,
    CombineJob,
    CombineReport,
    Engine,
    run_combine,
    stream_combine,
)
from connector.jobs.combine import preflight
from connector.queue.stored_config import resolve_config
from connector.serializers import DEFAULT_SERIALIZER

from .common import EXIT_INTERRUPTED, EXIT_NOT_CLEAN, UsageError, cluster_error
from .engine import EngineChoice
from .options import bucket_count, check_namespace, check_table_name, int_at_least, positive_seconds
from .progress import print_combine_round


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", required=True, help="cluster name from the config file")
    p.add_argument("--table", required=True, help="the table holding the combine queue")
    p.add_argument("--queue", required=True, help="combine queue id (the row prefix)")
    p.add_argument("--buckets", type=bucket_count, help="number of buckets (init; later read from the queue)")
    p.add_argument("--key-serializer", help="json (default at init), bytes or module:callable")
    p.add_argument("--value-serializer", help="json (default at init), bytes or module:callable")


def register_combine_commands(sub: Any) -> None:
    """Add the ``combine`` command to the ``accumulo-export`` parser's subcommands."""
    c = sub.add_parser("combine", help="the combine queue: queue updates per key, combine them, export changes")
    cs = c.add_subparsers(dest="combine_command", required=True)
    init = cs.add_parser("init", help="create the combine queue (table, stored configuration, split points)")
    _args(init)
    init.add_argument("--buckets-per-tablet", type=int_at_least(1))
    _args(cs.add_parser("update", help='queue JSON lines {"key": ..., "delta": ...} from stdin'))
    status = cs.add_parser("status", help="queued updates, keys and outbox cells per bucket")
    _args(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    get = cs.add_parser("get", help="the combined value of keys (as of the last combine)")
    _args(get)
    get.add_argument("--key", action="append", required=True,
                     help="the key, as text (repeat for several; with the json key serializer a key is a JSON "
                          "string unless --json-keys)")
    get.add_argument("--json-keys", action="store_true", help="parse each --key as JSON (numbers, lists, ...)")
    get.add_argument("--json", action="store_true", help='print {"key": value, ...} (null: no value)')
    run = cs.add_parser("run", help="combine the queued updates (until none is left, or --stream), with Spark or "
                                    "in this process")
    _args(run)
    run.add_argument("--combiner", default="sum", help="sum (default) or module:callable")
    run.add_argument("--observer", help="changes or module:callable: turns changes into exports")
    run.add_argument("--export-table", help="table of the export queue the observer's exports go to")
    run.add_argument("--export-queue", help="id of that export queue (initialised with 'queue init')")
    run.add_argument("--stream", action="store_true", help="keep combining, a round every --interval seconds")
    run.add_argument("--interval", type=positive_seconds, default=1.0)
    EngineChoice.add_arguments(run)


def cmd_combine(args: argparse.Namespace) -> int:
    gateway = cluster(args.cluster)
    check_table_name(args.table, "--table", gateway.describe())
    if getattr(args, "export_table", None):
        check_table_name(args.export_table, "--export-table", gateway.describe())
    try:
        with gateway.connect() as conn:
            if args.combine_command == "init":
                if not conn.table_exists(args.table):
                    check_namespace(conn, args.table, "--table", gateway.describe())
                return _init(conn, args)
            if not conn.table_exists(args.table):
                raise UsageError(f"table {args.table!r} does not exist on {gateway.describe()} "
                                 "(create the combine queue with 'combine init')")
            config = resolve_combine_config(conn, args.table, args.queue, num_buckets=args.buckets,
                                            key_serializer=args.key_serializer,
                                            value_serializer=args.value_serializer)
            if args.combine_command == "update":
                with CombineQueue(conn, config) as queue:
                    mutations = _read_updates(sys.stdin.buffer, queue)
                    queue.add_mutations(mutations)
                print(f"queued {len(mutations)} updates to {config.cid}")
                return 0
            if args.combine_command == "status":
                return _status(conn, config, args.json)
            if args.combine_command == "get":
                return _get(conn, config, args)
            export = None
            if args.export_table or args.export_queue:
                if not (args.export_table and args.export_queue):
                    raise UsageError("--export-table and --export-queue go together")
                export = resolve_config(conn, args.export_table, args.export_queue)
            choice = EngineChoice.from_args(args)
            local = choice.local(stream=args.stream, small=lambda: count_updates(
                conn, config, limit=LOCAL_COMBINE_MAX_UPDATES + 1) <= LOCAL_COMBINE_MAX_UPDATES)
    except AccumuloError as exc:
        raise cluster_error(exc, gateway.describe()) from None
    return _run(args, gateway, config, export, choice, local)


def _init(conn: Connection, args: argparse.Namespace) -> int:
    if args.buckets is None:
        if not (conn.table_exists(args.table) and read_combine_config(conn, args.table, args.queue)):
            raise UsageError("combine init needs --buckets")
        config = resolve_combine_config(conn, args.table, args.queue, key_serializer=args.key_serializer,
                                        value_serializer=args.value_serializer)
    else:
        config = CombineConfig(table=args.table, cid=args.queue, num_buckets=args.buckets,
                               buckets_per_tablet=args.buckets_per_tablet,
                               key_serializer=args.key_serializer or DEFAULT_SERIALIZER,
                               value_serializer=args.value_serializer or DEFAULT_SERIALIZER)
    CombineQueue(conn, config).init()
    print(f"combine queue {config.cid} ready in {config.table}: {config.num_buckets} buckets")
    return 0


def _status(conn: Connection, config: CombineConfig, as_json: bool) -> int:
    st = combine_status(conn, config)
    if as_json:
        print(json.dumps({"updates": st.updates, "keys": st.keys, "outbox": st.outbox,
                          "buckets": {b.bucket: {"updates": b.updates, "keys": b.keys, "outbox": b.outbox}
                                      for b in st.buckets}}))
        return 0
    print(f"combine queue {config.cid}: {st.updates} queued updates for {st.keys} keys, {st.outbox} outbox cells")
    for b in st.buckets:
        print(f"  bucket {b.bucket:>5}: {b.updates:>9} updates {b.keys:>8} keys {b.outbox:>6} outbox")
    return 0


def _get(conn: Connection, config: CombineConfig, args: argparse.Namespace) -> int:
    keys: list[Any] = []
    for text in args.key:
        if args.json_keys:
            try:
                keys.append(json.loads(text))
            except json.JSONDecodeError as exc:
                raise UsageError(f"--key {text!r} is not JSON ({exc.msg}); leave out --json-keys for text") from None
        else:
            keys.append(text.encode("utf-8") if config.key_serializer == "bytes" else text)
    queue = CombineQueue(conn, config)
    try:
        values = [queue.get(key) for key in keys]
    except (TypeError, ValueError) as exc:  # a key the serializer refuses
        raise UsageError(f"cannot look up {args.key!r}: {exc}") from None
    values = [v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else v for v in values]
    if args.json:
        print(json.dumps({text: value for text, value in zip(args.key, values, strict=True)}, default=repr))
    else:
        for text, value in zip(args.key, values, strict=True):
            print(f"{text}\t{json.dumps(value, default=repr) if value is not None else '(no value)'}")
    return 0


def _read_updates(stream: IO[bytes], queue: CombineQueue) -> list[Mutation]:
    """Parse and serialize every line before anything is written: a bad line queues nothing."""
    mutations = []
    for n, raw in enumerate(stream, 1):
        try:
            obj = json.loads(raw.decode("utf-8")) if raw.strip() else None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"stdin line {n}: not a JSON line ({exc}); nothing was queued") from None
        if obj is None:
            continue
        if not isinstance(obj, dict) or not {"key", "delta"} <= obj.keys():
            raise UsageError(f'stdin line {n}: expected {{"key", "delta"}}; nothing was queued')
        try:
            mutations.append(queue.mutation(obj["key"], obj["delta"]))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"stdin line {n}: cannot serialize: {exc}; nothing was queued") from None
    return mutations


def _run(args: argparse.Namespace, gateway: Any, config: CombineConfig, export: Any, choice: EngineChoice,
         local: bool) -> int:
    job = CombineJob(source=gateway, combine=config, combiner=args.combiner, observer=args.observer,
                     export_queue=export)
    preflight(job)

    from .metrics import combine_metrics

    metrics = combine_metrics(choice.metrics_port, job)  # served until the command ends; a taken port fails here

    def progress(r: CombineReport) -> None:
        metrics.observe(r)
        print_combine_round(r)

    stop = threading.Event()
    latest = [CombineReport()]
    interrupted = False
    if args.stream:  # SIGTERM (systemd, Kubernetes) ends the stream after its round, from Spark's start on
        signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def combine(engine: Engine) -> CombineReport:
        nonlocal interrupted
        if not args.stream:
            return run_combine(engine, job, progress, check=False)
        print("streaming combine started; Ctrl-C or SIGTERM stops it", file=sys.stderr, flush=True)

        def observed(r: CombineReport) -> None:
            latest[0] = r
            progress(r)

        try:
            return stream_combine(engine, job, args.interval, stop, observed, check=False)
        except KeyboardInterrupt:  # Ctrl-C: the counters of the rounds that finished
            stop.set()
            interrupted = True
            return latest[0]

    with contextlib.closing(metrics):
        with choice.running(local, "accumulo-export combine", args.verbose) as (engine, _):
            report = combine(engine)
        metrics.observe(report)  # the last counters (a relay after the last round, say), which no round showed
    t = report.totals
    for error in t.errors:
        print(f"accumulo-export: combine error: {error}", file=sys.stderr)
    print(json.dumps({"rounds": report.rounds, "keys": t.keys, "updates": t.updates, "changed": t.changed,
                      "deleted": t.deleted, "exports": t.exports + t.leftovers, "conflicts": t.conflicts,
                      "failed": t.failed, "remaining": report.remaining, "relayed": report.relayed,
                      "seconds": round(report.seconds, 2), "updates_per_s": round(report.rate, 1)}))
    if interrupted:
        return EXIT_INTERRUPTED
    # a batch run ends with nothing queued unless keys failed; a stream stops with whatever arrived last
    return EXIT_NOT_CLEAN if report.remaining and not args.stream else 0
