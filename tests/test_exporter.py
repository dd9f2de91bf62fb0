"""AccumuloExporter on a real Accumulo (cluster B): the convergence guarantee and the compaction hazard."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.accumulo import Mutation, Range
from connector.export import (
    AccumuloExporter,
    DeleteMode,
    ExportRejectedError,
    SequencedExport,
    TranslationError,
)
from connector.export.tombstones import delete_cells, tombstones_below

from .conftest import run_in_threads, unique_table

_ids = itertools.count()


def state(conn, table, prefix=b""):
    return {(c.row, c.cf, c.cq, c.cv): (c.value, c.ts) for c in conn.scan(table, Range.prefix(prefix))}


def update(seq, old, new, key="k"):
    return SequencedExport(key, {"old": old, "new": new}, seq)


def cell(row, value="1", cq="q"):
    return {"row": row, "cf": "f", "cq": cq, "value": value}


@pytest.fixture(scope="module")
def dest(accumulo):
    conn = accumulo["b"].connect()
    name = unique_table("dest")
    exporter = AccumuloExporter(conn, name, "difference").ensure_table()
    yield conn, name, exporter
    exporter.close()
    conn.delete_table(name, missing_ok=True)
    conn.close()


def test_recipe_cases_end_to_end_at_ts_seq(dest):
    conn, table, exporter = dest
    p = f"recipe{next(_ids)}:"
    exporter.export([update(10, [], [cell(p + "a")])])
    assert state(conn, table, p.encode()) == {(p.encode() + b"a", b"f", b"q", b""): (b"1", 10)}
    exporter.export([update(11, [cell(p + "a")], [cell(p + "a")])])  # same old and new: nothing
    assert state(conn, table, p.encode())[(p.encode() + b"a", b"f", b"q", b"")][1] == 10
    exporter.export([update(12, [cell(p + "a")], [cell(p + "b"), cell(p + "a")])])  # a -> ab puts b
    exporter.export([update(13, [cell(p + "b"), cell(p + "a")], [cell(p + "c"), cell(p + "b")])])  # ab -> bc
    got = state(conn, table, p.encode())
    assert {k[0]: v for k, v in got.items()} == {p.encode() + b"b": (b"1", 12), p.encode() + b"c": (b"1", 13)}
    exporter.export([update(14, [cell(p + "b"), cell(p + "c")], [])])  # removal deletes all
    assert state(conn, table, p.encode()) == {}


def serial_history(rng: random.Random, n_tx: int, n_keys: int, prefix: str):
    """Serial transactions over an inverted index: key k's value v lives at row <v>, cq <k>."""
    current: dict[str, str | None] = {}
    exports = []
    for seq in range(1, n_tx + 1):
        k = f"k{rng.randrange(n_keys)}"
        new_value = None if rng.random() < 0.15 else f"v{rng.randrange(6)}"
        old_value = current.get(k)
        old = [cell(prefix + old_value, k, cq=k)] if old_value else []
        new = [cell(prefix + new_value, k, cq=k)] if new_value else []
        exports.append(update(seq * 3, old, new, key=k))
        current[k] = new_value
    expected = {(prefix + v).encode() + b"|" + k.encode() for k, v in current.items() if v}
    return exports, expected


def flat(conn, table, prefix):
    return {c.row + b"|" + c.cq for c in conn.scan(table, Range.prefix(prefix.encode()))}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), n_tx=st.integers(1, 40), batch=st.integers(1, 12), dup=st.floats(0, 0.5),
       crash=st.floats(0, 0.4))
def test_any_permutation_duplication_batching_and_crash_converges(dest, seed, n_tx, batch, dup, crash):
    conn, table, exporter = dest
    rng = random.Random(seed)
    prefix = f"prop{next(_ids)}:"
    exports, expected = serial_history(rng, n_tx, 5, prefix)
    arrivals = exports + [e for e in exports if rng.random() < dup]
    rng.shuffle(arrivals)
    for i in range(0, len(arrivals), batch):
        chunk = arrivals[i:i + batch]
        if rng.random() < crash:
            exporter.export(chunk[: rng.randrange(len(chunk) + 1)])  # partial write, then "crash" and retry
        exporter.export(chunk)
    assert flat(conn, table, prefix) == expected


