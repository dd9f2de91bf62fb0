"""Purging a destination's tombstones: turning the ones no late export can need into real deletes, proved first.

In tombstone mode (the default) a delete on B is a put of a tombstone at ``ts = seq``; it hides every older put of
the cell for good, even one that arrives after a full compaction (the compaction hazard:
:mod:`connector.export.tombstones`). Tombstones take space; a real delete at the same timestamp hides the same
versions and a full compaction removes both. It is safe once no put of the cell older than the tombstone can
still arrive. Those puts are the exports of commits older than the tombstone's, and they wait in three places
(:mod:`connector.transactions.watermark`: outboxes, the queue, its dead letters) or in a writer that read them
from one of those places and has not written them yet.

**The bound writers are held to** (:data:`~connector.accumulo.writer.LATE_WRITE_SECONDS`, B): a writer's copy of
an export lands, if ever, within B of the moment it read the export from where it waited. A drain's and a relay's
writers send a batch's frames, first or replayed after a lost connection, only within
:data:`~connector.accumulo.writer.EXPORT_HOLD_SECONDS` of its read (``send_deadline``): past it they drop the batch,
whose entries stay in the queue (:mod:`connector.queue.drain`) or whose cells a relay reads again
(:mod:`connector.transactions.relay`), and a drain deletes entries only when their export returned within it; every
flush of the gateway's writers fails after
:data:`~connector.accumulo.writer.WRITER_TIMEOUT_SECONDS` instead of retrying for ever. B is their sum. A purge's
grace must be at least :data:`~connector.accumulo.writer.MIN_PURGE_GRACE_SECONDS` (2 B): a shorter one is refused.

The proof, for a tombstone of cell c at seq T (c derives from one row R of A; R's commits have rising seqs), and an
export E of R at a seq s < T:

1. The tombstones are listed, then the queue's watermark is read (W1, ending at ``t1``); only the listed
   tombstones below its lowest waiting seq are candidates. A tombstone listed was written before W1, so the
   commit at T was visible then, and so was E. If E waited anywhere during W1, W1's lowest is at most s < T: not
   a candidate. Otherwise E had left every place before W1 read it: it was exported, or is held by a writer that
   read it before ``t1`` (a drain task whose entry another task exported and deleted meanwhile, a Spark attempt on
   a lost executor, a gateway's buffer, **a one-shot relay** that read R's outbox cell before R's own relay moved
   it and will add it to the queue again: finding 4 of issue 45). By the bound, each of those copies lands, in B
   or back in the queue, before ``t1 + B``. Only relays (of outbox cells, which are never written again once
   deleted) and requeues of dead letters put an export back where it waits, so after ``t1 + B`` E can wait again
   only in a copy put back before then.
2. The purge waits ``grace - B`` (its own monotonic clock; no clock is compared with another host's) and reads the
   watermark again (W2, from ``t2 >= t1 + B``); only candidates below W2's lowest waiting seq are kept too: a copy
   of E put back in the queue (step 1) and still there is seen now. A copy put back and drained before W2 was read
   by its drain before W2, and lands before ``t2 + B``.
3. The purge waits B more, so every copy any writer read before W2 has landed (where a delete at T hides it, or
   before the delete), checks again that no other queue feeds the table, and turns the kept tombstones into real
   deletes. One that a newer put replaced meanwhile gets a delete at T all the same: it hides only versions at or
   below T, which are older than that put.

Throughout, the purge holds the destination table's lease (:mod:`connector.snapshot.state`, keyed on the table's
identity, not on the name a connection gives it), so no bootstrap writes old versions and no ``verify --repair``
compacts or writes meanwhile, and it refuses a table whose bootstrap is unfinished under any name.

What the proof assumes, besides the bound: a dead letter is requeued by one process at a time (a requeue is not
held: its dead letter stays where the watermark looks until its entry is durable in the queue, and only a requeue
removes one), every drain of a queue translates an entry alike (so a drain never dead-letters an export another
drain exported), and each destination cell derives from one row of A (a table where verify found a cell two rows
imply is refused: :mod:`.shared_cells`). A copy of E
put back after ``t1 + B`` by a second requeuer, or by a drain refusing what another exported, is not covered.

Tombstones written after the listing wait for the next purge: a commit that became visible after W1 may carry a
seq below its lowest (a producer whose clock runs behind), and a writer may have read its row's older exports
after W1, which the grace does not cover.

Queues filled with ``ExportQueue.add`` rather than row transactions: the proof needs every later export of a cell
to carry a higher seq than the cell's tombstone, which only row transactions guarantee. Purge only if the
producers keep to that.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Connection
from connector.accumulo.writer import LATE_WRITE_SECONDS, MIN_PURGE_GRACE_SECONDS
from connector.export.tombstones import delete_cells, tombstones_below
from connector.queue import QueueConfig
from connector.queue.feeders import destination_feeders, feeder_of
from connector.transactions import Watermark, queue_watermark
from connector.transactions.watermark import WAITING_KINDS

from .errors import PurgeRefusedError
from .shared_cells import recorded_shared_cell
from .state import PURGE, BootstrapState, destination_id, process_identity, table_key, unfinished_bootstraps

#: seconds a purge waits between listing tombstones and deleting them (see the module's description)
DEFAULT_GRACE_SECONDS = max(600.0, MIN_PURGE_GRACE_SECONDS)
#: how often a purge in its grace looks whether it was stopped (and whether it still holds its lease)
STOP_CHECK_SECONDS = 2.0
STOPPED, GAVE_WAY = "stopped", "gave way"


@dataclass
class PurgeReport:
    """What a purge did. ``watermark``: what waited for the queue's destinations just after the tombstones were
    listed; ``second``: what waited when it was read again, near the grace's end (None on a dry run or when
    nothing was listed);
    ``horizon``: only tombstones with a seq below it were kept, the lower of the two readings' (None: every one,
    since nothing waited);
    ``listed``: tombstones found below the horizon (of those there when the purge listed them); ``deleted``:
    real deletes written for them (0 on a dry run); ``seconds``: the whole purge, the grace included;
    ``stopped``: the purge was stopped during its grace and deleted nothing (its tombstones wait for the next);
    ``gave_way``: it stopped because a bootstrap or repair of the table asked for its lease;
    ``tombstones``: all the tombstones it listed, ``oldest_tombstone``: the lowest of their timestamps (a tombstone's
    timestamp is its commit's seq: µs of the producer's clock; None: none listed); ``compacted``: a full compaction
    of the tablets holding its deletes was asked for (it runs on after the purge returns)."""

    destination: str
    watermark: Watermark
    listed: int = 0
    deleted: int = 0
    grace_seconds: float = 0.0
    seconds: float = 0.0
    dry_run: bool = False
    second: Watermark | None = None
    stopped: bool = False
    gave_way: bool = False
    tombstones: int = 0
    oldest_tombstone: int | None = None
    compacted: bool = False

    @property
    def horizon(self) -> int | None:
        return _lower(self.watermark.lowest, None if self.second is None else self.second.lowest)

    @property
    def pins(self) -> dict[str, int]:
        """What pins the horizon, per kind of what waits (outbox, queue_entry, dead_letter): the lowest seq of that
        kind in either reading (the horizon is the lowest of them). A destination not built yet pins no horizon:
        the purge holds its table's lease and refuses one whose bootstrap is unfinished."""
        lowest: dict[str, int] = {}
        for mark in (self.watermark, self.second):
            for pin in mark.pins if mark is not None else ():
                if pin.kind in WAITING_KINDS and pin.lowest is not None:
                    lowest[pin.kind] = min(lowest.get(pin.kind, pin.lowest), pin.lowest)
        return lowest

    def describe(self) -> str:
        below = "every tombstone (nothing waited)" if self.horizon is None else f"tombstones below seq {self.horizon}"
        done = (f"would turn {self.listed:,} into real deletes (dry run)" if self.dry_run
                else f"gave way to a bootstrap or repair: deleted none of the {self.listed:,} listed" if self.gave_way
                else f"stopped during the grace: deleted none of the {self.listed:,} listed" if self.stopped
                else f"turned {self.deleted:,} of {self.listed:,} listed into real deletes")
        return f"{self.destination}: {below}: {done} in {self.seconds:.1f} s"

    def to_json(self) -> dict[str, object]:
        return {"destination": self.destination, "horizon": self.horizon, "listed": self.listed,
                "deleted": self.deleted, "grace_seconds": self.grace_seconds, "seconds": round(self.seconds, 1),
                "dry_run": self.dry_run, "stopped": self.stopped, "gave_way": self.gave_way,
                "tombstones": self.tombstones, "waiting_outbox_cells": self.watermark.outbox,
                "waiting_entries": self.watermark.entries, "waiting_dead_letters": self.watermark.dead_letters,
                "compacted": self.compacted}


