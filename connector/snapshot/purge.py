"""Purging a destination's tombstones: turning the ones no late export can need into real deletes, proved first.

In tombstone mode (the default) a delete on B is a put of a tombstone at ``ts = seq``; it hides every older put of
the cell for good, even one that arrives after a full compaction (the compaction hazard:
:mod:`connector.export.tombstones`). Tombstones take space; a real delete at the same timestamp hides the same
versions and a full compaction removes both. It is safe once no put of the cell older than the tombstone can
still arrive. Those puts are the exports of commits older than the tombstone's, and they wait in three places
(:mod:`connector.transactions.watermark`) or in a writer that read them and has not written them yet.

The proof, for a tombstone of cell c at seq T (c derives from one row R of A; R's commits have rising seqs):

1. The tombstones are listed, then, at ``t0``, the queue's watermark is computed; only the listed tombstones
   below its lowest waiting seq L are kept. A tombstone listed was written before ``t0``, so the commit at T
   was visible then, and so was every commit of R before it, at a seq below T < L: none was waiting at ``t0``.
   Each had been exported, or was held by a writer that had read it before ``t0`` (a drain task whose entry
   another task exported and deleted meanwhile, a Spark attempt on a lost executor, a gateway's buffer).
2. The purge then waits ``grace`` seconds (its own monotonic clock; no clock is compared with another host's),
   holding the destination's bootstrap lease, so no bootstrap writes old versions meanwhile, and refusing a
   destination whose bootstrap is unfinished. **Assumption**: no writer holds a read export longer than
   ``grace``; the default, 10 minutes, is many times a drain batch's life, and a writer held up longer by an
   outage still lands before the full compaction that would make it visible, unless that compaction also
   runs within the outage.
3. Only the tombstones kept become deletes. One that a newer put replaced meanwhile gets a delete at T all the
   same: it hides only versions at or below T, which are older than that put.

Tombstones written after the listing wait for the next purge: a commit that became visible after ``t0`` may
carry a seq below L (a producer whose clock runs behind), and a writer may have read its row's older exports after
``t0``, which the grace does not cover.

Queues filled with ``ExportQueue.add`` rather than row transactions: the proof needs every later export of a cell
to carry a higher seq than the cell's tombstone, which only row transactions guarantee. Purge only if the
producers keep to that.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Connection
from connector.export.tombstones import delete_cells, tombstones_below
from connector.queue import QueueConfig
from connector.queue.feeders import destination_feeders, feeder_of
from connector.transactions import Watermark, queue_watermark

from .errors import PurgeRefusedError
from .state import BootstrapState, destination_id, process_identity

#: seconds a purge waits between listing tombstones and deleting them (see the module's assumption)
DEFAULT_GRACE_SECONDS = 600.0


@dataclass
class PurgeReport:
    """What a purge did. ``watermark``: what waited for the queue's destinations just after the tombstones were
    listed;
    ``horizon``: only tombstones with a seq below it were listed (None: every one, since nothing waited);
    ``listed``: tombstones found below the horizon (of those there when the purge listed them); ``deleted``:
    real deletes written for them (0 on a dry run); ``seconds``: the whole purge, the grace included."""

    destination: str
    watermark: Watermark
    listed: int = 0
    deleted: int = 0
    grace_seconds: float = 0.0
    seconds: float = 0.0
    dry_run: bool = False

    @property
    def horizon(self) -> int | None:
        return self.watermark.lowest

    def describe(self) -> str:
        below = "every tombstone (nothing waited)" if self.horizon is None else f"tombstones below seq {self.horizon}"
        done = (f"would turn {self.listed:,} into real deletes (dry run)" if self.dry_run
                else f"turned {self.deleted:,} of {self.listed:,} listed into real deletes")
        return f"{self.destination}: {below}: {done} in {self.seconds:.1f} s"

    def to_json(self) -> dict[str, object]:
        return {"destination": self.destination, "horizon": self.horizon, "listed": self.listed,
                "deleted": self.deleted, "grace_seconds": self.grace_seconds, "seconds": round(self.seconds, 1),
                "dry_run": self.dry_run, "waiting_outbox_cells": self.watermark.outbox,
                "waiting_entries": self.watermark.entries, "waiting_dead_letters": self.watermark.dead_letters}


def purge_destination(a: Connection, queue: QueueConfig, dest: Connection, dest_table: str, dest_cluster: str, *,
                      grace: float = DEFAULT_GRACE_SECONDS, dry_run: bool = False,
                      progress: Callable[[str], None] | None = None) -> PurgeReport:
    """Turn the tombstones of ``dest_table`` (on ``dest``, the cluster named ``dest_cluster``) that no export of
    ``queue`` (on ``a``) can still need into real deletes, after proving it (the module's description). With
    ``dry_run``, list and count them, change nothing, and do not wait. ``PurgeRefusedError`` (nothing changed) for a
    missing table, another queue feeding it, or an unfinished bootstrap of it; ``BootstrapError`` when a bootstrap
    of it runs or its lease was lost meanwhile."""
    started = time.monotonic()
    say = progress or (lambda line: None)
    destination = destination_id(dest_cluster, dest_table)
    if not dest.table_exists(dest_table):
        raise PurgeRefusedError(f"destination table {dest_table!r} does not exist on {dest_cluster}")
    mine = feeder_of(a, queue).queue_id
    others = [f.describe() for f in destination_feeders(dest, dest_table) if f.queue_id != mine]
    if others:
        raise PurgeRefusedError(f"{dest_table} is also fed by {', '.join(others)}: its tombstones may guard exports "
                                f"of that queue too, which this purge cannot see; nothing was changed")
    token = json.dumps({"owner": secrets.token_hex(8), "what": "a tombstone purge", **process_identity()}).encode()
    state = BootstrapState(a, queue, destination, token)
    state.acquire()  # no bootstrap writes old versions while the purge runs
    try:
        if state.plan() is not None:
            raise PurgeRefusedError(f"a bootstrap of {destination} is unfinished (rerun it, or forget it with "
                                    "'accumulo-export bootstrap --forget'); purge once it has finished")
        say(f"listing the tombstones of {dest_table}")
        listed = list(tombstones_below(dest, dest_table, None))
        mark = queue_watermark(a, queue)  # after the listing: every tombstone listed was there before it
        report = PurgeReport(destination, mark, grace_seconds=0.0 if dry_run else grace, dry_run=dry_run)
        pages = [_below(p, mark.lowest) for p in listed]
        report.listed = sum(p.num_rows for p in pages)
        say(f"{mark.describe()}: {report.listed:,} of {sum(p.num_rows for p in listed):,} tombstones are below it")
        if not dry_run and report.listed:
            _wait(grace, state, say, report.listed)
            state.check_held()
            report.deleted = delete_cells(dest, dest_table, pages)
    finally:
        state.release()
    report.seconds = time.monotonic() - started
    return report


def _below(page: pa.RecordBatch, horizon: int | None) -> pa.RecordBatch:
    """The keys of ``page`` with ``ts < horizon`` (all of them when None)."""
    return page if horizon is None else page.filter(pc.less(page.column("ts"), horizon))


def _wait(grace: float, state: BootstrapState, say: Callable[[str], None], listed: int) -> None:
    """Wait ``grace`` seconds, saying so every minute; raise at once if the lease was lost."""
    deadline = time.monotonic() + grace
    say(f"{listed:,} tombstones listed; waiting {grace:g} s for writers that may still hold older exports")
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 60.0))
        state.check()
        if deadline - time.monotonic() > 0:
            say(f"{deadline - time.monotonic():.0f} s of the grace left")
