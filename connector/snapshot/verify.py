"""Verify a destination against what A's rows imply, and repair it, while producers commit and the stream
drains.

**Two passes.** The first pass computes ``T(S(A))`` (:mod:`connector.snapshot.implied`) and compares it with
the destination per tablet range of the destination (:mod:`connector.snapshot.compare`: digests first, cell by
cell only where they differ). A difference may only be in flight: a commit the stream has not drained yet, or
one that landed after A was read. So the second pass waits until the queue no longer holds what it held when
the first pass ended (``settle_seconds`` at most), then reads A and the differing ranges again. A difference is
reported only if it is there in both passes with the destination's cell, the value A implies and the row's
version unchanged; the rest were in flight (a row that commits between the passes, say: a later verify
confirms its difference once the row is quiet).

**Why a confirmed difference is real**, without any bound on clocks: the destination held the same cell (same
timestamp and value, or the same absence) when the first pass ended, so every commit behind it was visible
before the second pass read A; that read gives each row at a version at least as new, and the row's snapshot
still disagrees.

**Repair** writes exactly the fixes, so that every later export still wins: a missing or different cell is
put at its row's version (a later commit has a higher seq), an unexpected cell is deleted at its own
timestamp, never "now" (it hides that cell and older versions only). A wrong cell B holds at a timestamp
newer than its row's version (written by hand: no export makes one), or a cell a newer delete marker hides,
cannot be fixed so without hiding a later export; such cells are counted as ``unrepaired``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import UPDATE_SCHEMA, Connection, Range
from connector.export import AccumuloExporter
from connector.export.tombstones import TOMBSTONE, DeleteMode
from connector.queue import QueueConfig
from connector.queue.layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from connector.queue.status import KEYS_ONLY

from .compare import ACTUAL_SCHEMA, KEY, CellDiff, compare, digests, expected_cells, split_by_range
from .functions import SnapshotSource
from .implied import SnapshotStats, bounds_range, implied_chunks, source_bounds, tablet_bounds

log = logging.getLogger(__name__)

#: how long the second pass waits for the queue to drain what it held after the first (seconds)
DEFAULT_SETTLE_SECONDS = 60.0
#: example differences kept per range and kind
DEFAULT_EXAMPLES = 5


@dataclass
class RangeResult:
    """One tablet range of the destination: its bounds, cells on each side, and the confirmed differences."""

    index: int
    start: bytes | None
    stop: bytes | None
    expected: int = 0
    actual: int = 0
    diffs: list[CellDiff] = field(default_factory=list)

    def to_json(self, examples: int) -> dict[str, Any]:
        def text(b: bytes | None) -> str | None:
            return None if b is None else b.decode("utf-8", "backslashreplace")

        kinds: dict[str, list[CellDiff]] = {"missing": [], "unexpected": [], "different": []}
        for d in self.diffs:
            kinds[d.kind].append(d)
        return {"range": self.index, "start": text(self.start), "stop": text(self.stop), "expected": self.expected,
                "actual": self.actual, **{k: len(v) for k, v in kinds.items()},
                "examples": {k: [d.to_json() for d in v[:examples]] for k, v in kinds.items() if v}}


@dataclass
class VerifyReport:
    """A verify: ranges compared and matched, cells on each side, the confirmed differences per range (with
    examples), those that were only in flight, what a repair wrote, and what A's side counted."""

    ranges: int = 0
    matched: int = 0
    expected: int = 0
    actual: int = 0
    results: list[RangeResult] = field(default_factory=list)
    in_flight: int = 0
    repaired: int = 0
    #: differences a repair could not fix without hiding later exports (README: Building B from A)
    unrepaired: int = 0
    #: queue entries still waiting when the second pass began (a drain into the destination not running?)
    pending: int = 0
    snapshot: SnapshotStats = field(default_factory=SnapshotStats)
    seconds: float = 0.0

    @property
    def differences(self) -> int:
        return sum(len(r.diffs) for r in self.results)

    def count(self, kind: str) -> int:
        return sum(1 for r in self.results for d in r.diffs if d.kind == kind)

    def to_json(self, examples: int = DEFAULT_EXAMPLES) -> dict[str, Any]:
        return {"ranges": self.ranges, "matched_ranges": self.matched, "expected_cells": self.expected,
                "actual_cells": self.actual, "differences": self.differences, "missing": self.count("missing"),
                "unexpected": self.count("unexpected"), "different": self.count("different"),
                "in_flight": self.in_flight, "repaired": self.repaired, "unrepaired": self.unrepaired,
                "pending_entries": self.pending,
                "rows": self.snapshot.rows, "failed_rows": self.snapshot.failed, "seconds": round(self.seconds, 2),
                "ranges_differing": [r.to_json(examples) for r in self.results if r.diffs]}


