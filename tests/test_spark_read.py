"""Issue 20 item 3: ``spark.read.format("accumulo")`` returns exactly the cells ``scan`` returns, one Spark
partition per tablet, on a real table with splits (cluster A) and Spark ``local[2]``."""

from __future__ import annotations

import functools
import operator
import os
import pickle

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from connector.accumulo import Mutation, Range
from connector.spark import compat
from connector.spark.table_source import tablet_spans
from tests.conftest import one_line_error, unique_table

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
    with pytest.raises(Exception, match=message) as err:
        read(spark, accumulo, table, **options).collect()
    one_line_error(err.value, message)


def test_a_misspelt_option_is_one_line_naming_it(spark, accumulo, split_table):
    table, _ = split_table
    with pytest.raises(Exception, match="did you mean 'table'") as err:
        spark.read.format("accumulo").options(**accumulo["a"].gateway_options().to_options(""), tabel=table).load()
    one_line_error(err.value, "accumulo option: unknown option 'tabel' \\(did you mean 'table'\\?\\)")
    assert "SPARK_HIDE_TRACEBACK" not in os.environ  # only Spark's planner process reports so


def test_missing_table_and_wrong_schema_are_clear(spark, accumulo):
    with pytest.raises(Exception, match="option 'table': no table 'no_such_table_20' on") as err:
        read(spark, accumulo, "no_such_table_20").collect()
    one_line_error(err.value, "option 'table': no table 'no_such_table_20' on")
    with pytest.raises(Exception, match="option 'table' is required") as err:
        read(spark, accumulo, "").collect()
    one_line_error(err.value, "option 'table' is required")
    opts = {**accumulo["a"].gateway_options().to_options(""), "table": "t"}
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("accumulo").schema("row string").options(**opts).load().collect()


def test_tablet_spans_clip_to_the_requested_rows():
    def spans(splits, start, stop):
        return [(s.start, s.stop) for s in tablet_spans(splits, start, stop)]

    assert spans([], None, None) == [(None, None)]
    assert spans([b"c", b"m"], None, None) == [(None, b"c\x00"), (b"c\x00", b"m\x00"), (b"m\x00", None)]
    assert spans([b"c", b"m"], b"d", b"e") == [(b"d", b"e")]
    assert spans([b"c", b"m"], b"c", b"c\x00") == [(b"c", b"c\x00")]  # the split row alone: its tablet only
    assert spans([b"c", b"m"], b"m\x00", None) == [(b"m\x00", None)]
    assert spans([b"c", b"m"], None, b"c\x00") == [(None, b"c\x00")]
    assert {s.columns for s in tablet_spans([b"c"], None, None, (b"f1", (b"f2", b"q")))} == {(b"f1", (b"f2", b"q"))}


#: why the tests of pushdown through Spark skip on this PySpark (None: they run)
NO_PUSHDOWN = None if compat.FILTER_PUSHDOWN else (
    f"PySpark {compat.summary()['pyspark']} refuses the option 'pushdown': filter pushdown needs a Spark that keeps a "
    f"pushdown's planning to its scan ({compat.NEEDS['filter_pushdown']}+, connector/spark/compat.py)")
NO_FILTERS = None if compat.FILTER_CLASSES else f"PySpark {compat.summary()['pyspark']} has no Filter classes (4.1+)"


@pytest.fixture
def pushdown_enabled(spark):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield
    spark.conf.unset("spark.sql.python.filterPushdown.enabled")


@pytest.mark.skipif(NO_PUSHDOWN is not None, reason=str(NO_PUSHDOWN))
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


@pytest.mark.skipif(NO_PUSHDOWN is not None, reason=str(NO_PUSHDOWN))
def test_each_query_of_one_pushdown_dataframe_reads_what_it_asks_for(spark, accumulo, split_table,
                                                                     pushdown_enabled):
    """Issue 36: on one DataFrame an unfiltered query after a filtered one read the filtered rows (PySpark 4.3,
    whose JVM gives every scan of the DataFrame the last pushdown's partitions: there the option is refused)."""
    from pyspark.sql import functions as F  # noqa: N812

    table, conn = split_table
    every = scanned(conn, table)
    b = lambda text: F.lit(bytearray(text))  # noqa: E731 - a binary literal
    df = read(spark, accumulo, table, pushdown="true")
    view = unique_table("pushdown_view")
    df.createOrReplaceTempView(view)
    assert cells_of(df.filter(F.col("row") == b(b"d"))) == [c for c in every if c[0] == b"d"]
    assert df.count() == len(every)  # unfiltered after filtered
    assert cells_of(df) == every
    assert spark.sql(f"SELECT count(*) FROM {view}").first()[0] == len(every)
    assert cells_of(df.filter(F.col("cf") == b(b"f2"))) == [c for c in every if c[1] == b"f2"]
    assert cells_of(df.filter(F.col("ts") > 8)) == [c for c in every if c[4] > 8]  # a filter Spark keeps
    both = df.filter(F.col("row") == b(b"d")).union(df.filter(F.col("row") >= b(b"t")))  # two scans, one query
    assert cells_of(both) == sorted(c for c in every if c[0] == b"d" or c[0] >= b"t")
    assert df.count() == len(every)
    spark.catalog.dropTempView(view)


