"""B from A, the pure parts: tablet bounds, snapshot exports, what a set of implied updates leaves visible,
digests and the cell-by-cell comparison, the plan's record. No cluster: the end-to-end proofs are in
tests/test_bootstrap.py."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from connector.accumulo import Cell
from connector.serializers import JsonSerializer
from connector.snapshot.compare import ACTUAL_SCHEMA, compare, digests, expected_cells, split_by_range
from connector.snapshot.functions import check_snapshot_name
from connector.snapshot.implied import tablet_bounds
from connector.snapshot.native_digest import keys_distinct
from connector.snapshot.rows import ROWS_SCHEMA, SnapRow, _chunk, snapshot_exports
from connector.snapshot.state import Plan

UPDATE_COLUMNS = ["row", "cf", "cq", "cv", "ts", "value", "delete", "source"]


def updates(*cells: tuple[bytes, bytes, int, bytes | None]) -> pa.RecordBatch:
    """(row, cq, ts, value or None for a delete) as implied updates of family f."""
    rows = [(r, b"f", q, b"", ts, v, v is None, b"src") for r, q, ts, v in cells]
    columns = list(zip(*rows, strict=True)) if rows else [[]] * 8
    types = [pa.binary()] * 4 + [pa.int64(), pa.binary(), pa.bool_(), pa.binary()]
    return pa.record_batch([pa.array(c, t) for c, t in zip(columns, types, strict=True)], names=UPDATE_COLUMNS)


def actual(*cells: tuple[bytes, bytes, int, bytes]) -> pa.Table:
    return pa.Table.from_pylist([{"row": r, "cf": b"f", "cq": q, "cv": b"", "ts": ts, "value": v}
                                 for r, q, ts, v in cells], schema=ACTUAL_SCHEMA)


def test_tablet_bounds_cover_every_row_once_and_clip():
    assert tablet_bounds([]) == [(None, None)]
    assert tablet_bounds([b"m"]) == [(None, b"m\x00"), (b"m\x00", None)]
    assert tablet_bounds([b"m", b"t"], b"n", b"u") == [(b"n", b"t\x00"), (b"t\x00", b"u")]
    assert tablet_bounds([b"m"], b"x", b"y") == [(b"x", b"y")]


@given(st.lists(st.binary(min_size=1, max_size=3), unique=True, max_size=6),
       st.lists(st.binary(min_size=1, max_size=4), max_size=20))
def test_every_row_falls_in_exactly_one_bound(splits, rows):
    bounds = tablet_bounds(splits)
    for row in rows:
        holding = [b for b in bounds if (b[0] is None or b[0] <= row) and (b[1] is None or row < b[1])]
        assert len(holding) == 1, (row, bounds)


def test_snapshot_exports_carry_the_row_version_and_name_failures():
    rows = [SnapRow(b"a", 7, [Cell(b"a", b"c", b"n", b"", 7, b"3")]), SnapRow(b"gone", 9, []),
            SnapRow(b"bad", 5, [Cell(b"bad", b"c", b"n", b"", 5, b"x")])]

    def snap(row, cells):
        if row == b"bad":
            raise ValueError("no count")
        return [(row.decode(), {"n": int(cells[0].value)})]

    batch, failures = snapshot_exports(rows, snap, JsonSerializer(), JsonSerializer())
    assert batch.to_pylist() == [{"key": b'"a"', "value": b'{"n":3}', "seq": 7, "source": b"a"}]
    assert [(f.row, f.reason) for f in failures] == [(b"bad", "ValueError: no count")]


def test_expected_cells_keep_the_newest_put_and_drop_what_a_delete_hides():
    table = expected_cells([updates((b"r", b"a", 5, b"old"), (b"r", b"a", 9, b"new"),  # newest put wins
                                    (b"r", b"b", 5, b"x"), (b"r", b"b", 5, None),      # delete wins at equal ts
                                    (b"r", b"c", 5, b"y"), (b"r", b"c", 3, None))])    # an older delete does not
    assert sorted((r["cq"], r["value"], r["ts"]) for r in table.to_pylist()) == [(b"a", b"new", 9), (b"c", b"y", 5)]
    assert expected_cells([]).num_rows == 0
    puts_only = expected_cells([updates((b"r", b"a", 9, b"new"), (b"r", b"b", 5, b"x")),
                                updates((b"r", b"a", 5, b"old"))])
    assert sorted((r["cq"], r["value"], r["ts"]) for r in puts_only.to_pylist()) == [(b"a", b"new", 9), (b"b", b"x", 5)]


def visible_by_model(cells: list[tuple[bytes, bytes, int, bytes | None]]) -> list[tuple[bytes, bytes, int, bytes]]:
    """What Accumulo shows of these puts and deletes, by the rule itself: per key, the newest put, unless a delete
    at the same or a newer timestamp hides it (of equal newest puts, each is kept)."""
    out = []
    for key in {(r, q) for r, q, _, _ in cells}:
        puts = [(ts, v) for r, q, ts, v in cells if (r, q) == key and v is not None]
        deletes = [ts for r, q, ts, v in cells if (r, q) == key and v is None]
        if not puts:
            continue
        newest = max(ts for ts, _ in puts)
        if deletes and max(deletes) >= newest:
            continue
        out += [(key[0], key[1], ts, v) for ts, v in puts if ts == newest]
    return sorted(out)


@given(st.lists(st.tuples(st.sampled_from([b"r", b"s", b"t\x00"]), st.sampled_from([b"a", b"b", b"c", b""]),
                          st.integers(1, 4), st.one_of(st.none(), st.sampled_from([b"1", b"2", b""]))),
                max_size=12),
       st.booleans())
@example([(b"r", b"a", 1, b"1"), (b"r", b"a", 2, b"2")], False)  # puts only, a key twice
def test_expected_cells_agree_with_the_rule_whether_keys_repeat_or_not(cells, puts_only):
    if puts_only:  # distinct keys, puts only: the path that keeps every cell as it is
        cells = list({(r, q): (r, q, ts, v if v is not None else b"x") for r, q, ts, v in cells}.values())
    halves = [updates(*cells[: len(cells) // 2]), updates(*cells[len(cells) // 2:])]
    table = expected_cells(halves)
    assert sorted((c["row"], c["cq"], c["ts"], c["value"]) for c in table.to_pylist()) == visible_by_model(cells)
    assert table.schema.names == ["row", "cf", "cq", "cv", "value", "ts", "source"]


def test_keys_distinct_looks_at_the_key_alone():
    def cells(*keys: tuple[bytes, bytes]) -> pa.Table:
        return pa.Table.from_batches([updates(*((r, q, 1, b"v%d" % i) for i, (r, q) in enumerate(keys)))])

    assert keys_distinct(cells((b"r", b"a"), (b"r", b"b"), (b"ra", b""), (b"r", b"a\x00")))
    assert not keys_distinct(cells((b"r", b"a"), (b"s", b"a"), (b"r", b"a")))  # values differ, keys do not
    assert keys_distinct(cells()) and keys_distinct(cells((b"r", b"a")))


def test_compare_names_missing_unexpected_and_different_cells_and_ignores_timestamps():
    expected = expected_cells([updates((b"r", b"a", 5, b"1"), (b"r", b"b", 5, b"2"), (b"r", b"c", 5, b"3"))])
    diffs = compare(expected, actual((b"r", b"a", 99, b"1"), (b"r", b"c", 4, b"X"), (b"r", b"d", 2, b"4")))
    assert [(d.kind, d.cq, d.expected, d.actual, d.version, d.ts) for d in diffs] == [
        ("missing", b"b", b"2", None, 5, None), ("different", b"c", b"3", b"X", 5, 4),
        ("unexpected", b"d", None, b"4", None, 2)]
    assert json.loads(json.dumps(diffs[0].to_json()))["kind"] == "missing"


def test_digests_match_exactly_when_the_content_does():
    splits = [b"m"]
    e = expected_cells([updates((b"a", b"q", 1, b"1"), (b"z", b"q", 1, b"2"))])
    same = actual((b"z", b"q", 50, b"2"), (b"a", b"q", 70, b"1"))  # other order, other timestamps
    changed = actual((b"a", b"q", 1, b"1"), (b"z", b"q", 1, b"3"))
    assert digests(e, splits) == digests(same, splits)
    assert digests(iter(same.to_batches(max_chunksize=1)), splits) == digests(same, splits)  # a page at a time
    ec, es = digests(e, splits)
    cc, cs = digests(changed, splits)
    assert (ec[0], es[0]) == (cc[0], cs[0]) and es[1] != cs[1]
    assert set(split_by_range(e, splits)) == {0, 1}
    assert set(split_by_range(e, splits, only=[1])) == {1} and split_by_range(e, splits, only=[]) == {}


def test_plan_round_trips_and_snapshot_names_are_checked():
    plan = Plan("counts", "app:snap", ((None, b"m\x00"), (b"m\x00", None)), 123)
    assert Plan.from_json(plan.to_json()) == plan
    assert check_snapshot_name("app.mod:fn") == "app.mod:fn"
    assert check_snapshot_name("combine=wc") == "combine=wc"
    for bad in ("app", "combine=", ":fn", "combine"):
        with pytest.raises(ValueError):
            check_snapshot_name(bad)


SCANNED = pa.schema([("row", pa.binary()), ("cf", pa.binary()), ("cq", pa.binary()), ("cv", pa.binary()),
                     ("ts", pa.int64()), ("value", pa.binary())])


def scanned(*cells: tuple[bytes, bytes, bytes, int, bytes]) -> pa.Table:
    return pa.Table.from_pylist([{"row": r, "cf": f, "cq": q, "cv": b"", "ts": ts, "value": v}
                                 for r, f, q, ts, v in cells], schema=SCANNED)


def test_a_chunk_gives_each_own_cell_its_rows_version_and_counts_the_outbox():
    from connector.transactions import TxLayout

    chunk = _chunk(scanned((b"a", b"!tx", b"v", 12, b"12 abc def"), (b"a", b"!txo", b"e:q:x", 12, b"{}"),
                           (b"a", b"c", b"n", 12, b"3"), (b"a", b"c", b"o", 8, b"4"),
                           (b"b", b"!tx", b"v", 20, b"20"),                       # deleted on A: no cell
                           (b"c", b"c", b"n", 5, b"1"), (b"c", b"c", b"p", 7, b"2")),  # no version: its newest
                   TxLayout())
    assert chunk.cells.schema == ROWS_SCHEMA
    assert [(r["row"], r["cq"], r["version"]) for r in chunk.cells.to_pylist()] == [
        (b"a", b"n", 12), (b"a", b"o", 12), (b"c", b"n", 7), (b"c", b"p", 7)]
    assert (chunk.rows.to_pylist(), chunk.versions.to_pylist(), chunk.outbox) == ([b"a", b"b", b"c"], [12, 20, 7], 1)
    assert [(r.row, r.version, [c.cq for c in r.cells]) for r in chunk.snap_rows()] == [
        (b"a", 12, [b"n", b"o"]), (b"c", 7, [b"n", b"p"])]


@given(st.lists(st.tuples(st.sampled_from([b"r1", b"r2", b"r3"]), st.sampled_from([b"c", b"d"]),
                          st.integers(1, 9), st.booleans()), max_size=30))
def test_a_chunk_agrees_with_reading_the_rows_one_by_one(cells):
    from connector.transactions import TxLayout
    from connector.transactions.layout import parse_version

    rows: dict[bytes, dict[tuple[bytes, bytes], tuple[int, bytes]]] = {}
    for row, cf, ts, versioned in cells:
        rows.setdefault(row, {})[(cf, b"q%d" % ts)] = (ts, b"v")
        if versioned:
            rows[row][(b"!tx", b"v")] = (ts, b"%d tok" % (ts * 100))
    flat = [(r, f, q, ts, v) for r in sorted(rows) for (f, q), (ts, v) in sorted(rows[r].items())]
    if not flat:
        return
    chunk = _chunk(scanned(*flat), TxLayout())
    for row, version in zip(chunk.rows.to_pylist(), chunk.versions.to_pylist(), strict=True):
        own = {k: v for k, v in rows[row].items() if k[0] != b"!tx"}
        vcell = rows[row].get((b"!tx", b"v"))
        expected = parse_version(vcell[1]) if vcell else max((ts for ts, _ in own.values()), default=0)
        assert version == expected


#: combine values of every JSON kind, the unicode a JSON writer may escape, floats that must round-trip
COMBINE_VALUES = st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(), st.booleans(),
                           st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                                 max_size=3))
COMBINE_KEYS = st.one_of(st.text(), st.integers(), st.floats(allow_nan=False, allow_infinity=False))


def combine_chunk(config, state: dict):
    """A chunk of a combine table's key rows: each key's ``s:val`` (none for a None value, a key whose value
    was deleted) and a pending update, at versions 100, 101, ..."""
    from connector.snapshot.rows import RowChunk

    json_serde = JsonSerializer()
    cells, versions = [], {}
    for n, (key, value) in enumerate(state.items()):
        row = config.layout.key_row(json_serde.dumps(key))
        versions[row] = 100 + n
        if value is not None:
            cells.append((row, b"s", b"val", b"", 100 + n, json_serde.dumps(value)))
        cells.append((row, b"u", b"p1-%d" % n, b"", 7, b"1"))
    cells.sort()
    rows = sorted(versions)
    return RowChunk(pa.RecordBatch.from_pylist(
        [dict(zip(ROWS_SCHEMA.names, (*c, versions[c[0]]), strict=True)) for c in cells], schema=ROWS_SCHEMA),
        pa.array(rows, pa.binary()), pa.array([versions[r] for r in rows], pa.int64()))


@given(st.dictionaries(COMBINE_KEYS, st.one_of(st.none(), COMBINE_VALUES), max_size=12))
def test_the_combine_snapshots_batch_form_gives_the_per_row_forms_bytes(state):
    """Issue 37 item 2: ``combine=<cid>`` runs without Python per key where it gives the same exports, and
    with the ``value`` translator the cells that translator makes of them; a key with pending updates and no
    value (None here) implies nothing in every form."""
    from connector.combine import CombineConfig
    from connector.export import SequencedExport
    from connector.export.value import ValueTranslator
    from connector.queue import QueueConfig
    from connector.snapshot.functions import CombineSnapshot
    from connector.snapshot.implied import _batch_snapshot

    config = CombineConfig(table="t", cid="wc", num_buckets=20)
    chunk = combine_chunk(config, state)
    snapshot = CombineSnapshot(config)
    queue = QueueConfig(table="q", qid="q", num_buckets=4)
    per_row, failed = snapshot_exports(chunk.snap_rows(), snapshot, *queue.serializers())
    assert not failed and len(per_row) == sum(v is not None for v in state.values())
    exports, none, failures = _batch_snapshot(snapshot.batch(queue), chunk)
    assert none is None and not failures
    assert exports.to_pylist() == per_row.to_pylist()

    translator = ValueTranslator(b"count", b"n")
    exports, cells, failures = _batch_snapshot(snapshot.batch(queue, translator), chunk)
    assert not failures
    if cells is None:  # a key or value the translator writes otherwise or refuses: the exports, as above
        assert exports.to_pylist() == per_row.to_pylist()
        return
    key_serde, value_serde = queue.serializers()
    expected = [(change.row, change.cf, change.cq, change.value, e["seq"], e["source"])
                for e in per_row.to_pylist()
                for change in translator(SequencedExport(key_serde.loads(e["key"]), value_serde.loads(e["value"]),
                                                         e["seq"]))]
    got = cells.select(["row", "cf", "cq", "value", "ts", "source"]).to_pylist()
    assert [tuple(c.values()) for c in got] == expected


def test_the_combine_snapshot_writes_a_value_translators_cells_itself_for_plain_keys_and_values():
    from connector.combine import CombineConfig
    from connector.export.value import ValueTranslator
    from connector.queue import QueueConfig
    from connector.snapshot.functions import CombineSnapshot
    from connector.snapshot.implied import _batch_snapshot

    config = CombineConfig(table="t", cid="wc", num_buckets=20)
    queue = QueueConfig(table="q", qid="q", num_buckets=4)
    batch = CombineSnapshot(config).batch(queue, ValueTranslator(b"count", b""))
    plain = {"apple": 3, "é ü": -1.5, 7: "text", "x": [1, 2], "y": {"a": True}, "gone": None}
    _, cells, _ = _batch_snapshot(batch, combine_chunk(config, plain))
    assert cells is not None
    assert sorted(zip(cells["row"].to_pylist(), cells["value"].to_pylist(), strict=True)) == sorted(
        [(b"apple", b"3"), ("é ü".encode(), b"-1.5"), (b"7", b"text"), (b"x", b"[1,2]"), (b"y", b'{"a":true}')])
    for awkward in ({"say \"hi\"": 1}, {"": 1}, {True: 1}, {"k": ["ü"]}, {"k": 'a\\b'}):
        exports, cells, _ = _batch_snapshot(batch, combine_chunk(config, awkward))
        assert cells is None and len(exports) == 1, awkward


def test_the_combine_snapshot_keeps_the_per_row_form_where_bytes_could_differ():
    from connector.combine import CombineConfig
    from connector.queue import QueueConfig
    from connector.snapshot.functions import CombineSnapshot

    config = CombineConfig(table="t", cid="wc", num_buckets=4)
    json_queue = QueueConfig(table="q", qid="q", num_buckets=4)
    assert CombineSnapshot(config).batch(json_queue) is not None
    assert CombineSnapshot(config, "app.observers:index").batch(json_queue) is None  # the user's observer
    assert CombineSnapshot(config).batch(QueueConfig(table="q", qid="q", num_buckets=4,
                                                     value_serializer="packed")) is None
    assert CombineSnapshot(CombineConfig(table="t", cid="wc", num_buckets=4, key_serializer="bytes")).batch(
        json_queue) is None
