"""``accumulo-export queue init|add|status|dead-letters``: an export queue from the command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import IO, Any

from connector.accumulo import AccumuloError, Connection, Mutation
from connector.accumulo.options import GatewayOptions
from connector.accumulo.wire.frames import DEFAULT_MAX_FRAME_BYTES, mutation_fits
from connector.clusters_config import cluster
from connector.export import prepare_destination_table, translator_from_name
from connector.export.translators import METAVAR, check_translator_name
from connector.queue import (
    ExportQueue,
    QueueConfig,
    dead_letters,
    queue_status,
    requeue_dead_letters,
)
from connector.queue.destinations import (
    Destination,
    register_destination,
    registered_destinations,
    unregister_destination,
)
from connector.queue.settings import DestinationSettings
from connector.queue.stored_config import read_stored_config, read_translator, resolve_config, store_translator
from connector.serializers import DEFAULT_SERIALIZER
from connector.settings import argparse_type
from connector.snapshot.state import destination_id
from connector.transactions import queue_watermark

from .common import UsageError, cluster_error
from .options import Help, check_namespace, check_table_name, int_at_least, queue_args


def register_queue_commands(sub: Any) -> None:
    """Add the ``queue`` command to the ``accumulo-export`` parser's subcommands."""
    fmt = Help
    q = sub.add_parser("queue", help="create, fill and inspect an export queue",
                       description="Create, fill and inspect an export queue on one cluster.").add_subparsers(
        dest="queue_command", required=True)
    init = q.add_parser("init", formatter_class=fmt, help="create the queue (table, split points, stored config)",
                        description="Create the queue table if missing, store the queue's configuration "
                                    "(buckets, serializers) in it and add the bucket split points. Running it "
                                    "again with the same configuration is harmless; a different one is refused.")
    queue_args(init)
    init.add_argument("--buckets-per-tablet", type=int_at_least(1),
                      help="buckets sharing one tablet (default: about 8-16 tablets)")
    init.add_argument("--translator", metavar=METAVAR, type=argparse_type(check_translator_name, "translator"),
                      help="store the translator the queue's entries are meant for: 'queue add' then checks each "
                           "line with it, and 'drain' uses it when given no --translator")
    add = q.add_parser("add", formatter_class=fmt, help="add JSON lines from stdin, all or nothing",
                       description='Add JSON lines {"key": ..., "value": ..., "seq": N} from stdin. Every line '
                                   "is checked and serialized before the first is written: a bad line adds "
                                   "nothing and names its line number. For data already committed elsewhere "
                                   "(e.g. by Fluo): a producer whose own writes must commit together with its "
                                   "exports uses row transactions "
                                   "(docs/producing.md: Producing transactionally).")
    queue_args(add)
    status = q.add_parser("status", formatter_class=fmt, help="entries, bytes and oldest seq per bucket",
                          description="What waits in the queue: entries, bytes and the oldest seq per bucket, "
                                      "malformed rows and dead letters.")
    queue_args(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    dead = q.add_parser("dead-letters", formatter_class=fmt, help="list dead letters, or re-queue them",
                        description="List the entries a drain set aside (undecodable or untranslatable), with "
                                    "their reasons; with --requeue, put them back in the queue (after fixing "
                                    "the cause) so the next drain exports them.")
    queue_args(dead)
    dead.add_argument("--requeue", action="store_true", help="write them back as queue entries and remove them")
    dead.add_argument("--json", action="store_true", help="print JSON lines instead of text")
    dests = q.add_parser("destinations", help="destinations every drain of the queue exports to (list, add, remove)",
                         description="A rebuilt destination runs beside the old one until the switch: register "
                                     "it, and every drain of the queue exports each batch to it too before "
                                     "deleting (within 5 s, no restart needed); then bootstrap it "
                                     "(docs/bootstrap-and-cutover.md: A second destination beside the first)."
                         ).add_subparsers(dest="action", required=True)
    listed = dests.add_parser("list", formatter_class=fmt, help="the destinations registered with the queue")
    queue_args(listed)
    for action, text in (("add", "register a destination table"), ("remove", "unregister a destination table")):
        d = dests.add_parser(action, formatter_class=fmt, help=text)
        queue_args(d)
        d.add_argument("--dest", required=True, help="the destination's cluster name from the config file")
        d.add_argument("--dest-table", required=True, help="the destination table")
        if action == "add":
            DestinationSettings.add_arguments(d)


def stored_config(conn: Connection, args: argparse.Namespace, where: str) -> QueueConfig:
    """The queue's configuration as ``init`` stored it, checked against the flags given."""
    if not conn.table_exists(args.table):
        raise UsageError(f"table {args.table!r} does not exist on {where} (create the queue with 'queue init')")
    return resolve_config(conn, args.table, args.queue, num_buckets=args.buckets,
                          key_serializer=args.key_serializer, value_serializer=args.value_serializer)


def source_queue(source: GatewayOptions, dest: GatewayOptions, args: argparse.Namespace,
                 create_dest_table: bool) -> QueueConfig:
    """For a command that reads the queue on ``source`` and writes ``args.dest_table`` on ``dest``: the queue's
    stored configuration, and, when the destination table is to be created, a check that its namespace exists
    (so a typo in it is one line before anything runs)."""
    try:
        with source.connect() as conn:
            queue = stored_config(conn, args, f"the source {source.describe()}")
    except AccumuloError as exc:
        raise cluster_error(exc, f"source {source.describe()}") from None
    try:
        with dest.connect() as conn:
            if create_dest_table and not conn.table_exists(args.dest_table):
                check_namespace(conn, args.dest_table, "--dest-table", f"the destination {dest.describe()}")
    except AccumuloError as exc:
        raise cluster_error(exc, f"destination {dest.describe()}") from None
    return queue


def _init_config(conn: Connection, args: argparse.Namespace) -> QueueConfig:
    """The configuration ``init`` stores: the flags, or for a queue initialised before, what it stored."""
    if args.buckets is None:
        if conn.table_exists(args.table) and read_stored_config(conn, args.table, args.queue) is not None:
            return stored_config(conn, args, "")
        raise UsageError("queue init needs --buckets")
    return QueueConfig(table=args.table, qid=args.queue, num_buckets=args.buckets,
                       buckets_per_tablet=args.buckets_per_tablet,
                       key_serializer=args.key_serializer or DEFAULT_SERIALIZER,
                       value_serializer=args.value_serializer or DEFAULT_SERIALIZER)


def cmd_queue(args: argparse.Namespace) -> int:
    gateway = cluster(args.cluster)
    check_table_name(args.table, "--table", gateway.describe())
    try:
        with gateway.connect() as conn:
            return _queue_command(conn, args, gateway.describe())
    except AccumuloError as exc:
        raise cluster_error(exc, gateway.describe()) from None


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
    config = stored_config(conn, args, where)
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
    if args.queue_command == "destinations":
        return _destinations(conn, config, args)
    mark = queue_watermark(conn, config)  # before the status: see its module for the order of the scans
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
                                      for b in st.buckets if b.entries},
                          "watermark": mark.seq, "waiting_for_destinations": mark.waiting}))
    else:
        marked = ", ".join(map(str, st.marked[:20])) + (" ..." if len(st.marked) > 20 else "")
        oldest = (f", oldest seq {st.oldest_seq}, waiting {st.lag_seconds(now):,.1f} s" if st.entries else "")
        print(f"queue {config.qid}: {st.entries:,} entries, {st.bytes:,} bytes{oldest}; {st.dead_letters:,} dead "
              f"letters; {len(st.marked)} buckets marked as holding new entries (a stream visits them)"
              + (f": {marked}" if marked else ""))
        print(f"destinations: {mark.describe()}")
        for b in st.buckets:
            if b.entries:
                print(f"  bucket {b.bucket:>5}: {b.entries:>9,} entries {b.bytes:>12,} bytes  oldest seq "
                      f"{b.oldest_seq}, waiting {b.lag_seconds(now):,.1f} s")
    return 0