@pytest.mark.skipif(NO_PUSHDOWN is None, reason="this PySpark keeps a pushdown's planning to its scan")
def test_pushdown_is_refused_where_spark_shares_a_pushdown_s_partitions_between_scans(spark, accumulo, split_table,
                                                                                     pushdown_enabled):
    """Issue 36 on PySpark 4.1-4.3: refused when the DataFrame is loaded, saying why and what to use instead."""
    table, _ = split_table
    with pytest.raises(Exception, match=r"option 'pushdown' \(filter pushdown of Python data sources\) needs Spark "
                                        r"5\.0 or newer; this is PySpark 4\.\d+\.\d+: this Spark gives every scan of a "
                                        r"DataFrame the partitions planned for the last query of it that pushed "
                                        r"filters; narrow the read with the options 'start_row', 'end_row', 'prefix' "
                                        r"or 'columns' instead"):
        read(spark, accumulo, table, pushdown="true")


@pytest.mark.skipif(NO_FILTERS is not None, reason=str(NO_FILTERS))
def test_spark_keeps_a_pushdown_s_planning_to_its_scan_exactly_where_compat_says(spark, pushdown_enabled):
    """What ``compat.FILTER_PUSHDOWN`` stands for, asked of the running Spark with the simplest source that narrows
    its partitions by a pushed filter: on one DataFrame, does an unfiltered count after a filtered one read every
    row, and do the two scans of a union read their own filters? (PySpark 4.3: neither.)"""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.datasource import DataSource, DataSourceReader, GreaterThan, InputPartition, LessThan

    # defined here so that cloudpickle ships them by value to Spark's Python workers
    class Ten(DataSource):
        @classmethod
        def name(cls):
            return "pushdown_probe_ten"

        def schema(self):
            return "x long"

        def reader(self, schema):
            return TenReader()

    class TenReader(DataSourceReader):
        def __init__(self):
            self.bounds = (None, None)  # x > low, x < high, from the pushed filters

        def pushFilters(self, filters):  # noqa: N802 - Spark's name
            low, high, left = None, None, []
            for f in filters:
                if isinstance(f, GreaterThan):
                    low = f.value
                elif isinstance(f, LessThan):
                    high = f.value
                else:
                    left.append(f)
            self.bounds = (low, high)
            return left

        def partitions(self):
            return [InputPartition(self.bounds)]

        def read(self, partition):
            low, high = partition.value
            return iter([(x,) for x in range(10) if (low is None or x > low) and (high is None or x < high)])

    spark.dataSource.register(Ten)
    df = spark.read.format("pushdown_probe_ten").load()
    filtered = df.filter(F.col("x") > 7).count()
    unfiltered = df.count()
    union = df.filter(F.col("x") > 7).union(df.filter(F.col("x") < 5)).count()
    assert filtered == 2
    assert (unfiltered, union) == ((10, 7) if compat.FILTER_PUSHDOWN else (2, 10))


@pytest.mark.skipif(NO_PUSHDOWN is not None, reason=str(NO_PUSHDOWN))
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


# --- random queries on one DataFrame (issue 36) -------------------------------------------------------------
# A query is one or two conjunctions of atoms (two: the union of their rows, two scans of the DataFrame in one
# query); an atom is (op, column, values, negated); the empty conjunction is the unfiltered query.

ROWS = [b"a", b"c", b"c\x00", b"d", b"g", b"ga", b"m", b"ma", b"mb", b"n", b"t", b"tz", b"z\xff"]  # split_table's
VALUES = {"row": [*ROWS, b"b", b"m\x00", b"zz"], "cf": [b"f0", b"f1", b"f2", b"f3"], "cq": [b"q", b"q1", b"q2", b"q3"]}
POSITION = {"row": 0, "cf": 1, "cq": 2, "ts": 4}  # in a cell tuple
COMPARE = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


#: (column, op) pairs, drawn evenly: every kind Spark can push, and ``ts``, which stays Spark's
KINDS = [(column, op) for column in ("row", "cf", "cq") for op in (*COMPARE, "in")] + [("ts", op) for op in COMPARE]


def _atom(kind: tuple[str, str]) -> st.SearchStrategy:
    column, op = kind
    one = st.integers(4, 23) if column == "ts" else st.sampled_from(VALUES[column])
    values = (st.lists(one, min_size=1, max_size=3, unique=True) if op == "in" else st.lists(one, min_size=1,
                                                                                            max_size=1)).map(tuple)
    return st.tuples(st.just(op), st.just(column), values, st.sampled_from([False, False, True]))  # 1 in 3 negated


ATOMS = st.sampled_from(KINDS).flatmap(_atom)
CONJUNCTIONS = st.lists(ATOMS, max_size=3).map(tuple)
SEQUENCES = st.lists(st.one_of(CONJUNCTIONS.map(lambda c: (c,)), st.tuples(CONJUNCTIONS, CONJUNCTIONS)),
                     min_size=1, max_size=5)
