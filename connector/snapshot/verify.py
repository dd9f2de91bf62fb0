"""Verify a destination against what A's rows imply, and repair it, while producers commit and the stream
drains.

**Two passes.** The first pass computes ``T(S(A))`` (:mod:`connector.snapshot.implied`) and compares it with
the destination per tablet range of the destination (:mod:`connector.snapshot.compare`: digests first, cell by
cell only where they differ). A difference may only be in flight: a commit the stream has not drained yet, or
one that landed after A was read. So the second pass waits until the outbox cells and queue entries that were
there when the first pass ended are relayed and exported (:mod:`connector.snapshot.settle`: by content, never
by timestamps), then reads A and the differing ranges again. A difference is reported only if it is there in
both passes with the destination's cell, the value A implies and the row's version unchanged; the rest were
in flight (a row that commits between the passes, say: a later verify confirms its difference once the row is
quiet).

**Why a confirmed difference is real**, without any bound on clocks: the destination held the same cell (same
timestamp and value, or the same absence) when the first pass ended, so every commit behind it was visible
before the second pass read A; that read gives each row at a version at least as new, and the row's snapshot
still disagrees. B is read after A, though, and an absence has no timestamp: a row committing in between could
put a cell and hide it again (its export at V, then the next commit's tombstone) with B looking unchanged. So
a difference whose row's version moved on by the time B was read is in flight too (its row is read again after
B), and so is a cell that does not show a repair because its row committed again meanwhile.

**What a repair may change is only what verify proved wrong.** A row whose snapshot failed (the function
raised, a serializer or the translator refused what it gave) implies cells nobody knows, so B's cells that no
row implies may be that row's: a range of the destination holding such a cell, or a difference of such a row,
is *unrepairable*: reported with the rows and their errors, and left untouched. A destination that another
queue or another producer table also feeds (recorded on the destination, :mod:`connector.queue.feeders`) is
refused unless ``other_feeders="keep"``: then only the cells this producer table implies are compared, and B's
other cells are left alone. The repair itself (:mod:`connector.snapshot.repair`) writes so that later exports
still win and the result does not depend on the order of writes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import takewhile
from typing import Any

import pyarrow as pa

from connector.accumulo import Connection, Range
from connector.accumulo.summaries import visibility_summary
from connector.export import AccumuloExporter
from connector.export.tombstones import DeleteMode, checked_mode, prepare_destination
from connector.queue import QueueConfig
from connector.queue.feeders import destination_feeders, queue_id
from connector.transactions.targets import recorded_sources

from .compare import ACTUAL_SCHEMA, KEY, CellDiff, compare, digests, expected_cells, split_by_range
from .errors import VerifyRefusedError
from .functions import SnapshotSource
from .implied import SnapshotStats, bounds_range, implied_chunks, source_bounds, tablet_bounds
from .repair import Key, repair_cells
from .rows import read_row_chunks
from .settle import settle
from .shared_cells import record_shared_cell, shared_cell
from .state import table_lease

log = logging.getLogger(__name__)

#: how long the second pass waits for the queue to drain what it held after the first (seconds)
DEFAULT_SETTLE_SECONDS = 60.0
#: example differences kept per range and kind
DEFAULT_EXAMPLES = 5
#: what verify does with a destination other queues or producer tables also feed
OTHER_FEEDERS = ("refuse", "keep")


@dataclass
class RangeResult:
    """One tablet range of the destination: its bounds, cells on each side, the confirmed differences, and why
    a repair must leave it (``unrepairable``; None: it may be repaired)."""

    index: int
    start: bytes | None
    stop: bytes | None
    expected: int = 0
    actual: int = 0
    diffs: list[CellDiff] = field(default_factory=list)
    unrepairable: str | None = None

    def to_json(self, examples: int) -> dict[str, Any]:
        def text(b: bytes | None) -> str | None:
            return None if b is None else b.decode("utf-8", "backslashreplace")

        kinds: dict[str, list[CellDiff]] = {"missing": [], "unexpected": [], "different": []}
        for d in self.diffs:
            kinds[d.kind].append(d)
        return {"range": self.index, "start": text(self.start), "stop": text(self.stop), "expected": self.expected,
                "actual": self.actual, **{k: len(v) for k, v in kinds.items()}, "unrepairable": self.unrepairable,
                "examples": {k: [d.to_json() for d in v[:examples]] for k, v in kinds.items() if v}}


@dataclass
class VerifyReport:
    """A verify: ranges of the destination compared and matched by digest, cells on each side, the confirmed
    differences per range (with examples), those that were only in flight, what a repair wrote, and what A's
    side counted (``snapshot``: rows read, rows that failed with their first errors)."""

    ranges: int = 0
    matched: int = 0
    expected: int = 0
    actual: int = 0
    results: list[RangeResult] = field(default_factory=list)
    in_flight: int = 0
    repaired: int = 0
    #: differences a repair wrote but that do not show (a newer export got there first: verify again)
    unrepaired: int = 0
    #: tablets of the destination a repair compacted (to drop delete markers that hid what it put)
    compacted: int = 0
    #: outbox cells and queue entries still waiting when the second pass began (a drain not running?)
    pending: int = 0
    snapshot: SnapshotStats = field(default_factory=SnapshotStats)
    seconds: float = 0.0
    #: a destination cell two rows of A imply, and both rows (one line; None: none), recorded on the table so that
    #: a purge refuses it (:mod:`connector.snapshot.shared_cells`)
    shared_cell: str | None = None

    @property
    def differences(self) -> int:
        return sum(len(r.diffs) for r in self.results)

    @property
    def unrepairable(self) -> int:
        """Ranges holding differences that are not proved (rows failed): left untouched by a repair."""
        return sum(1 for r in self.results if r.unrepairable)

    @property
    def failed_rows(self) -> int:
        return self.snapshot.failed

    @property
    def clean(self) -> bool:
        """Every row was read and snapshotted, and no difference is left."""
        return not self.failed_rows and not self.unrepairable and (not self.differences or (
            self.repaired == self.differences and not self.unrepaired))

    def count(self, kind: str) -> int:
        return sum(1 for r in self.results for d in r.diffs if d.kind == kind)

    def to_json(self, examples: int = DEFAULT_EXAMPLES) -> dict[str, Any]:
        return {"ranges": self.ranges, "matched_ranges": self.matched, "expected_cells": self.expected,
                "actual_cells": self.actual, "differences": self.differences, "missing": self.count("missing"),
                "unexpected": self.count("unexpected"), "different": self.count("different"),
                "in_flight": self.in_flight, "repaired": self.repaired, "unrepaired": self.unrepaired,
                "unrepairable_ranges": self.unrepairable, "compacted_tablets": self.compacted,
                "pending_entries": self.pending, "rows": self.snapshot.rows, "failed_rows": self.snapshot.failed,
                "failed_examples": list(self.snapshot.errors), "seconds": round(self.seconds, 2),
                "shared_cell": self.shared_cell,
                "ranges_differing": [r.to_json(examples) for r in self.results if r.diffs]}


@dataclass(frozen=True)
class Destination:
    """Where verify looks: ``table`` on ``conn``, written with ``translator`` in ``delete_mode`` (None: the mode
    the table records, else the one its filter implies: :func:`~connector.export.tombstones.checked_mode`)."""

    conn: Connection
    table: str
    translator: str
    delete_mode: str | None = None


Progress = Callable[[str], None]


def check_destination(a: Connection, table: str, queue: QueueConfig, dest: Destination,
                      other_feeders: str = "refuse") -> None:
    """Refuse (``VerifyRefusedError``, one line) what verify cannot judge soundly: a destination table that does
    not exist, a producer table whose rows the gateway's user cannot read whole (:func:`check_rows_readable`),
    or (unless ``other_feeders="keep"``) a destination that another queue or producer table also feeds."""
    if other_feeders not in OTHER_FEEDERS:
        raise VerifyRefusedError(f"other_feeders must be one of {', '.join(OTHER_FEEDERS)}, not {other_feeders!r}")
    if not dest.conn.table_exists(dest.table):
        closest = dest.conn.closest_table(dest.table)
        raise VerifyRefusedError(f"destination table {dest.table!r} does not exist on {dest.conn.address()}"
                                 + (f" (did you mean {closest!r}?)" if closest else ""))
    check_rows_readable(a, table)
    if other_feeders == "keep":
        return
    ours = queue_id(a, queue)
    others = [f.describe() for f in destination_feeders(dest.conn, dest.table) if f.queue_id != ours]
    others += [f"producer table {t!r} (through queue {queue.qid!r})"
               for t in recorded_sources(a, queue.table, queue.layout.config_row) if t != table]
    if others:
        raise VerifyRefusedError(
            f"destination table {dest.table!r} is also fed by {', '.join(others[:5])}: verify compares it with "
            f"what producer table {table!r} alone implies, so their cells would count as unexpected (and a "
            "repair would delete them); with --other-feeders keep only the cells this table implies are "
            "compared and repaired")


def check_rows_readable(a: Connection, table: str) -> None:
    """Refuse (``VerifyRefusedError``) unless the gateway's user reads every row of the producer table whole:
    a cell whose visibility it cannot read is left out of the row without a word, and what the row implies
    would be computed from part of it (a repair would then write wrong values, or delete right ones). Known
    from the table's visibility summaries (:mod:`connector.accumulo.summaries`)."""
    summary = visibility_summary(a, table)
    if summary.hidden:
        labels = ", ".join(f"{expr!r} ({cells:,} cells)" for expr, cells in sorted(summary.hidden.items())[:5])
        raise VerifyRefusedError(f"the gateway's user cannot read every cell of producer table {table!r}: it lacks "
                                 f"the labels of {labels}, so rows would be read in part; give it those "
                                 "authorizations (or use a gateway whose user has them)")
    if not summary.complete:
        raise VerifyRefusedError(f"cannot tell whether the gateway's user reads every row of producer table "
                                 f"{table!r} whole: {summary.gaps()}. Set it up with 'accumulo-export tx init "
                                 f"--table {table}' (or RowTransactions(conn, {table!r}).init()), then compact "
                                 "it once so that files written before count")