def check_grace(grace: float) -> None:
    """Refuse a grace shorter than the bound writers are held to, in one line (``PurgeRefusedError``)."""
    if not grace >= MIN_PURGE_GRACE_SECONDS:
        raise PurgeRefusedError(f"a grace of {grace:g} s is below the {MIN_PURGE_GRACE_SECONDS:g} s a purge needs "
                                f"(twice the {LATE_WRITE_SECONDS:g} s within which a writer's copy of an export "
                                "lands: connector.snapshot.purge); nothing was changed")


def purge_destination(a: Connection, queue: QueueConfig, dest: Connection, dest_table: str, dest_cluster: str, *,
                      grace: float = DEFAULT_GRACE_SECONDS, dry_run: bool = False,
                      progress: Callable[[str], None] | None = None,
                      stop: threading.Event | None = None) -> PurgeReport:
    """Turn the tombstones of ``dest_table`` (on ``dest``, the cluster named ``dest_cluster``) that no export of
    ``queue`` (on ``a``) can still need into real deletes, after proving it (the module's description). With
    ``dry_run``, list and count them, change nothing, and do not wait. ``PurgeRefusedError`` (nothing changed) for a
    grace below :data:`~connector.accumulo.writer.MIN_PURGE_GRACE_SECONDS`, a missing table, another queue feeding
    it, a cell of it that two rows of A imply (recorded by verify: :mod:`.shared_cells`), or an unfinished bootstrap
    of it; ``BootstrapError`` when a bootstrap, a purge or a repair of it runs, or
    the purge's lease was lost meanwhile. When ``stop`` is set during the grace the purge gives up within
    :data:`STOP_CHECK_SECONDS`, deletes nothing and releases the lease (``report.stopped``): a purge that deletes
    nothing changes nothing, so the proof has nothing to keep. So does it when a bootstrap or repair of the table
    asks for the lease (``report.gave_way`` too: :data:`~connector.snapshot.state.PREEMPT_SECONDS`)."""
    started = time.monotonic()
    say = progress or (lambda line: None)
    if not dry_run:
        check_grace(grace)
    destination = destination_id(dest_cluster, dest_table)
    if not dest.table_exists(dest_table):
        raise PurgeRefusedError(f"destination table {dest_table!r} does not exist on {dest_cluster}")
    key = table_key(dest, dest_table)
    _refuse_other_feeders(a, queue, dest, dest_table)
    _refuse_shared_cell(dest, dest_table)
    token = json.dumps({"owner": secrets.token_hex(8), "what": PURGE, "destination": destination,
                        **process_identity()}).encode()
    # the table's lease, whatever name reaches it, and the name's (a bootstrap of an older release takes only that)
    state = BootstrapState(a, queue, destination, token, table_key=key)
    state.acquire()  # no bootstrap writes old versions, no repair compacts, while the purge runs
    try:
        unfinished = unfinished_bootstraps(a, queue, destination, key)
        if unfinished:
            raise PurgeRefusedError(f"a bootstrap of {', '.join(unfinished)} is unfinished (rerun it, or forget it "
                                    "with 'accumulo-export bootstrap --forget'); purge once it has finished")
        say(f"listing the tombstones of {dest_table}")
        listed = list(tombstones_below(dest, dest_table, None))
        mark = queue_watermark(a, queue)  # after the listing: every tombstone listed was there before it
        report = PurgeReport(destination, mark, grace_seconds=0.0 if dry_run else grace, dry_run=dry_run)
        report.tombstones = sum(p.num_rows for p in listed)
        report.oldest_tombstone = min((pc.min(p.column("ts")).as_py() for p in listed if p.num_rows), default=None)
        pages = [_below(p, mark.lowest) for p in listed]
        report.listed = sum(p.num_rows for p in pages)
        say(f"{mark.describe()}: {report.listed:,} of {sum(p.num_rows for p in listed):,} tombstones are below it")
        if not dry_run and report.listed:
            _gave_up(report, _wait(grace - LATE_WRITE_SECONDS, state, say, f"{report.listed:,} tombstones listed; "
                                   f"waiting {grace:g} s for writers that may still hold older exports", stop))
        if report.stopped:
            say(f"{report.describe()}; the tombstones wait for the next purge")
        elif not dry_run and report.listed:
            # an old export put back where it waits during the grace (a late relay) holds its tombstone
            report.second = queue_watermark(a, queue)
            pages = [_below(p, report.second.lowest) for p in pages]
            report.listed = sum(p.num_rows for p in pages)
            say(f"read again: {report.second.describe()}: {report.listed:,} tombstones are below both readings")
            if report.listed:
                _gave_up(report, _wait(LATE_WRITE_SECONDS, state, say,
                                       "waiting for the copies writers read before that reading", stop))
            if report.listed and not report.stopped:
                _refuse_other_feeders(a, queue, dest, dest_table)
                _refuse_shared_cell(dest, dest_table)
                state.check_held()
                report.deleted = delete_cells(dest, dest_table, pages)
                report.compacted = _compact_where_deleted(dest, dest_table, pages)
    finally:
        state.release()
    report.seconds = time.monotonic() - started
    return report