#: the issue's own sequence: filtered, then unfiltered, then a union of two filters
ISSUE_36 = [((("=", "row", (b"d",), False),),), ((),),
            ((("=", "row", (b"d",), False),), ((">=", "row", (b"t",), False), ("in", "cf", (b"f2",), False)))]


def holds(atom: tuple, cell: tuple) -> bool:
    op, column, values, negated = atom
    value = cell[POSITION[column]]
    return (value in values if op == "in" else COMPARE[op](value, values[0])) != negated


def expected_cells(every: list[tuple], query: tuple) -> list[tuple]:
    return sorted(c for conjunction in query for c in every if all(holds(a, c) for a in conjunction))


def spark_cells(df, query: tuple) -> list[tuple]:
    """The query's cells through Spark, filters as Column expressions on the DataFrame ``df``."""
    from pyspark.sql import functions as F  # noqa: N812

    def column(atom):
        op, name, values, negated = atom
        literals = [v if name == "ts" else bytearray(v) for v in values]
        expr = F.col(name).isin(*literals) if op == "in" else COMPARE[op](F.col(name), F.lit(literals[0]))
        return ~expr if negated else expr

    scans = [df.filter(functools.reduce(operator.and_, map(column, c))) if c else df for c in query]
    return cells_of(functools.reduce(lambda a, b: a.union(b), scans))


def planned_cells(source_bytes: bytes, query: tuple) -> list[tuple]:
    """The query's cells through the reader as Spark plans each scan (PySpark's pushdown and planning workers):
    the data source unpickled afresh, a new reader, ``pushFilters`` with the filters Spark would push (only when
    there are any), ``partitions()``, reader and partitions pickled to the tasks, each partition read there,
    and Spark's evaluation of the filters the reader left."""
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        InputPartition,
        LessThan,
        LessThanOrEqual,
        Not,
    )

    from connector.spark.table_source import SPARK_SCHEMA, FilteringTableReader

    kinds = {"=": EqualTo, "<": LessThan, "<=": LessThanOrEqual, ">": GreaterThan, ">=": GreaterThanOrEqual}
    out = []
    for conjunction in query:
        plain = pickle.loads(source_bytes).reader(SPARK_SCHEMA)
        reader = FilteringTableReader(plain.settings, plain.arrow_schema)
        filters = []
        for op, name, values, negated in conjunction:
            f = In((name,), values) if op == "in" else kinds[op]((name,), values[0])
            filters.append(Not(f) if negated else f)
        atom_of = {id(f): atom for f, atom in zip(filters, conjunction, strict=True)}
        left = list(reader.pushFilters(filters)) if filters else []
        task_reader, partitions = pickle.loads(pickle.dumps((reader, reader.partitions() or [InputPartition(None)])))
        cells = [tuple(r.values()) for p in partitions for batch in task_reader.read(p) for r in batch.to_pylist()]
        out += [c for c in cells if all(holds(atom_of[id(f)], c) for f in left)]
    return sorted(out)


@pytest.mark.parametrize("driver", [pytest.param("spark", marks=pytest.mark.skipif(NO_PUSHDOWN is not None,
                                                                                  reason=str(NO_PUSHDOWN))),
                                    pytest.param("planning", marks=pytest.mark.skipif(NO_FILTERS is not None,
                                                                                     reason=str(NO_FILTERS)))])
def test_random_queries_on_one_dataframe_read_what_filtering_every_cell_keeps(request, accumulo, split_table,
                                                                              driver):
    """Issue 36: row ranges, IN, families, qualifiers, ts, negations, none and their conjunctions, in random
    order on ONE DataFrame with pushdown, give the cells a Python filter of every cell keeps. ``spark``: through
    Spark (where it keeps a pushdown to its scan). ``planning``: through the reader as Spark plans and reads
    each scan, so the narrowing itself is checked on the real cluster on any PySpark with filters."""
    from connector.spark.table_source import AccumuloTableDataSource

    table, conn = split_table
    every = scanned(conn, table)
    options = {**accumulo["a"].gateway_options().to_options(""), "table": table}
    if driver == "spark":
        spark = request.getfixturevalue("spark")
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        request.addfinalizer(lambda: spark.conf.unset("spark.sql.python.filterPushdown.enabled"))

    @settings(max_examples=10 if driver == "spark" else 100, deadline=None, derandomize=True, database=None)
    @given(SEQUENCES)
    @example(ISSUE_36)
    def one_dataframe(sequence):
        if driver == "spark":
            df = read(spark, accumulo, table, pushdown="true")
            results = [spark_cells(df, query) for query in sequence]
        else:
            source = pickle.dumps(AccumuloTableDataSource(options))  # as Spark keeps it: pickled once
            results = [planned_cells(source, query) for query in sequence]
        assert results == [expected_cells(every, query) for query in sequence]

    one_dataframe()