def verify_destination(a: Connection, table: str, source: SnapshotSource, queue: QueueConfig, dest: Destination, *,
                       repair: bool = False, settle_seconds: float = DEFAULT_SETTLE_SECONDS,
                       other_feeders: str = "refuse", progress: Progress | None = None,
                       lease_held: bool = False) -> VerifyReport:
    """Compare ``dest`` with what the rows of ``table`` on A imply (see the module's description); with
    ``repair``, write the fixes of what was proved wrong, holding the destination table's lease
    (:func:`~connector.snapshot.state.table_lease`: ``BootstrapError`` while a purge or a bootstrap of it runs)
    unless ``lease_held`` (the caller holds it: a bootstrap's final check). ``progress(line)`` hears what each phase
    is doing. ``VerifyRefusedError`` for a missing destination table or one with other feeders
    (``other_feeders``)."""
    started = time.monotonic()
    say = progress or (lambda line: None)
    check_destination(a, table, queue, dest, other_feeders)
    dest = replace(dest, delete_mode=checked_mode(dest.conn, dest.table, dest.delete_mode).value)  # never a default
    keep_others = other_feeders == "keep"
    report = VerifyReport()
    splits = dest.conn.list_splits(dest.table)
    bounds = tablet_bounds(splits)
    report.ranges = len(bounds)
    say(f"pass 1: reading what the rows of {table} imply, and the digests of {dest.table}'s {len(bounds)} tablet "
        "ranges")
    # the destination's digests are read beside A: each side waits on its own servers most of the time
    stop = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="verify-destination") as pool:
        dest_digests = pool.submit(_actual_digests, dest, bounds, splits, stop)
        try:
            expected, report.snapshot, failed, report.shared_cell = _expected(a, table, source, queue, dest)
        except BaseException:
            stop.set()  # the destination's read stops at its next page rather than going on for nothing
            raise
        actual_digests = dest_digests.result()
    report.expected = expected.num_rows
    report.actual = sum(count for count, _ in actual_digests)
    if report.shared_cell is not None or not failed:  # with rows failed, a cell they share is not known
        record_shared_cell(dest.conn, dest.table, report.shared_cell)
    if report.shared_cell is not None:
        say(f"{report.shared_cell}: a purge of {dest.table}'s tombstones is refused while that holds")
    e_counts, e_sums = digests(expected, splits)
    differing = [i for i, (count, total) in enumerate(actual_digests) if (count, total) != (e_counts[i], e_sums[i])]
    report.matched = report.ranges - len(differing)
    say(f"pass 1: {report.matched} of {len(bounds)} tablet ranges of {dest.table} match by digest "
        f"({expected.num_rows:,} cells expected); comparing the other {len(differing)} cell by cell")
    by_range = split_by_range(expected, splits, only=differing)
    first: dict[int, list[CellDiff]] = {}
    for i in differing:  # read again: what the first read held was digested, not kept
        first[i] = _compare(by_range.get(i, expected.schema.empty_table()), _actual(dest, bounds[i]), keep_others)
    if not any(first.values()):
        report.matched = report.ranges
        report.seconds = time.monotonic() - started
        return report
    settled = settle(a, table, source, queue, settle_seconds, say)
    report.pending = settled.outbox + settled.entries
    say(f"pass 2: {sum(map(len, first.values())):,} differences in {len(first)} ranges; reading again")
    expected, report.snapshot, failed_again, _ = _expected(a, table, source, queue, dest)
    failed |= failed_again
    by_range = split_by_range(expected, splits, only=list(first))
    confirmed: dict[int, list[CellDiff]] = {}
    seen = {d.key for diffs in first.values() for d in diffs}
    actual_counts = {}
    for i in first:
        actual = _actual(dest, bounds[i])
        actual_counts[i] = actual.num_rows
        second = _compare(by_range.get(i, expected.schema.empty_table()), actual, keep_others)
        # the same difference twice: B's cell, the value A implies and its row's version all unchanged (a row
        # that committed between the passes is in flight: a later verify confirms a difference once it is quiet)
        before = {_identity(d) for d in first[i]}
        confirmed[i] = [d for d in second if _identity(d) in before]
        seen |= {d.key for d in second}
    # B was read after A: a row that committed in between may have changed B's cell and back to how the first
    # pass saw it (a cell put by the export at the row's version, then hidden by the next commit's tombstone).
    # A row whose version moved on since is in flight
    moved = _moved(a, table, source, [d for diffs in confirmed.values() for d in diffs])
    confirmed = {i: [d for d in diffs if d.key not in moved] for i, diffs in confirmed.items()}
    report.in_flight = len(seen - {d.key for diffs in confirmed.values() for d in diffs})
    report.results = [RangeResult(i, *bounds[i], by_range[i].num_rows if i in by_range else 0, actual_counts[i],
                                  confirmed[i], _unproved(confirmed[i], failed))
                      for i in sorted(confirmed) if confirmed[i]]
    repairable = [d for r in report.results if not r.unrepairable for d in r.diffs]
    if repair and repairable:
        prepare_destination(dest.conn, dest.table, dest.delete_mode)  # a repair writes: shape checked, mode recorded
        # the table's lease (unless the caller holds it: a bootstrap's final check): no purge turns tombstones into
        # deletes that the repair's compactions would drop, no bootstrap writes meanwhile
        lease = None if lease_held else table_lease(a, queue, dest.conn, dest.table, "a repair")
        if lease is not None:
            lease.acquire()
        try:
            # a row that committed again since the passes read it is in flight, and is read again now, under the
            # lease: before it, a purge may have turned that newer commit's tombstone into a delete and compacted
            # it away, and a put at the old version would then show (the simulation's schedule 1104006170)
            stale = _moved(a, table, source, repairable)
            fixed = repair_cells(dest.conn, dest.table, [d for d in repairable if d.key not in stale], splits=splits,
                                 tombstones=dest.delete_mode == DeleteMode.TOMBSTONE.value)
        finally:
            if lease is not None:
                lease.release()
        # a cell that does not show the fix because its row committed again (after the second pass read A) is in
        # flight: the newer export may hide the repair's write, as it should
        unshown = _moved(a, table, source, fixed.unshown)
        moved = stale | unshown
        for r in report.results:
            r.diffs = [d for d in r.diffs if d.key not in moved]
        report.results = [r for r in report.results if r.diffs]
        report.in_flight += len(moved)
        report.repaired, report.compacted = fixed.repaired, fixed.compacted
        report.unrepaired = fixed.left - len(unshown)
        say(f"repaired {report.repaired:,} cells" + (f" (after a full compaction of {fixed.compacted} tablets)"
                                                      if fixed.compacted else "")
            + (f"; {len(moved):,} whose rows committed again meanwhile are in flight" if moved else "")
            + (f"; {report.unrepaired:,} do not show the fix (a newer export got there first?)"
               if report.unrepaired else ""))
    if repair and report.unrepairable:
        say(f"left {report.unrepairable} ranges untouched: {report.snapshot.failed:,} rows of {table} could not be "
            "snapshotted, so what they imply on the destination is unknown")
    report.seconds = time.monotonic() - started
    return report