@dataclass(frozen=True)
class Destination:
    """Where verify looks: ``table`` on ``conn``, written with ``translator`` in ``delete_mode``."""

    conn: Connection
    table: str
    translator: str
    delete_mode: str = DeleteMode.DELETE.value


Progress = Callable[[str], None]


def verify_destination(a: Connection, table: str, source: SnapshotSource, queue: QueueConfig, dest: Destination, *,
                       repair: bool = False, settle_seconds: float = DEFAULT_SETTLE_SECONDS,
                       progress: Progress | None = None) -> VerifyReport:
    """Compare ``dest`` with what the rows of ``table`` on A imply (see the module's description); with
    ``repair``, write the fixes. ``progress(line)`` hears what each phase is doing."""
    started = time.monotonic()
    say = progress or (lambda line: None)
    report = VerifyReport()
    splits = dest.conn.list_splits(dest.table) if dest.conn.table_exists(dest.table) else []
    bounds = tablet_bounds(splits)
    report.ranges = len(bounds)
    say(f"pass 1: reading what the rows of {table} imply")
    expected, report.snapshot = _expected(a, table, source, queue, dest)
    report.expected = expected.num_rows
    by_range = split_by_range(expected, splits)
    e_counts, e_sums = digests(expected, splits)
    say(f"pass 1: comparing {len(bounds)} ranges of {dest.table} ({expected.num_rows:,} cells expected)")
    first: dict[int, list[CellDiff]] = {}
    for i, b in enumerate(bounds):
        actual = _actual(dest, b)
        report.actual += actual.num_rows
        counts, sums = digests(actual, splits)
        if counts[i] == e_counts[i] and sums[i] == e_sums[i]:
            report.matched += 1
            continue
        first[i] = compare(by_range.get(i, expected.schema.empty_table()), actual)
    if not any(first.values()):
        report.matched = report.ranges
        report.seconds = time.monotonic() - started
        return report
    report.pending = _settle(a, table, source, queue, settle_seconds, say)
    say(f"pass 2: {sum(map(len, first.values())):,} differences in {len(first)} ranges; reading again")
    expected, report.snapshot = _expected(a, table, source, queue, dest)
    by_range = split_by_range(expected, splits)
    confirmed: dict[int, list[CellDiff]] = {}
    seen = {d.key for diffs in first.values() for d in diffs}
    actual_counts = {}
    for i in first:
        actual = _actual(dest, bounds[i])
        actual_counts[i] = actual.num_rows
        second = compare(by_range.get(i, expected.schema.empty_table()), actual)
        # the same difference twice: B's cell, the value A implies and its row's version all unchanged (a row
        # that committed between the passes is in flight: a later verify confirms a difference once it is quiet)
        before = {_identity(d) for d in first[i]}
        confirmed[i] = [d for d in second if _identity(d) in before]
        seen |= {d.key for d in second}
    report.in_flight = len(seen - {d.key for diffs in confirmed.values() for d in diffs})
    report.results = [RangeResult(i, *bounds[i], by_range[i].num_rows if i in by_range else 0,
                                  actual_counts[i], confirmed[i]) for i in sorted(confirmed) if confirmed[i]]
    if repair and report.differences:
        diffs = [d for r in report.results for d in r.diffs]
        report.repaired, report.unrepaired = repair_cells(dest, diffs)
        say(f"repaired {report.repaired:,} cells" + (f"; {report.unrepaired:,} could not be" if report.unrepaired
                                                     else ""))
    report.seconds = time.monotonic() - started
    return report


def _identity(d: CellDiff) -> tuple[object, ...]:
    return d.key, d.kind, d.actual, d.ts, d.expected, d.version


def _expected(a: Connection, table: str, source: SnapshotSource, queue: QueueConfig,
              dest: Destination) -> tuple[pa.Table, SnapshotStats]:
    exporter = AccumuloExporter(dest.conn, dest.table, dest.translator)  # translation only: delete mode
    updates = []
    stats = SnapshotStats()
    for bounds in source_bounds(a, table, source):
        for _, chunk, chunk_stats in implied_chunks(a, table, bounds, source, queue, exporter):
            updates.append(chunk)
            stats += chunk_stats
    return expected_cells(updates), stats


