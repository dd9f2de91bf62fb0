"""Issue 20 item 3: ``spark.read.format("accumulo")`` returns exactly the cells ``scan`` returns, one Spark
partition per tablet, on a real table with splits (cluster A) and Spark ``local[2]``."""

from __future__ import annotations

import pytest

from connector.accumulo import Mutation, Range
from connector.spark.table_source import tablet_spans
from tests.conftest import unique_table

SPLITS = [b"c", b"g", b"m", b"t"]
AUTH = b"RS20A"  # granted to the gateway user; RS20B is not


@pytest.fixture(scope="module")
def split_table(accumulo):
    """Rows on both sides of every split (the split rows themselves included), two families, visibilities
    the user can and cannot see, several versions, values that are not UTF-8."""
    conn = accumulo["a"].connect()
    user = accumulo["a"].user
    before = conn.call("getUserAuthorizations", user)
    conn.call("changeUserAuthorizations", user, {*before, AUTH})
    name = unique_table("read")
    conn.create_table(name, versioning=False)
    conn.add_splits(name, SPLITS)
    rows = [b"a", b"c", b"c\x00", b"d", b"g", b"ga", b"m", b"ma", b"mb", b"n", b"t", b"tz", b"z\xff"]
    with conn.batch_writer(name) as writer:
        for i, row in enumerate(rows):
            m = Mutation(row)
            m.put("f1", "q1", bytes([i, 0xFE]) + row, timestamp=10 + i)
            m.put("f1", "q1", b"older", timestamp=5)
            m.put("f2", "q2", f"v{i}", timestamp=7)
            m.put("f2", "q3", f"w{i}", visibility=AUTH, timestamp=8)
            m.put("f3", "q", f"x{i}", visibility="RS20A&RS20B", timestamp=9)
            writer.add_mutation(m)
    yield name, conn
    conn.delete_table(name, missing_ok=True)
    conn.call("changeUserAuthorizations", user, before)
    conn.close()


def read(spark, accumulo, table: str, **options: str):
    opts = {**accumulo["a"].gateway_options().to_options(""), "table": table, **options}
    return spark.read.format("accumulo").options(**opts).load()


def cells_of(df) -> list[tuple]:
    return sorted((bytes(r.row), bytes(r.cf), bytes(r.cq), bytes(r.cv), r.ts, bytes(r.value)) for r in df.collect())


def scanned(conn, table: str, **kw) -> list[tuple]:
    return sorted(tuple(c) for c in conn.scan(table, **kw))


def test_reads_every_cell_scan_returns_one_partition_per_tablet(spark, accumulo, split_table):
    table, conn = split_table
    df = read(spark, accumulo, table)
    assert df.schema.simpleString() == "struct<row:binary,cf:binary,cq:binary,cv:binary,ts:bigint,value:binary>"
    assert df.rdd.getNumPartitions() == len(SPLITS) + 1
    expected = scanned(conn, table)
    assert len(expected) == 13 * 4  # every row: f1 twice (no versioning), f2 twice; RS20A&RS20B hidden
    assert cells_of(df) == expected
    # each partition holds exactly its tablet's rows (the split row ends its tablet)
    per_partition = df.rdd.mapPartitions(lambda it: [sorted({bytes(r.row) for r in it})]).collect()
    assert per_partition == [[b"a", b"c"], [b"c\x00", b"d", b"g"], [b"ga", b"m"], [b"ma", b"mb", b"n", b"t"],
                             [b"tz", b"z\xff"]]


def test_prefix_reads_the_tablets_it_overlaps(spark, accumulo, split_table):
    table, conn = split_table
    df = read(spark, accumulo, table, prefix="m")
    assert df.rdd.getNumPartitions() == 2  # "m" ends one tablet, "ma" and "mb" start the next
    assert cells_of(df) == scanned(conn, table, range=Range.prefix("m"))
    assert {r[0] for r in cells_of(df)} == {b"m", b"ma", b"mb"}
    # the same schema given with nullable columns reads the same
    opts = {**accumulo["a"].gateway_options().to_options(""), "table": table, "prefix": "m"}
    nullable = spark.read.format("accumulo").schema("row binary, cf binary, cq binary, cv binary, ts long, "
                                                    "value binary").options(**opts).load()
    assert cells_of(nullable) == cells_of(df)