def _compact_where_deleted(dest: Connection, dest_table: str, pages: list[pa.RecordBatch]) -> bool:
    """Ask for a full compaction of the tablets between the first and the last row deleted, without waiting: until
    one runs, the deletes and the tombstones they hide stay in the files and every full scan of B walks them (a
    stream purging for months would otherwise leave the space to Accumulo's own compactions, which reach a tablet's
    largest file ever more seldom). Safe at any time: the deletes hide only what the proof cleared."""
    rows = [pc.min_max(p.column("row")).as_py() for p in pages if p.num_rows]
    if not rows:
        return False
    first, last = min(r["min"] for r in rows), max(r["max"] for r in rows)
    # the start row is exclusive: a prefix of the first row sorts before it (b"" is the table's start)
    dest.compact_table(dest_table, start_row=first[:-1] or None, end_row=last, flush=True, wait=False)
    return True


def _gave_up(report: PurgeReport, why: str | None) -> None:
    """Record why a wait gave up (nothing is deleted then)."""
    report.stopped = why is not None
    report.gave_way = why == GAVE_WAY


def _refuse_other_feeders(a: Connection, queue: QueueConfig, dest: Connection, dest_table: str) -> None:
    mine = feeder_of(a, queue).queue_id
    others = [f.describe() for f in destination_feeders(dest, dest_table) if f.queue_id != mine]
    if others:
        raise PurgeRefusedError(f"{dest_table} is also fed by {', '.join(others)}: its tombstones may guard exports "
                                f"of that queue too, which this purge cannot see; nothing was changed")


