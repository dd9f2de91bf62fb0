"""A destination cell fed by more than one row of A: found where the code sees what each row implies (verify, and
so a bootstrap's final check), recorded on the destination table, and refused by a purge (DESIGN.md: "One row per
destination cell").

A purge proves a tombstone from the seqs of the one row its cell derives from: that row's commits have rising
seqs, so every older export of the cell was visible when the tombstone was listed. Two rows feeding one cell break
that: the other row's older commit may become visible later. Verify computes every cell A's rows imply, each with
the row it derives from, so it sees two rows implying one cell; it records the first such cell in the table
property :data:`SHARED_CELL_PROPERTY` (one line naming the cell and both rows), and a later verify that reads every
row and finds none removes it. The purge reads the property and refuses while it is there. What no code sees: a
cell that two rows fed at different times (one row's old export, another's current state), or a destination no
verify has read since its translator changed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import AccumuloSecurityError, Connection

from .native_digest import keys_distinct

log = logging.getLogger(__name__)

#: the table property recording a destination cell that two rows of A imply (Accumulo keeps ``table.custom.*``)
SHARED_CELL_PROPERTY = "table.custom.accumulo-export.shared-cell"
_KEY = ["row", "cf", "cq", "cv"]


def shared_cell(updates: Iterable[pa.RecordBatch], table: str) -> str | None:
    """One line naming a destination cell that two rows of producer ``table`` imply, and two of those rows, from
    implied updates (columns row, cf, cq, cv, source: :data:`~connector.snapshot.implied.IMPLIED_SCHEMA`); None
    when each cell derives from one row."""
    batches = [b.select([*_KEY, "source"]) for b in updates if b.num_rows]
    if not batches:
        return None
    cells = pa.Table.from_batches(batches)
    if keys_distinct(cells):  # the common case, natively: one update per cell
        return None
    per_cell = cells.group_by(_KEY).aggregate([("source", "count_distinct")])
    shared = per_cell.filter(pc.greater(per_cell.column("source_count_distinct"), 1))
    if not shared.num_rows:
        return None
    first = shared.slice(0, 1).to_pylist()[0]
    same = pc.and_(pc.and_(pc.equal(cells.column("row"), first["row"]), pc.equal(cells.column("cf"), first["cf"])),
                   pc.and_(pc.equal(cells.column("cq"), first["cq"]), pc.equal(cells.column("cv"), first["cv"])))
    one, other = sorted(pc.unique(cells.filter(same).column("source")).to_pylist())[:2]
    visibility = f", visibility {first['cv']!r}" if first["cv"] else ""
    return (f"destination cell (row {first['row']!r}, family {first['cf']!r}, qualifier {first['cq']!r}{visibility}) "
            f"is implied by two rows of producer table {table!r}: {one!r} and {other!r}")


def recorded_shared_cell(conn: Connection, table: str) -> str | None:
    """The shared cell recorded on destination ``table`` (None: none)."""
    return conn.table_properties(table).get(SHARED_CELL_PROPERTY) or None


def record_shared_cell(conn: Connection, table: str, line: str | None) -> None:
    """Record ``line`` on destination ``table`` (None: remove the record), if it changes anything. A gateway user
    not allowed to change the table's properties (a verify only reads) is warned about, not failed."""
    if recorded_shared_cell(conn, table) == line:
        return
    try:
        if line is None:
            conn.remove_table_property(table, SHARED_CELL_PROPERTY)
        else:
            conn.set_table_property(table, SHARED_CELL_PROPERTY, line)
    except AccumuloSecurityError as exc:
        log.warning("could not record on %s that %s (a purge cannot refuse it then): %s", table,
                    line or "no cell is shared", exc)
