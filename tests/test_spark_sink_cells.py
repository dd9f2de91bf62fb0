"""Issue 20 item 4: a plain DataFrame of cells written with the ``accumulo-export`` sink (translator
``cells``) goes to the writer as Arrow batches (``connector.spark.cell_frames``), with the row-by-row
path's results and clear errors for bad cells."""

from __future__ import annotations

import pyarrow as pa
import pytest

from connector.accumulo import Mutation
from connector.export.core import BatchTranslationError
from connector.spark.cell_frames import cell_columns, columnar_cells
from connector.spark.options import OptionError
from tests.conftest import one_line_error, unique_table


def write(spark, accumulo, rows, ddl: str, partitions: int = 1, **options: str) -> str:
    table = unique_table("cells")
    df = spark.createDataFrame(rows, ddl).coalesce(partitions)
    opts = {**accumulo["b"].gateway_options().to_options("dest."), "table": table, "translator": "cells",
            "create_dest_table": "true", **options}
    df.write.format("accumulo-export").mode("append").options(**opts).save()
    return table


def stored(accumulo, table: str, **kw) -> list[tuple]:
    with accumulo["b"].connect() as conn:
        return [tuple(c) for c in conn.scan(table, **kw)]


def test_binary_and_text_columns_null_value_deletes_newest_seq_wins(spark, accumulo):
    rows = [(b"r\xff1", "f", b"q", "v1", 1), (b"r\xff1", "f", b"q", "v2", 4), (b"r2", "g", b"h", "x", 2),
            (b"r2", "g", b"h", None, 3), (b"r3", "f", b"", "", 5)]
    table = write(spark, accumulo, rows, "row binary, cf string, cq binary, value string, seq int", partitions=2)
    assert stored(accumulo, table) == [(b"r3", b"f", b"", b"", 5, b""), (b"r\xff1", b"f", b"q", b"", 4, b"v2")]


def test_visibility_and_delete_columns_and_tombstones(spark, accumulo):
    user = accumulo["b"].user
    with accumulo["b"].connect() as conn:
        before = conn.call("getUserAuthorizations", user)
        conn.call("changeUserAuthorizations", user, {*before, b"SC20"})
    try:
        rows = [("a", "f", "q", "SC20", "secret", False, 1), ("b", "f", "q", None, "plain", None, 1),
                ("b", "f", "q", "", "gone", True, 2), ("c", "f", "q", "", "kept", False, 1)]
        ddl = "row string, cf string, cq string, cv string, value string, delete boolean, seq long"
        table = write(spark, accumulo, rows, ddl)
        assert stored(accumulo, table) == [(b"a", b"f", b"q", b"SC20", 1, b"secret"),
                                           (b"c", b"f", b"q", b"", 1, b"kept")]
        table = write(spark, accumulo, rows, ddl, delete_mode="tombstone")
        assert [c[0] for c in stored(accumulo, table)] == [b"a", b"c"]  # b's tombstone hides it
    finally:
        with accumulo["b"].connect() as conn:
            conn.call("changeUserAuthorizations", user, before)


@pytest.mark.parametrize(("bad", "message"), [
    (("r", None, "q", "v", 7), "column 'cf' is null \\(row b'r', seq 7\\)"),
    (("", "f", "q", "v", 7), "column 'row' is empty"),
    (("r", "f", "q", "v", -7), "column 'seq' must be in \\[0, 2\\*\\*63-1\\]"),
    (("r", "f", "q", "v", None), "need a non-null 'seq' column"),
])
def test_a_bad_cell_fails_the_write_and_nothing_of_its_batch_is_written(spark, accumulo, bad, message):
    rows = [(f"ok{i:03d}", "f", "q", "v", 1) for i in range(100)]
    rows.insert(50, bad)
    with pytest.raises(Exception, match=message):
        write(spark, accumulo, rows, "row string, cf string, cq string, value string, seq long")


def test_a_bad_visibility_fails_the_write_naming_the_row(spark, accumulo):
    rows = [("r1", "f", "q", "", "v", 1), ("r2", "f", "q", "A&", "v", 1)]
    with pytest.raises(Exception, match="r2.*A&"):
        write(spark, accumulo, rows, "row string, cf string, cq string, cv string, value string, seq long")