def test_1000_random_transactions_over_100_keys_end_with_the_last_values(dest):
    conn, table, exporter = dest
    rng = random.Random(1234)
    prefix = f"many{next(_ids)}:"
    last: dict[str, str] = {}
    exports = []
    for seq in range(1, 1001):
        k = f"{prefix}{rng.randrange(100):03d}"
        v = f"value-{seq}"
        exports.append(update(seq, [cell(k, last[k])] if k in last else [], [cell(k, v)], key=k))
        last[k] = v
    rng.shuffle(exports)
    for i in range(0, len(exports), 37):
        exporter.export(exports[i:i + 37])
    cells = list(conn.scan(table, Range.prefix(prefix)))
    assert len(cells) == len(last) == len({c.row for c in cells})
    assert {c.row.decode(): c.value.decode() for c in cells} == last


def test_several_keys_in_one_batch_and_overwrites(dest):
    conn, table, exporter = dest
    p = f"multi{next(_ids)}:"
    exporter.export([update(5, [], [cell(p + "x", "1")], key="a"), update(6, [], [cell(p + "y", "2")], key="b"),
                     update(7, [cell(p + "x", "1")], [cell(p + "x", "3")], key="a")])
    exporter.export([update(5, [], [cell(p + "x", "1")], key="a")])  # stale duplicate arrives late
    got = {k[0]: v for k, v in state(conn, table, p.encode()).items()}
    assert got == {p.encode() + b"x": (b"3", 7), p.encode() + b"y": (b"2", 6)}


def test_translation_error_writes_nothing_of_the_batch(dest):
    conn, table, exporter = dest
    p = f"bad{next(_ids)}:"
    with pytest.raises(TranslationError):
        exporter.export([update(1, [], [cell(p + "ok")]), SequencedExport("k", {"new": "garbage"}, 2)])
    assert state(conn, table, p.encode()) == {}


def test_rejected_mutation_names_rows_and_exporter_stays_usable(accumulo):
    conn = accumulo["b"].connect()
    name = unique_table("rej")
    exporter = AccumuloExporter(conn, name, "cells").ensure_table()
    conn.set_table_property(name, "table.constraint.2",
                            "org.apache.accumulo.core.data.constraints.VisibilityConstraint")
    import time
    time.sleep(1.5)
    with pytest.raises(ExportRejectedError, match="secretrow"):
        exporter.export([SequencedExport("k", {"row": "secretrow", "cf": "f", "cq": "q", "cv": "HIDDEN",
                                               "value": "v"}, 4)])
    exporter.export([SequencedExport("k", {"row": "fine", "cf": "f", "cq": "q", "value": "v"}, 5)])
    assert [c.row for c in conn.scan(name)] == [b"fine"]
    exporter.close()
    conn.delete_table(name)
    conn.close()


def test_thread_safe_export(dest):
    conn, table, exporter = dest
    p = f"thr{next(_ids)}:"

    def work(n):
        for i in range(30):
            exporter.export([update(100 + i, [], [cell(f"{p}{n}-{i}")])])

    assert not run_in_threads(work, 4) and len(state(conn, table, p.encode())) == 120


@pytest.mark.parametrize("mode", [DeleteMode.DELETE, DeleteMode.TOMBSTONE])
def test_compaction_hazard(accumulo, mode):
    """Export T2 (deletes x, written at seq 2) before T1 (puts x at seq 1) arrives, with a full major
    compaction in between. Plain deletes are forgotten by the compaction and the stale put resurfaces;
    tombstones survive it."""
    conn = accumulo["b"].connect()
    name = unique_table(f"hazard_{mode.value}")
    exporter = AccumuloExporter(conn, name, "difference", delete_mode=mode).ensure_table()
    exporter.export([update(2, [cell("x")], [cell("y")])])
    conn.compact_table(name, wait=True)
    exporter.export([update(1, [], [cell("x")])])  # the late, older put
    rows = sorted(c.row for c in conn.scan(name))
    if mode is DeleteMode.DELETE:
        assert rows == [b"x", b"y"], "expected the documented hazard: the stale cell x came back"
    else:
        assert rows == [b"y"]
        conn.compact_table(name, wait=True)
        assert sorted(c.row for c in conn.scan(name)) == [b"y"]
        # below a safe horizon tombstones become real deletes, and compaction removes them
        assert delete_cells(conn, name, tombstones_below(conn, name, 3)) == 1
        conn.compact_table(name, wait=True)
        raw = [c for c in conn.scan(name, iterators=[])]
        assert [c.row for c in raw] == [b"y"]
    exporter.close()
    conn.delete_table(name)
    conn.close()


