"""``accumulo-export purge-tombstones``: reclaim a tombstone-mode destination's space, proved safe first
(:mod:`connector.snapshot.purge`: what may be purged, and why)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from connector.accumulo import AccumuloError
from connector.clusters_config import cluster
from connector.snapshot.errors import PurgeRefusedError
from connector.snapshot.purge import DEFAULT_GRACE_SECONDS, check_grace, purge_destination

from .common import UsageError, cluster_error
from .options import Help, check_table_name, source_and_destination_args
from .queue import source_queue


def register_purge_command(sub: Any) -> None:
    """Add ``purge-tombstones`` to the ``accumulo-export`` parser's subcommands."""
    p = sub.add_parser("purge-tombstones", formatter_class=Help,
                       help="turn a destination's tombstones that no late export can need into real deletes",
                       description="List the destination's tombstones, then keep those below the queue's "
                                   "watermark (the lowest seq still waiting in its outboxes, queue or dead letters), "
                                   "wait --grace seconds for writers that may still hold older exports, keep only "
                                   "those below the watermark read again near the grace's end too, and write a real "
                                   "delete at each kept tombstone's timestamp, then ask for a full compaction of the "
                                   "tablets holding those deletes (not waited for), which reclaims the space. It holds "
                                   "the destination table's lease (by its id) "
                                   "meanwhile, so no bootstrap or repair of it runs, and refuses a destination another "
                                   "queue feeds or whose bootstrap is unfinished (docs/operations.md: Tombstones).")
    source_and_destination_args(p)
    p.add_argument("--grace", type=float, default=DEFAULT_GRACE_SECONDS, metavar="SECONDS",
                   help="seconds between listing the tombstones and deleting them: at least twice the bound within "
                        "which a writer's copy of an export it read lands (a drain batch, a Spark attempt on a lost "
                        "executor, a late relay); a shorter one is refused")
    p.add_argument("--dry-run", action="store_true", help="list and count what would be purged; change nothing")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def cmd_purge(args: argparse.Namespace) -> int:
    if not args.dry_run:
        try:
            check_grace(args.grace)
        except PurgeRefusedError as exc:
            raise UsageError(f"--grace: {exc}") from None
    source, dest = cluster(args.source), cluster(args.dest)
    check_table_name(args.dest_table, "--dest-table", f"the destination {dest.describe()}")
    queue = source_queue(source, dest, args, create_dest_table=False)
    where = f"source {source.describe()} / destination {dest.describe()}"
    try:
        with source.connect() as a, dest.connect() as b:
            report = purge_destination(a, queue, b, args.dest_table, dest.label, grace=args.grace,
                                       dry_run=args.dry_run, progress=_say)
    except AccumuloError as exc:
        raise cluster_error(exc, where) from None
    print(json.dumps(report.to_json()) if args.json else report.describe())
    return 0


def _say(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)