def _moved(a: Connection, table: str, source: SnapshotSource, diffs: Sequence[CellDiff]) -> set[Key]:
    """The keys of ``diffs`` whose row of A committed since the version the difference was read at (read again
    now, each row whole at one version as the passes read them; a row gone counts as moved)."""
    rows = {d.source: d.version for d in diffs if d.source is not None and d.version is not None}
    now: dict[bytes, int] = {}
    for row in rows:
        for chunk in read_row_chunks(a, table, Range.exact_row(row), source.layout):
            now.update(zip(chunk.rows.to_pylist(), chunk.versions.to_pylist(), strict=True))
    return {d.key for d in diffs if d.source in rows and now.get(d.source) != d.version}


def _unproved(diffs: list[CellDiff], failed: set[bytes]) -> str | None:
    """Why a range's differences are not proved (None: they are): a row it may derive from failed."""
    if not failed:
        return None
    suspects = sum(1 for d in diffs if d.kind == "unexpected" or d.source in failed)
    if not suspects:
        return None
    return (f"{suspects} of its differences may derive from the {len(failed)} rows of A whose snapshot failed "
            "(what those rows imply is unknown)")


def _compare(expected: pa.Table, actual: pa.Table, keep_others: bool) -> list[CellDiff]:
    diffs = compare(expected, actual)
    return [d for d in diffs if d.kind != "unexpected"] if keep_others else diffs