def test_a_destination_written_with_the_defaults_is_immune_to_the_compaction_hazard(accumulo):
    """Issue 36: the seeded chaos run of a CI found 4 stale cells in a destination of the default (then delete)
    mode: a crashed producer's older export arrived after Accumulo had fully compacted the newer delete away.
    The defaults of the exporter, a drain and a bootstrap write tombstones now."""
    from connector.queue import DrainSettings
    from connector.snapshot import BootstrapSettings

    assert DrainSettings().delete_mode is BootstrapSettings().delete_mode is None  # the table's, else the default
    conn = accumulo["b"].connect()
    name = unique_table("hazard_default")
    with AccumuloExporter(conn, name, "difference").ensure_table() as exporter:
        assert exporter.delete_mode is DeleteMode.TOMBSTONE
        exporter.export([update(2, [cell("x")], [cell("y")])])
        conn.compact_table(name, wait=True)
        exporter.export([update(1, [], [cell("x")])])  # the late, older put
    assert sorted(c.row for c in conn.scan(name)) == [b"y"]
    conn.delete_table(name)
    conn.close()


def test_destination_table_created_with_one_version(accumulo):
    conn = accumulo["b"].connect()
    name = unique_table("created")
    AccumuloExporter(conn, name).ensure_table().close()
    props = conn.table_properties(name)
    assert props.get("table.iterator.scan.vers.opt.maxVersions") == "1"
    conn.write(name, [Mutation("r").put("f", "q", "old", timestamp=1), Mutation("r").put("f", "q", "new", timestamp=2)])
    assert [c.value for c in conn.scan(name)] == [b"new"]
    conn.delete_table(name)
    conn.close()


def test_a_hand_delete_at_the_current_seq_hides_the_cell_and_a_later_export_still_wins(accumulo):
    """Issue 36, finding 11: a delete without a timestamp gets the tablet server's milliseconds, below every
    seq (microseconds): it hides nothing. One at ``current_seq()`` hides the exported cell, and the next
    export (a commit after it, a higher seq) still wins; so does a put by hand, until the next export."""
    from connector import current_seq

    conn = accumulo["b"].connect()
    name = unique_table("byhand")
    exporter = AccumuloExporter(conn, name, "difference").ensure_table()
    exporter.export([update(current_seq(), [], [cell("r", "1")])])
    conn.write(name, [Mutation("r").delete("f", "q")])  # no timestamp: the server's ms
    assert [c.value for c in conn.scan(name)] == [b"1"], "a delete without a timestamp hid the cell"
    conn.write(name, [Mutation("r").delete("f", "q", timestamp=current_seq())])
    assert list(conn.scan(name)) == [], "a delete at the current seq did not hide the cell"
    exporter.export([update(current_seq(), [], [cell("r", "2")])])
    assert [c.value for c in conn.scan(name)] == [b"2"], "the export after the hand delete lost"
    conn.write(name, [Mutation("r").put("f", "q", b"by hand", timestamp=current_seq())])
    assert [c.value for c in conn.scan(name)] == [b"by hand"]
    exporter.export([update(current_seq(), [cell("r", "2")], [cell("r", "3")])])
    assert [c.value for c in conn.scan(name)] == [b"3"], "the export after the hand put lost"
    exporter.close()
    conn.delete_table(name)
    conn.close()


def test_tombstone_filter_installed_by_another_task_meanwhile(accumulo, monkeypatch):
    """Two drain tasks set up one destination at once: each reads the table's properties, then attaches the
    tombstone filter, and Accumulo refuses the second attach of the name. The second must take the filter
    the first attached (CI's drain of a fresh table in tombstone mode failed this way), and still refuse
    another iterator of that name."""
    from connector.accumulo import AccumuloError, IteratorSetting
    from connector.accumulo.connection import Connection
    from connector.export.tombstones import FILTER_NAME, install_tombstone_filter

    conn = accumulo["b"].connect()
    name = unique_table("tombrace")
    conn.create_table(name)
    install_tombstone_filter(conn, name)  # the other task's
    real = Connection.table_properties
    stale = [{}]  # our read came before it attached

    def properties(self, table):
        return stale.pop() if stale else real(self, table)

    monkeypatch.setattr(Connection, "table_properties", properties)
    install_tombstone_filter(conn, name)
    monkeypatch.undo()
    assert conn.table_properties(name)[f"table.iterator.scan.{FILTER_NAME}"].startswith("30,")

    other = unique_table("tombother")
    conn.create_table(other)
    conn.attach_iterator(other, IteratorSetting(30, FILTER_NAME, "org.apache.accumulo.core.iterators.user."
                                                "VersioningIterator", {}), scopes=("scan",))
    stale.append({})
    monkeypatch.setattr(Connection, "table_properties", properties)
    with pytest.raises(AccumuloError, match="conflict"):
        install_tombstone_filter(conn, other)
    monkeypatch.undo()
    for table in (name, other):
        conn.delete_table(table)
    conn.close()
