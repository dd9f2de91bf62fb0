"""``accumulo-export wait --seq S``: read-your-writes across clusters. An application that committed (it has the
seq ``RowTransactions.run`` returned) waits until the commit's exports are on every destination of the queue,
then reads its own change on B (:mod:`connector.transactions.watermark`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from connector.accumulo import AccumuloError
from connector.clusters_config import cluster
from connector.transactions import WaitTimeout, Watermark, wait_for_seq

from .common import EXIT_WAIT_TIMED_OUT, UsageError, cluster_error
from .options import Help, int_at_least, queue_args
from .queue import stored_config


def register_wait_command(sub: Any) -> None:
    """Add ``wait`` to the ``accumulo-export`` parser's subcommands."""
    w = sub.add_parser("wait", formatter_class=Help, help="wait until a commit's exports are on every destination",
                       description="Return once the commit with sequence number --seq (the seq a row transaction's "
                                   "run returned) is on every destination of the queue: nothing at or below it "
                                   "waits in the outboxes feeding the queue, in the queue or in its dead letters, "
                                   "and every destination registered with the queue is built (a bootstrap of it "
                                   "finished since its registration). "
                                   f"Exit status 0 then, {EXIT_WAIT_TIMED_OUT} after --timeout seconds (saying how "
                                   "far the watermark got).")
    queue_args(w)
    w.add_argument("--seq", type=int_at_least(0), required=True, help="the commit's sequence number")
    w.add_argument("--timeout", type=float, default=60.0, help="seconds to wait at most")
    w.add_argument("--json", action="store_true", help="print the watermark reached as JSON")


def cmd_wait(args: argparse.Namespace) -> int:
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be a number of seconds > 0, got {args.timeout}")
    gateway = cluster(args.cluster)
    try:
        with gateway.connect() as conn:
            queue = stored_config(conn, args, gateway.describe())
            try:
                mark = wait_for_seq(conn, queue, args.seq, timeout=args.timeout)
            except WaitTimeout as exc:
                print(f"accumulo-export: {exc}", file=sys.stderr)
                return EXIT_WAIT_TIMED_OUT
    except AccumuloError as exc:
        raise cluster_error(exc, gateway.describe()) from None
    _print(mark, args)
    return 0


def _print(mark: Watermark, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps({"seq": args.seq, "reached": True, "watermark": mark.seq, "outbox_cells": mark.outbox,
                          "entries": mark.entries, "dead_letters": mark.dead_letters}))
    else:
        print(f"seq {args.seq} is on every destination of queue {args.queue} ({mark.describe()})")
