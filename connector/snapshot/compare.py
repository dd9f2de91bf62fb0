"""Comparing what A implies with what a destination holds, per tablet range of the destination.

The cheap check first: a range's digest (count + order-independent sum of content hashes, natively) on both
sides; only a range whose digests differ is compared cell by cell (an Arrow hash join on the cell's key).
Content is row, family, qualifier, visibility and value: the timestamp is not compared, since a cell the
stream wrote carries the seq of the commit that last changed it, and the same cell from a snapshot the
version of its row, both right.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from .native_digest import keys_distinct, range_digests, range_indices

KEY = ["row", "cf", "cq", "cv"]
#: the expected side: a cell, its row's version and the A row it derives from
EXPECTED_SCHEMA = pa.schema([("row", pa.binary()), ("cf", pa.binary()), ("cq", pa.binary()), ("cv", pa.binary()),
                             ("value", pa.binary()), ("ts", pa.int64()), ("source", pa.binary())])
#: the actual side: a cell as the destination holds it
ACTUAL_SCHEMA = pa.schema([("row", pa.binary()), ("cf", pa.binary()), ("cq", pa.binary()), ("cv", pa.binary()),
                           ("ts", pa.int64()), ("value", pa.binary())])


@dataclass(frozen=True)
class CellDiff:
    """One cell where the destination differs from what A implies. ``kind``: ``missing`` (A implies it, B
    lacks it), ``unexpected`` (B holds it, A implies nothing there) or ``different`` (another value).
    ``expected``/``version``/``source``: the value A implies, its row's version and that row;
    ``actual``/``ts``: the value and timestamp B holds."""

    kind: str
    row: bytes
    cf: bytes
    cq: bytes
    cv: bytes
    expected: bytes | None
    version: int | None
    source: bytes | None
    actual: bytes | None
    ts: int | None

    @property
    def key(self) -> tuple[bytes, bytes, bytes, bytes]:
        return self.row, self.cf, self.cq, self.cv

    def to_json(self) -> dict[str, object]:
        def text(b: bytes | None) -> str | None:
            return None if b is None else b.decode("utf-8", "backslashreplace")

        return {"kind": self.kind, "row": text(self.row), "cf": text(self.cf), "cq": text(self.cq),
                "cv": text(self.cv), "expected": text(self.expected), "version": self.version,
                "source": text(self.source), "actual": text(self.actual), "ts": self.ts}


def expected_cells(updates: Iterable[pa.RecordBatch]) -> pa.Table:
    """The cells a set of implied updates leaves visible: puts only, minus cells a delete at the same or a
    newer timestamp hides (at equal timestamps a delete wins, as in Accumulo); of several puts of one cell,
    the newest."""
    batches = [b for b in updates if b.num_rows]
    if not batches:
        return EXPECTED_SCHEMA.empty_table()
    table = pa.Table.from_batches(batches)
    if not pc.any(table.column("delete")).as_py() and keys_distinct(table):
        return table.select(EXPECTED_SCHEMA.names).cast(EXPECTED_SCHEMA)  # puts only, one per key: all visible
    puts = table.filter(pc.invert(table.column("delete")))
    deletes = table.filter(table.column("delete")).select([*KEY, "ts"])
    puts = puts.select([*KEY, "value", "ts", "source"])
    if deletes.num_rows:
        newest_delete = deletes.group_by(KEY).aggregate([("ts", "max")])
        joined = puts.join(newest_delete, keys=KEY, join_type="left outer")
        hidden = pc.fill_null(pc.greater_equal(joined.column("ts_max"), joined.column("ts")), False)
        puts = joined.filter(pc.invert(hidden)).drop_columns(["ts_max"])
    newest = puts.group_by(KEY).aggregate([("ts", "max")])
    puts = puts.join(newest, keys=KEY).filter(pc.equal(pc.field("ts"), pc.field("ts_max"))).drop_columns(["ts_max"])
    return puts.select(EXPECTED_SCHEMA.names).cast(EXPECTED_SCHEMA)


def split_by_range(table: pa.Table, splits: Sequence[bytes], only: Sequence[int] | None = None) -> dict[int, pa.Table]:
    """The rows of ``table`` per tablet range of ``splits`` (only the ranges that hold some; of those, only the
    ranges ``only`` names when given)."""
    if not table.num_rows or (only is not None and not only):
        return {}
    index = range_indices(table.column("row").combine_chunks(), splits)
    out = {}
    wanted = None if only is None else set(only)
    for i in pc.unique(index).to_pylist():
        if wanted is None or i in wanted:
            out[i] = table.filter(pc.equal(index, i))
    return out


def digests(cells: pa.Table | Iterable[pa.RecordBatch], splits: Sequence[bytes]) -> tuple[list[int], list[int]]:
    """Per tablet range: (counts, hash sums) of the cells of ``cells``, a table or batches taken one at a time."""
    counts, sums = [0] * (len(splits) + 1), [0] * (len(splits) + 1)
    for batch in cells.to_batches() if isinstance(cells, pa.Table) else cells:
        c, s = range_digests(batch.select(["row", "cf", "cq", "cv", "value"]), splits)
        counts = [a + b for a, b in zip(counts, c, strict=True)]
        sums = [(a + b) % (1 << 64) for a, b in zip(sums, s, strict=True)]
    return counts, sums


def compare(expected: pa.Table, actual: pa.Table) -> list[CellDiff]:
    """Cell by cell: every cell where ``actual`` (:data:`ACTUAL_SCHEMA`) differs from ``expected``
    (:data:`EXPECTED_SCHEMA`), in key order."""
    e = expected.select([*KEY, "value", "ts", "source"]).rename_columns([*KEY, "e_value", "e_ts", "source"])
    a = actual.select([*KEY, "value", "ts"]).rename_columns([*KEY, "a_value", "a_ts"])
    joined = e.join(a, keys=KEY, join_type="full outer")
    differs = pc.invert(pc.fill_null(pc.equal(joined.column("e_value"), joined.column("a_value")), False))
    joined = joined.filter(differs).sort_by([(k, "ascending") for k in KEY])
    out = []
    for r in joined.to_pylist():
        kind = "missing" if r["a_value"] is None else "unexpected" if r["e_value"] is None else "different"
        out.append(CellDiff(kind, r["row"], r["cf"], r["cq"], r["cv"], r["e_value"], r["e_ts"], r["source"],
                            r["a_value"], r["a_ts"]))
    return out