def _identity(d: CellDiff) -> tuple[object, ...]:
    return d.key, d.kind, d.actual, d.ts, d.expected, d.version


def _expected(a: Connection, table: str, source: SnapshotSource, queue: QueueConfig,
              dest: Destination) -> tuple[pa.Table, SnapshotStats, set[bytes], str | None]:
    """The cells A's rows imply, the counters, the rows that failed, and a cell two rows imply (None: none)."""
    exporter = AccumuloExporter(dest.conn, dest.table, dest.translator)  # translation only: delete mode
    updates = []
    stats = SnapshotStats()
    failed: set[bytes] = set()
    for bounds in source_bounds(a, table, source):
        for _, chunk, chunk_stats, chunk_failed in implied_chunks(a, table, bounds, source, queue, exporter):
            updates.append(chunk)
            stats += chunk_stats
            failed.update(chunk_failed)
    return expected_cells(updates), stats, failed, shared_cell(updates, table)


def _actual_digests(dest: Destination, bounds: list[tuple[bytes | None, bytes | None]],
                    splits: Sequence[bytes], stop: threading.Event) -> list[tuple[int, int]]:
    """Per tablet range of the destination, in order: the number of cells it holds and their digest, read a
    page at a time (a range's cells are never all in memory); given up once ``stop`` is set."""
    out: list[tuple[int, int]] = []
    for i, b in enumerate(bounds):
        pages = takewhile(lambda _: not stop.is_set(),
                          dest.conn.scan_batches(dest.table, bounds_range(b), batch_size=10_000))
        counts, sums = digests((page.cast(ACTUAL_SCHEMA) for page in pages), splits)
        if stop.is_set():
            break
        out.append((counts[i], sums[i]))
    return out


def _actual(dest: Destination, bounds: tuple[bytes | None, bytes | None]) -> pa.Table:
    pages = list(dest.conn.scan_batches(dest.table, bounds_range(bounds), batch_size=10_000))
    return pa.Table.from_batches(pages).cast(ACTUAL_SCHEMA) if pages else ACTUAL_SCHEMA.empty_table()


__all__ = ["DEFAULT_EXAMPLES", "DEFAULT_SETTLE_SECONDS", "Destination", "KEY", "OTHER_FEEDERS", "RangeResult",
           "VerifyReport", "check_destination", "check_rows_readable", "verify_destination"]