def test_other_column_types_keep_the_row_by_row_path(spark, accumulo):
    rows = [("r1", "f", "q", 42, 3)]  # a number as the value: the cells translator writes its decimal text
    table = write(spark, accumulo, rows, "row string, cf string, cq string, value int, seq long")
    assert stored(accumulo, table) == [(b"r1", b"f", b"q", b"", 3, b"42")]


def test_append_is_the_only_save_mode_and_a_refused_one_writes_nothing(spark, accumulo):
    """Issue 27: ``mode("overwrite")`` is refused with a message naming the supported mode, before anything is
    written (an existing table keeps its cells, a missing one is not created); a plain ``.save()`` (Spark's
    ``errorifexists``) is refused by Spark itself; ``mode("append")`` writes."""
    ddl = "row string, cf string, cq string, value string, seq long"
    df = spark.createDataFrame([("r1", "f", "q", "new", 9), ("r2", "f", "q", "new", 9)], ddl)
    existing, missing = unique_table("cells"), unique_table("cells")
    with accumulo["b"].connect() as conn:
        conn.create_table(existing)
        conn.write(existing, [Mutation("r1").put("f", "q", b"old", timestamp=1)])

    def save(mode: str | None, table: str) -> None:
        opts = {**accumulo["b"].gateway_options().to_options("dest."), "table": table, "translator": "cells"}
        writer = df.write.format("accumulo-export").options(**opts)
        (writer if mode is None else writer.mode(mode)).save()

    for table in (existing, missing):
        with pytest.raises(Exception, match="supports the save mode 'append' only") as refused:
            save("overwrite", table)
        assert '.mode("append")' in str(refused.value)
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            save(None, table)
    with accumulo["b"].connect() as conn:
        assert not conn.table_exists(missing)
    assert stored(accumulo, existing) == [(b"r1", b"f", b"q", b"", 1, b"old")]
    save("append", existing)
    assert stored(accumulo, existing) == [(b"r1", b"f", b"q", b"", 9, b"new"), (b"r2", b"f", b"q", b"", 9, b"new")]


# --- pure logic: which schemas go columnar, what the columns become ---------------------------------------

def test_columnar_cells_takes_text_or_binary_cells_with_an_integer_seq():
    base = [("row", pa.string()), ("cf", pa.binary()), ("cq", pa.large_string()), ("value", pa.string()),
            ("seq", pa.int64())]
    assert columnar_cells(pa.schema(base))
    assert columnar_cells(pa.schema([*base, ("cv", pa.string()), ("delete", pa.bool_()), ("key", pa.int32())]))
    assert not columnar_cells(pa.schema(base[:-1]))  # no seq
    assert not columnar_cells(pa.schema([*base[:3], ("value", pa.int64()), base[4]]))
    assert not columnar_cells(pa.schema([*base, ("delete", pa.string())]))
    assert not columnar_cells(pa.schema([*base[:4], ("seq", pa.string())]))
    assert not columnar_cells(pa.schema([b for b in base if b[0] != "value"]))  # the row path decides that


def test_cell_columns_names_every_bad_row_by_its_position():
    batch = pa.record_batch({"row": ["a", None, "", "d"], "cf": ["f", "f", "f", None], "cq": ["q"] * 4,
                             "value": ["v"] * 4, "seq": [1, 2, 3, -4]})
    with pytest.raises(BatchTranslationError) as info:
        cell_columns(batch, first=100)
    assert info.value.failures == {
        101: "column 'row' is null (row None, seq 2)", 102: "column 'row' is empty (row b'', seq 3)",
        103: "column 'cf' is null (row b'd', seq -4)"}
    with pytest.raises(OptionError, match="non-null 'seq'"):
        cell_columns(pa.record_batch({"row": ["a"], "cf": ["f"], "cq": ["q"], "value": ["v"],
                                      "seq": pa.array([None], pa.int64())}))


