"""Repairing a destination: writing the fixes of differences verify confirmed, so that B shows what A implies,
every later export still wins, and what Accumulo makes of the writes does not depend on their order.

Accumulo's rules that shape it: a delete at T hides every version at or below T (a put at T too, whichever
came first) until a full compaction drops both; two puts of one key at the same timestamp with other content
are non-deterministic. So a repair never puts a key at a timestamp where B may hold that key with other
content, and never relies on a put that a delete marker hides:

1. a missing cell, or one whose wrong value is older than its row's version, is put at the row's version (a
   later commit of the row has a higher seq and wins); an unexpected cell is deleted at its own timestamp;
2. a wrong value at or above the row's version is first deleted at its own timestamp (hidden at once);
3. what cannot show without it (those cells, puts a delete marker still hides, and in tombstone mode the
   cells deleted in 1.) waits for a full compaction of the destination's tablets that hold them, which drops
   the delete markers and what they hide; then those cells are put (the value at the row's version, or a
   tombstone at the deleted cell's own timestamp).

Whatever still does not show after that (a newer export deleted the cell meanwhile) is counted as left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from connector.accumulo import UPDATE_SCHEMA, Connection, Range
from connector.export.tombstones import TOMBSTONE

from .compare import CellDiff
from .native_digest import range_indices

Key = tuple[bytes, bytes, bytes, bytes]


@dataclass
class RepairResult:
    """What a repair did: ``repaired`` cells that now show what A implies, ``left`` cells that still do not (a
    newer export got there first: a later verify tells), ``compacted`` tablets of B fully compacted for it."""

    repaired: int = 0
    left: int = 0
    compacted: int = 0


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
    for d in diffs:
        if d.kind == "unexpected":
            assert d.ts is not None
            now.append(_Write(d, d.ts, None, None))
            if tombstones:
                later.append(_Write(d, d.ts, TOMBSTONE, None))
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
    if later:
        splits = conn.list_splits(table) if splits is None else splits
        result.compacted = _compact(conn, table, [w.diff.row for w in later], splits)
        _write(conn, table, later)
    shown = _shown(conn, table, diffs)  # a tombstone shows nothing: the destination's scans filter it out
    wanted = {d.key: (None if d.kind == "unexpected" else d.expected) for d in diffs}
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
            for c in conn.batch_scan(table, [Range.exact_row(r) for r in {k[0] for k in keys}])
            if (c.row, c.cf, c.cq, c.cv) in keys}


def _compact(conn: Connection, table: str, rows: Sequence[bytes], splits: Sequence[bytes]) -> int:
    """Fully compact each tablet of ``table`` holding one of ``rows`` (and wait); returns how many."""
    ordered = sorted(splits)
    tablets = sorted(set(range_indices(pa.array(list(rows), pa.binary()), ordered).to_pylist()))
    for i in tablets:  # Accumulo compacts the tablets overlapping (start row, end row]
        conn.compact_table(table, ordered[i - 1] if i > 0 else None, ordered[i] if i < len(ordered) else None,
                           flush=True, wait=True)
    return len(tablets)
