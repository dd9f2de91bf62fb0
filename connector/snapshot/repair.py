"""Repairing a destination: writing the fixes of differences verify confirmed, so that B shows what A implies,
every later export still wins, and what Accumulo makes of the writes does not depend on their order.

Accumulo's rules that shape it: a delete at T hides every version at or below T (a put at T too, whichever
came first) until a full compaction drops both; two puts of one key at the same timestamp with other content
are non-deterministic. So a repair never puts a key at a timestamp where B may hold, or later receive, that key
with other content, and never relies on a put that a delete marker hides:

1. a missing cell, or one whose wrong value is older than its row's version V, is put at V (a later commit of
   the row has a higher seq and wins; a copy of the export at V that lands later carries that very value);
2. a wrong value at or above V is first deleted at its own timestamp (hidden at once); no export of the row put
   that value there (the export at V carries the right one, later ones do not exist yet), so no copy can bring it
   back once a full compaction dropped both;
3. an unexpected cell at ``ts`` (A implies nothing there): in delete mode, deleted at ``ts``; in tombstone mode,
   hidden by a tombstone at ``ts + 1``, never at ``ts`` itself. The cell may be a stale put of an export of its row
   R at seq ``ts`` whose later delete B lost (a purge whose premise failed, a delete-mode past), and a copy of that
   export may still land: it lands at ``ts``, exactly where a tombstone at ``ts`` would tie with it (Accumulo keeps
   either). A copy of an export lands at ``ts + 1`` only if R committed at ``ts + 1`` a put of this cell; R's
   latest commit implies the cell absent and is later than ``ts`` (R committed at ``ts``), so such a commit lies
   between them, and its copy is as stale as the first: it would show with or without the repair. Later commits
   of R have seqs above R's version, itself above ``ts``: the tombstone hides none of them;
4. a cell more than :data:`AHEAD_MICROS` ahead of this host's clock (a write by hand with a wrong timestamp) is
   no export's put, and no copy of one can land: it is dropped by a full compaction of its tablet that filters
   out every cell at or above the earliest such timestamp there (before the versioning iterator, so the version
   under it shows again). Nothing is written at its timestamp: a delete or a tombstone there would hide every
   later export until the clock passed it. Then a cell that should hold a value gets it at its row's version;
5. what cannot show without it (the cells of 2., puts a delete marker still hides) waits for a full compaction
   of the destination's tablets that hold them, which drops the delete markers and what they hide; then those
   cells are put again.

Whatever still does not show after that (a newer export deleted the cell meanwhile) is counted as left.
A repair holds the destination table's lease (:func:`connector.snapshot.state.table_lease`, taken by verify): no
tombstone purge runs beside its compactions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from connector.accumulo import UPDATE_SCHEMA, Connection, IteratorSetting, Range
from connector.export.core import current_seq
from connector.export.tombstones import TOMBSTONE

from .compare import CellDiff
from .native_digest import range_indices

Key = tuple[bytes, bytes, bytes, bytes]

#: a cell this far ahead of this host's clock (in seqs: microseconds) is taken for a stray no export wrote (an hour:
#: more than any producer's clock may run ahead); one less far ahead is repaired as a possible stale export
AHEAD_MICROS = 3600 * 1_000_000
#: the priority of the filter a repair's compaction drops cells ahead with: below the versioning iterator's 20
AHEAD_FILTER_PRIORITY = 10


@dataclass
class RepairResult:
    """What a repair did: ``repaired`` cells that now show what A implies, ``left`` cells that still do not (a
    newer export got there first: a later verify tells), ``compacted`` tablets of B fully compacted for it;
    ``unshown``: the differences of the cells left."""

    repaired: int = 0
    left: int = 0
    compacted: int = 0
    unshown: list[CellDiff] = field(default_factory=list)


@dataclass(frozen=True)
class _Write:
    """One cell to write: put ``value`` (None: delete) at ``ts``; ``shows``: what a scan must then show for the
    cell (None: nothing)."""

    diff: CellDiff
    ts: int
    value: bytes | None
    shows: bytes | None


def repair_cells(conn: Connection, table: str, diffs: Sequence[CellDiff], *, tombstones: bool = False,
                 splits: Sequence[bytes] | None = None) -> RepairResult:
    """Write the fixes of ``diffs`` into ``table`` (see the module's description); ``tombstones``: the
    destination is written in tombstone mode; ``splits``: its split rows (looked up when not given)."""
    now: list[_Write] = []
    later: list[_Write] = []  # after a full compaction of their tablets
    horizon = current_seq() + AHEAD_MICROS
    ahead = [d for d in diffs if d.ts is not None and d.ts > horizon]
    for d in diffs:
        if d.ts is not None and d.ts > horizon:  # dropped by the compaction; then the right value, if any
            if d.kind != "unexpected":
                assert d.version is not None and d.expected is not None
                later.append(_Write(d, d.version, d.expected, d.expected))
            continue
        if d.kind == "unexpected":
            assert d.ts is not None
            # never at the cell's own timestamp, where a copy of the export that put it would tie
            now.append(_Write(d, d.ts + 1, TOMBSTONE, None) if tombstones else _Write(d, d.ts, None, None))
            continue
        assert d.version is not None and d.expected is not None
        put = _Write(d, d.version, d.expected, d.expected)
        if d.ts is not None and d.ts >= d.version:  # a put at the version would tie with or lose to B's value
            now.append(_Write(d, d.ts, None, None))
            later.append(put)
        else:
            now.append(put)
    _write(conn, table, now)
    shown = _shown(conn, table, [w.diff for w in now])
    later += [w for w in now if w.value is not None and shown.get(w.diff.key) != w.shows]
    result = RepairResult()
    if later or ahead:
        splits = conn.list_splits(table) if splits is None else splits
        result.compacted = _compact(conn, table, [w.diff.row for w in later], ahead, splits)
        _write(conn, table, later)
    shown = _shown(conn, table, diffs)  # a tombstone shows nothing: the destination's scans filter it out
    wanted = {d.key: (None if d.kind == "unexpected" else d.expected) for d in diffs}
    result.unshown = [d for d in diffs if shown.get(d.key) != wanted[d.key]]
    result.left = sum(1 for key, value in wanted.items() if shown.get(key) != value)
    result.repaired = len(wanted) - result.left
    return result


def _write(conn: Connection, table: str, writes: Sequence[_Write]) -> None:
    rows: dict[str, list[Any]] = {name: [] for name in UPDATE_SCHEMA.names}
    for w in writes:
        d = w.diff
        for name, v in zip(UPDATE_SCHEMA.names, (d.row, d.cf, d.cq, d.cv, w.ts, w.value, w.value is None),
                           strict=True):
            rows[name].append(v)
    if writes:
        with conn.batch_writer(table) as writer:
            writer.add_cells(pa.record_batch([pa.array(rows[f.name], f.type) for f in UPDATE_SCHEMA],
                                             schema=UPDATE_SCHEMA))


def _shown(conn: Connection, table: str, diffs: Sequence[CellDiff]) -> dict[Key, bytes]:
    """What a scan shows now for the cells of ``diffs`` (absent: not shown)."""
    keys = {d.key for d in diffs}
    if not keys:
        return {}
    return {(c.row, c.cf, c.cq, c.cv): c.value
            for c in conn.batch_read(table, [Range.exact_row(r) for r in {k[0] for k in keys}])
            if (c.row, c.cf, c.cq, c.cv) in keys}


def _compact(conn: Connection, table: str, rows: Sequence[bytes], ahead: Sequence[CellDiff],
             splits: Sequence[bytes]) -> int:
    """Fully compact each tablet of ``table`` holding one of ``rows`` or of the cells ``ahead`` (and wait), those
    of the latter dropping every cell at or above the earliest timestamp of theirs in the tablet; returns how
    many tablets."""
    ordered = sorted(splits)

    def tablets(keys: Sequence[bytes]) -> list[int]:
        return range_indices(pa.array(list(keys), pa.binary()), ordered).to_pylist() if keys else []

    drop_from: dict[int, int] = {}
    for i, d in zip(tablets([d.row for d in ahead]), ahead, strict=True):
        assert d.ts is not None
        drop_from[i] = min(d.ts, drop_from.get(i, d.ts))
    for i in sorted(set(tablets(rows)) | set(drop_from)):  # Accumulo compacts the tablets overlapping (start, end]
        iterators = [] if i not in drop_from else [IteratorSetting(
            AHEAD_FILTER_PRIORITY, "repairDropAhead", "org.apache.accumulo.core.iterators.user.TimestampFilter",
            {"start": f"LONG{drop_from[i]}", "startInclusive": "true", "negate": "true"})]
        conn.compact_table(table, ordered[i - 1] if i > 0 else None, ordered[i] if i < len(ordered) else None,
                           iterators=iterators, flush=True, wait=True)
    return len(set(tablets(rows)) | set(drop_from))