def test_cell_columns_turn_deletes_into_null_values():
    batch = pa.record_batch({"row": ["a", "b", "c"], "cf": ["f"] * 3, "cq": ["q"] * 3, "value": ["1", None, "3"],
                             "delete": [None, False, True], "seq": pa.array([1, 2, 3], pa.int32())})
    cells = cell_columns(batch)
    assert cells.column("value").to_pylist() == [b"1", None, None]
    assert cells.column("cv").to_pylist() == [b""] * 3
    assert cells.column("seq").type == pa.int64()


class _Recording:
    """Records what the sink's paths hand an exporter (a pure-logic test: no cluster)."""

    def __init__(self) -> None:
        self.batches: list[list] = []

    def export_changes(self, changes: pa.RecordBatch, seqs: pa.Array) -> None:
        self.batches.append(changes.drop_columns(["entry"]).to_pylist())

    def export(self, exports: list) -> None:
        self.batches.append(list(exports))


def _data_bytes(values: list) -> int:
    return sum(len(v) for v in values if isinstance(v, bytes | str))


@pytest.mark.parametrize("limit", [1, 40, 100, 1000])
def test_both_sink_paths_cut_as_the_drain_does_by_data_bytes(limit):
    """``buffer_bytes`` means one thing everywhere: the data bytes (text and binary values) of a batch, cut by
    the drain's cutter: each batch holds at most ``limit`` of them (a larger row alone), and the next row would
    not have fitted. (The cells path once cut at Arrow's buffer size, the row path at ``len(repr(row))``,
    each after passing the limit.)"""
    from connector.queue.batches import cut_by_bytes, data_bytes
    from connector.spark.cell_frames import export_cell_batches
    from connector.spark.export_sink import _export_plain_rows

    sizes = [3, 17, 1, 60, 8, 8, 8, 120, 2, 30]
    cells = [{"row": f"r{i}", "cf": "f", "cq": "q" * n, "value": "v" * (n % 7), "seq": i} for i, n in enumerate(sizes)]
    rows = [{**c, "value": len(c["value"])} for c in cells]  # a number: the row-by-row path
    cell_batches = [pa.RecordBatch.from_pylist(cells[i:i + 3]) for i in range(0, len(cells), 3)]
    row_batches = [pa.RecordBatch.from_pylist(rows[i:i + 4]) for i in range(0, len(rows), 4)]
    assert columnar_cells(cell_batches[0].schema) and not columnar_cells(row_batches[0].schema)

    columnar = _Recording()
    stats = export_cell_batches(columnar, limit, iter(cell_batches))  # type: ignore[arg-type]
    by_row = _Recording()
    _export_plain_rows(by_row, limit, iter(row_batches))  # type: ignore[arg-type]

    # each path exported every row once, in order, in the cuts the drain's cutter makes of its input
    assert stats.bytes == sum(data_bytes(b) for b in cell_batches) == sum(_data_bytes(c.values()) for c in cells)
    for recording, batches, weigh in ((columnar, cell_batches, lambda c: _data_bytes(c.values())),
                                      (by_row, row_batches, lambda e: _data_bytes(e.value.values()))):
        cuts = [b.num_rows for b in cut_by_bytes(iter(batches), limit)]
        assert [len(b) for b in recording.batches] == cuts and sum(cuts) == len(cells)
        sizes_in_order = [weigh(x) for batch in recording.batches for x in batch]
        start = 0
        for batch in recording.batches:
            held = sum(sizes_in_order[start:start + len(batch)])
            assert held <= limit or len(batch) == 1
            if start + len(batch) < len(sizes_in_order):
                assert held + sizes_in_order[start + len(batch)] > limit
            start += len(batch)


def test_a_misspelt_sink_option_is_one_line_naming_it(spark, accumulo):
    df = spark.createDataFrame([("r", "f", "q", "v", 1)], "row string, cf string, cq string, value string, seq long")
    opts = {**accumulo["b"].gateway_options().to_options("dest."), "table": unique_table("cells"),
            "translater": "cells"}
    with pytest.raises(Exception, match="unknown option 'translater'") as err:
        df.write.format("accumulo-export").mode("append").options(**opts).save()
    one_line_error(err.value, "unknown option 'translater' \\(did you mean 'translator'\\?\\)")