def _destinations(conn: Connection, config: QueueConfig, args: argparse.Namespace) -> int:
    if args.action == "list":
        registered = registered_destinations(conn, config)
        for d in registered:
            print(f"{d.name}\t{d.gateway.describe()}\ttable {d.table}\ttranslator {d.translator}\t{d.delete_mode}")
        if not registered:
            print(f"no destination is registered with queue {config.qid} (its drains export only to their own "
                  "--dest-table)")
        return 0
    gateway = cluster(args.dest)
    check_table_name(args.dest_table, "--dest-table", gateway.describe())
    name = destination_id(args.dest, args.dest_table)
    if args.action == "remove":
        if not unregister_destination(conn, config, name):
            raise UsageError(f"no destination {name!r} is registered with queue {config.qid!r}")
        print(f"unregistered {name}: each drain process stops exporting to it at its next look-up (within 5 s)")
        return 0
    try:
        settings = DestinationSettings.from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    translator = settings.translator_or(read_translator(conn, config))
    try:
        with gateway.connect() as dest:  # its table must exist, or be created now when asked: never by a drain
            if settings.create_dest_table and not dest.table_exists(args.dest_table):
                check_namespace(dest, args.dest_table, "--dest-table", gateway.describe())
            prepare_destination_table(dest, args.dest_table, settings.create_dest_table)
    except AccumuloError as exc:
        raise cluster_error(exc, f"destination {gateway.describe()}") from None
    register_destination(conn, config, Destination(name, gateway, args.dest_table, translator, settings.delete_mode))
    print(f"registered {name} with queue {config.qid}: each drain process exports to it from its next look-up "
          f"(within 5 s); now bootstrap it (accumulo-export bootstrap ... --dest {args.dest} --dest-table "
          f"{args.dest_table}: it waits until every drain process acknowledged the registration)")
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