def test_row_range_is_inclusive_and_clipped_to_tablets(spark, accumulo, split_table):
    table, conn = split_table
    df = read(spark, accumulo, table, start_row="c", end_row="ma", batch_size="3")
    assert df.rdd.getNumPartitions() == 4
    assert cells_of(df) == scanned(conn, table, range=Range.rows("c", "ma"))
    assert {r[0] for r in cells_of(df)} == {b"c", b"c\x00", b"d", b"g", b"ga", b"m", b"ma"}
    assert cells_of(read(spark, accumulo, table, start_row="tz")) == scanned(conn, table, range=Range.rows("tz", None))
    assert cells_of(read(spark, accumulo, table, end_row="c")) == scanned(conn, table, range=Range.rows(None, "c"))


def test_columns_select_families_and_family_qualifier_pairs(spark, accumulo, split_table):
    table, conn = split_table
    df = read(spark, accumulo, table, columns="f1, f2:q3")
    expected = scanned(conn, table, columns=[b"f1", (b"f2", b"q3")])
    assert cells_of(df) == expected
    assert {(r[1], r[2]) for r in expected} == {(b"f1", b"q1"), (b"f2", b"q3")}


def test_authorizations_decide_which_visibilities_are_read(spark, accumulo, split_table):
    table, conn = split_table
    only_a = cells_of(read(spark, accumulo, table, authorizations="RS20A"))
    assert only_a == scanned(conn, table, authorizations=[AUTH])
    assert {r[3] for r in only_a} == {b"", AUTH}
    none_given = cells_of(read(spark, accumulo, table, authorizations=""))  # empty: all the user's
    assert none_given == only_a
    with pytest.raises(Exception, match="option 'authorizations'.*RS20B"):
        read(spark, accumulo, table, authorizations="RS20A,RS20B").collect()


@pytest.mark.parametrize(("options", "message"), [
    ({"end_row": "a", "start_row": "b"}, "option 'end_row'.*sorts before option 'start_row'"),
    ({"prefix": "m", "start_row": "a"}, "option 'prefix' cannot be combined"),
    ({"columns": "f1,,f2"}, "option 'columns' has an empty item"),
    ({"columns": ":q"}, "option 'columns'.*no column family"),
    ({"batch_size": "0"}, "accumulo option 'batch_size': must be >= 1, got 0"),
    ({"port": ""}, "option 'port' is required"),
    ({"secret": "x"}, "option 'secret' would put a secret in plain sight.*secret_file.*secret_env"),
])
def test_bad_options_are_named(spark, accumulo, split_table, options, message):
    table, _ = split_table
    with pytest.raises(Exception, match=message):
        read(spark, accumulo, table, **options).collect()


def test_missing_table_and_wrong_schema_are_clear(spark, accumulo):
    with pytest.raises(Exception, match="option 'table': no table 'no_such_table_20' on"):
        read(spark, accumulo, "no_such_table_20").collect()
    with pytest.raises(Exception, match="option 'table' is required"):
        read(spark, accumulo, "").collect()
    opts = {**accumulo["a"].gateway_options().to_options(""), "table": "t"}
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("accumulo").schema("row string").options(**opts).load().collect()


def test_tablet_spans_clip_to_the_requested_rows():
    def spans(splits, start, stop):
        return [s.value for s in tablet_spans(splits, start, stop)]

    assert spans([], None, None) == [(None, None)]
    assert spans([b"c", b"m"], None, None) == [(None, b"c\x00"), (b"c\x00", b"m\x00"), (b"m\x00", None)]
    assert spans([b"c", b"m"], b"d", b"e") == [(b"d", b"e")]
    assert spans([b"c", b"m"], b"c", b"c\x00") == [(b"c", b"c\x00")]  # the split row alone: its tablet only
    assert spans([b"c", b"m"], b"m\x00", None) == [(b"m\x00", None)]
    assert spans([b"c", b"m"], None, b"c\x00") == [(None, b"c\x00")]


