"""A destination cell fed by more than one row of A (DESIGN.md: "One row per destination cell"): a purge proves a
tombstone from the seqs of the one row its cell derives from, so it cannot prove a cell two rows feed. Verify sees
every cell A's rows imply with the row it derives from: it records such a cell on the destination table, naming
the cell and both rows, and a purge refuses the table in one line, deleting nothing, until a verify finds none
(connector/snapshot/shared_cells.py). On real Accumulo."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pytest

from connector.accumulo import Cell
from connector.jobs import LocalEngine, run_drain
from connector.snapshot import purge as purge_module
from connector.snapshot.errors import PurgeRefusedError
from connector.snapshot.implied import IMPLIED_SCHEMA
from connector.snapshot.purge import purge_destination
from connector.snapshot.shared_cells import SHARED_CELL_PROPERTY, shared_cell

from .test_bootstrap import commit
from .test_purge import _tombstones
from .test_verify_repair import built, verify

ONE_CELL = f"{__name__}:one_cell_snapshot"


def one_cell_snapshot(row: bytes, cells: Sequence[Cell]) -> list[tuple[str, dict]]:
    """A translator's input that maps every row to one destination cell (the user's mistake under test)."""
    return [("all", {"old": [], "new": [{"row": "shared", "cf": "f", "cq": "q", "value": "v"}]})]


def _implied(*cells: tuple[bytes, bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"row": row, "cf": b"f", "cq": b"q", "cv": b"", "ts": 1, "value": b"v",
                                        "delete": False, "source": source} for row, source in cells],
                                      schema=IMPLIED_SCHEMA)


def test_shared_cell_names_the_cell_and_two_rows_and_only_when_two_rows_imply_it():
    assert shared_cell([_implied((b"x", b"a"), (b"y", b"b"))], "t") is None
    assert shared_cell([_implied((b"x", b"a"), (b"x", b"a"))], "t") is None, "one row implying a cell twice"
    line = shared_cell([_implied((b"x", b"b")), _implied((b"y", b"c"), (b"x", b"a"))], "t")
    assert line == ("destination cell (row b'x', family b'f', qualifier b'q') is implied by two rows of producer "
                    "table 't': b'a' and b'b'")


@pytest.mark.cluster
def test_a_purge_refuses_a_destination_where_verify_found_a_cell_two_rows_imply(scenario, monkeypatch):
    monkeypatch.setattr(purge_module, "MIN_PURGE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(purge_module, "LATE_WRITE_SECONDS", 0.0)
    txs, dest = built(scenario, {"x001": 1, "x002": 1})
    commit(txs, scenario, "x001", 2)  # the cell at count 1 is now a tombstone: something a purge would delete
    txs.flush()
    run_drain(LocalEngine(), scenario.job())
    a, b = scenario.conn_a, scenario.conn_b
    before = _tombstones(b, dest)
    assert before

    report = verify(scenario, dest, snapshot=ONE_CELL)
    with pytest.raises(PurgeRefusedError) as refused:
        purge_destination(a, scenario.queue, b, dest, "B", grace=0)
    message = str(refused.value)
    assert "\n" not in message and "b'x001'" in message and "b'x002'" in message and "b'shared'" in message, message
    assert message.endswith("nothing was changed"), message
    assert _tombstones(b, dest) == before, "the refused purge deleted nothing"
    assert report.shared_cell is not None and report.to_json()["shared_cell"] == report.shared_cell
    assert b.table_properties(dest)[SHARED_CELL_PROPERTY] == report.shared_cell

    # a verify that reads every row and finds no shared cell lifts the record: the purge runs again
    assert verify(scenario, dest).shared_cell is None
    assert SHARED_CELL_PROPERTY not in b.table_properties(dest)
    assert purge_destination(a, scenario.queue, b, dest, "B", grace=0).deleted == len(before)
    txs.close()