def _actual(dest: Destination, bounds: tuple[bytes | None, bytes | None]) -> pa.Table:
    if not dest.conn.table_exists(dest.table):
        return ACTUAL_SCHEMA.empty_table()
    pages = list(dest.conn.scan_batches(dest.table, bounds_range(bounds), batch_size=10_000))
    return pa.Table.from_batches(pages).cast(ACTUAL_SCHEMA) if pages else ACTUAL_SCHEMA.empty_table()


def entries_written_before(conn: Connection, queue: QueueConfig, ms: int) -> int:
    """Queue entries whose timestamp (the server's clock when written) is at most ``ms``."""
    total = 0
    for page in conn.scan_batches(queue.table, queue.layout.queue_range(), columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)],
                                  iterators=[KEYS_ONLY], batch_size=10_000):
        total += pc.sum(pc.less_equal(page.column("ts"), ms)).as_py() or 0
    return total


def _settle(a: Connection, table: str, source: SnapshotSource, queue: QueueConfig, seconds: float,
            say: Progress) -> int:
    """Wait (at most ``seconds``) until every commit visible now has reached the destination's drain: the
    outbox cells the producer table holds now are relayed, then the queue's entries written until then are
    exported. Returns how many entries were still there."""
    deadline = time.monotonic() + seconds
    outbox = _outbox(a, table, source)
    while outbox and time.monotonic() < deadline:
        time.sleep(0.2)
        outbox &= _outbox(a, table, source)
    now_ms = int(time.time() * 1000)
    left = entries_written_before(a, queue, now_ms)
    if left:
        say(f"waiting for the drain to export the {left:,} entries the queue holds (at most {seconds:.0f} s)")
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = entries_written_before(a, queue, now_ms)
    return left


def _outbox(a: Connection, table: str, source: SnapshotSource) -> set[tuple[bytes, bytes, int]]:
    """The outbox cells of the producer table now (row, qualifier, timestamp)."""
    return {(c.row, c.cq, c.ts) for c in a.scan(table, source.rows, columns=[source.layout.outbox_family],
                                                  iterators=[KEYS_ONLY], batch_size=10_000)}


def repair_cells(dest: Destination, diffs: list[CellDiff]) -> tuple[int, int]:
    """Write the fixes of ``diffs`` into the destination so that every later export still wins: a missing or
    different cell put at its row's version, an unexpected cell deleted at its own timestamp (a tombstone in
    tombstone mode). A cell B holds at a timestamp newer than its row's version, or one a delete marker newer
    than that version hides, cannot be fixed so (a later export with a seq in between would lose): those are
    left and counted. Returns (cells fixed, cells left)."""
    rows: dict[str, list[Any]] = {name: [] for name in UPDATE_SCHEMA.names}
    tombstones = dest.delete_mode == DeleteMode.TOMBSTONE.value
    left = 0
    puts = []
    for d in diffs:
        if d.kind == "unexpected":
            ts, value, delete = d.ts, (TOMBSTONE if tombstones else None), not tombstones
        elif d.ts is not None and d.version is not None and d.ts > d.version:
            left += 1  # B's wrong value is newer than the row's version: a put at the version would not show
            continue
        else:
            ts, value, delete = d.version, d.expected, False
            puts.append(d)
        for name, v in zip(UPDATE_SCHEMA.names, (d.row, d.cf, d.cq, d.cv, ts, value, delete), strict=True):
            rows[name].append(v)
    cells = pa.record_batch([pa.array(rows[f.name], f.type) for f in UPDATE_SCHEMA], schema=UPDATE_SCHEMA)
    if cells.num_rows:
        with dest.conn.batch_writer(dest.table) as writer:
            writer.add_cells(cells)
    hidden = _still_missing(dest, puts)
    return cells.num_rows - hidden, left + hidden


def _still_missing(dest: Destination, puts: list[CellDiff]) -> int:
    """How many of the cells just put still do not show their value (a newer delete marker hides them)."""
    if not puts:
        return 0
    wanted = {d.key: d.expected for d in puts}
    seen = {(c.row, c.cf, c.cq, c.cv): c.value
            for c in dest.conn.batch_scan(dest.table, [Range.exact_row(r) for r in {d.row for d in puts}])}
    return sum(1 for key, value in wanted.items() if seen.get(key) != value)


__all__ = ["DEFAULT_EXAMPLES", "DEFAULT_SETTLE_SECONDS", "Destination", "KEY", "RangeResult", "VerifyReport",
           "entries_written_before", "repair_cells", "verify_destination"]