@pytest.fixture
def pushdown_enabled(spark):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield
    spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_pushed_filters_narrow_the_scan_and_read_what_spark_would(spark, accumulo, split_table, pushdown_enabled):
    from pyspark.sql import functions as F  # noqa: N812

    table, conn = split_table
    b = lambda text: F.lit(bytearray(text))  # noqa: E731 - a binary literal

    def both(where):
        pushed = read(spark, accumulo, table, pushdown="true").filter(where)
        return pushed, cells_of(pushed), cells_of(read(spark, accumulo, table).filter(where))

    # a row range and a family: three of the five tablets, only f1 fetched
    df, got, want = both((F.col("row") >= b(b"d")) & (F.col("row") < b(b"n")) & (F.col("cf") == b(b"f1")))
    assert got == want == [c for c in scanned(conn, table, range=Range.rows("d", "n", end_inclusive=False))
                           if c[1] == b"f1"]
    assert df.rdd.getNumPartitions() == 3
    # family and qualifier pairs, with a filter Spark keeps (ts) and a negation
    df, got, want = both(F.col("cf").isin(bytearray(b"f1"), bytearray(b"f2")) & (F.col("cq") == b(b"q3"))
                         & (F.col("ts") >= 8) & (F.col("row") != b(b"d")))
    assert got == want and {(r[1], r[2]) for r in got} == {(b"f2", b"q3")} and len(got) == 12
    # IN on rows: read from the least to the greatest, the rest filtered by Spark
    df, got, want = both(F.col("row").isin(bytearray(b"c"), bytearray(b"g")))
    assert got == want and {r[0] for r in got} == {b"c", b"g"}
    assert df.rdd.getNumPartitions() == 2
    # no row can pass: no partition at all
    df, got, want = both((F.col("row") == b(b"z\xff")) & (F.col("row") < b(b"a")))
    assert got == want == [] and df.rdd.getNumPartitions() == 0
    # without the option the same query scans every tablet
    assert read(spark, accumulo, table).filter(F.col("row") == b(b"d")).rdd.getNumPartitions() == len(SPLITS) + 1


def test_pushdown_needs_spark_s_setting_and_says_so(spark, accumulo, split_table):
    from pyspark.sql import functions as F  # noqa: N812

    table, _ = split_table
    with pytest.raises(Exception, match="DATA_SOURCE_PUSHDOWN_DISABLED"):
        read(spark, accumulo, table, pushdown="true").filter(F.col("row") == F.lit(bytearray(b"d"))).collect()


def test_push_filters_takes_what_a_scan_can_do_and_leaves_the_rest():
    from pyspark.sql.datasource import EqualTo, In, IsNotNull, LessThan, Not, StringStartsWith

    from connector.spark.table_filters import MAX_COLUMNS, Scan, push_filters

    everything = Scan(None, None, None)
    cq = EqualTo(("cq",), b"q")
    scan, left = push_filters([cq], everything)  # a qualifier alone cannot be fetched
    assert scan == everything and left == [cq]
    not_row, text, ts = Not(EqualTo(("row",), b"a")), EqualTo(("row",), "a"), LessThan(("ts",), 3)
    scan, left = push_filters([not_row, text, ts, IsNotNull(("cv",)), StringStartsWith(("row",), "x")], everything)
    assert scan == everything and left[:3] == [not_row, text, ts] and len(left) == 4
    many = In(("cq",), [b"q%d" % i for i in range(MAX_COLUMNS + 1)])
    scan, left = push_filters([EqualTo(("cf",), b"f"), many], everything)  # too many pairs: family only
    assert scan.columns == (b"f",) and left == [many]
    columns_option = Scan(b"a", b"z", (b"f1",))
    scan, left = push_filters([EqualTo(("cf",), b"f2")], columns_option)  # the option's columns stand
    assert scan == columns_option and len(left) == 1
    scan, left = push_filters([EqualTo(("cf",), b"f1"), EqualTo(("cf",), b"f2")], everything)
    assert scan.empty and left == []