def _refuse_shared_cell(dest: Connection, dest_table: str) -> None:
    shared = recorded_shared_cell(dest, dest_table)
    if shared:
        raise PurgeRefusedError(f"{dest_table}: {shared} (found by verify): the proof holds only for cells that each "
                                "derive from one row; nothing was changed")


def _lower(first: int | None, second: int | None) -> int | None:
    """The lower of two horizons (None: nothing waited, no bound)."""
    return first if second is None else second if first is None else min(first, second)


def _below(page: pa.RecordBatch, horizon: int | None) -> pa.RecordBatch:
    """The keys of ``page`` with ``ts < horizon`` (all of them when None)."""
    return page if horizon is None else page.filter(pc.less(page.column("ts"), horizon))


def _wait(seconds: float, state: BootstrapState, say: Callable[[str], None], line: str,
          stop: threading.Event | None = None) -> str | None:
    """Wait ``seconds``, saying ``line`` first and how long is left every minute; raise at once if the lease was
    lost. Within STOP_CHECK_SECONDS, why it gave up (``STOPPED``, ``GAVE_WAY``) when ``stop`` was set or a bootstrap
    or repair asked for the lease: the caller then deletes nothing. None: it waited all of ``seconds``."""
    deadline = time.monotonic() + seconds
    stop = stop or threading.Event()
    say(line)
    last_said = time.monotonic()
    while (left := deadline - time.monotonic()) > 0:
        if stop.wait(min(left, STOP_CHECK_SECONDS)):
            return STOPPED
        state.check()
        if state.asked_to_yield():
            return GAVE_WAY
        if deadline - time.monotonic() > 0 and time.monotonic() - last_said >= 60.0:
            last_said = time.monotonic()
            say(f"{deadline - time.monotonic():.0f} s of the wait left")
    return STOPPED if stop.is_set() else None
