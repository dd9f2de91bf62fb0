"""Bulk loads of sorted RFiles that keep every cell's timestamp (this gateway's extension): the gateway writes the
files with Accumulo's RFile writer into a staging directory and loads them with importDirectory ...
tableTime(false). On the embedded cluster the staging directory is the gateway's default (a folder of the local
file system, which is the cluster's volume's file system too)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from connector.accumulo import (
    UPDATE_SCHEMA,
    AccumuloError,
    Connection,
    Mutation,
    MutationsRejectedError,
    sort_cells,
)
from integration.harness import StandaloneGateway

from .conftest import unique_table
from .upstream_proxy import UpstreamProxy

Cell = tuple[bytes, bytes, bytes, bytes, int | None, bytes | None, bool]  # row, cf, cq, cv, ts, value, delete


def batch(cells: list[Cell]) -> pa.RecordBatch:
    columns = list(zip(*cells, strict=True)) if cells else [[]] * 7
    return pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, UPDATE_SCHEMA, strict=True)],
                                      schema=UPDATE_SCHEMA)


def put(row: bytes, cq: bytes, ts: int | None, value: bytes, cf: bytes = b"f") -> Cell:
    return (row, cf, cq, b"", ts, value, False)


def delete(row: bytes, cq: bytes, ts: int, cf: bytes = b"f") -> Cell:
    return (row, cf, cq, b"", ts, None, True)


def all_versions(conn: Connection, table: str) -> list[tuple[bytes, bytes, bytes, int, bytes]]:
    return [(c.row, c.cf, c.cq, c.ts, c.value) for c in conn.scan(table, batch_size=10_000)]


@pytest.fixture
def versions_table(conn_b):
    """A fresh table on B without the versioning iterator: every version of a cell stays visible."""
    name = unique_table("bulk")
    conn_b.create_table(name, versioning=False)
    yield name
    conn_b.delete_table(name, missing_ok=True)


def test_a_bulk_load_into_a_table_with_splits_keeps_every_cells_timestamp(conn_b, versions_table):
    conn_b.add_splits(versions_table, [b"r025", b"r050", b"r075"])
    rng = random.Random(7)
    cells = [put(b"r%03d" % r, b"q%d" % q, ts, b"v%d-%d-%d" % (r, q, ts))
             for r in range(100) for q in range(3) for ts in rng.sample(range(1, 10**12), 3)]
    with conn_b.bulk_import(versions_table) as bulk:
        with bulk.file("low") as f:  # rows of two tablets, in three batches
            low = sort_cells(batch([c for c in cells if c[0] < b"r050"]))
            for i in range(0, low.num_rows, 100):
                f.add_cells(low.slice(i, 100))
        with bulk.file("high") as f:
            f.add_cells(sort_cells(batch([c for c in cells if c[0] >= b"r050"])))
        assert bulk.files_left() == 2
        bulk.load()
        assert bulk.files_left() == 0
    expected = sorted(((r, cf, cq, ts, v) for r, cf, cq, _, ts, v, _ in cells),
                      key=lambda c: (c[0], c[1], c[2], -c[3]))
    assert all_versions(conn_b, versions_table) == expected
    assert conn_b.list_splits(versions_table) == [b"r025", b"r050", b"r075"]


def test_a_bulk_load_beside_written_cells_the_newest_timestamp_wins(conn_b):
    table = unique_table("bulkv")
    conn_b.create_table(table)  # the versioning iterator: one version per cell
    try:
        conn_b.write(table, [Mutation("a").put("f", "q", "written-5", timestamp=5),
                             Mutation("b").put("f", "q", "written-9", timestamp=9)])
        with conn_b.bulk_import(table) as bulk:
            with bulk.file("f") as f:
                f.add_cells(batch([put(b"a", b"q", 7, b"bulk-7"), put(b"b", b"q", 8, b"bulk-8")]))
            bulk.load()
        assert [(c.row, c.ts, c.value) for c in conn_b.scan(table)] == [(b"a", 7, b"bulk-7"), (b"b", 9, b"written-9")]
    finally:
        conn_b.delete_table(table, missing_ok=True)


def test_deletes_in_a_file_hide_older_puts(conn_b, versions_table):
    with conn_b.bulk_import(versions_table) as bulk:
        with bulk.file("puts") as f:
            f.add_cells(batch([put(b"a", b"q", 5, b"a5"), put(b"b", b"q", 5, b"b5"), put(b"b", b"q", 3, b"b3"),
                               put(b"c", b"q", 5, b"c5")]))
        bulk.load()
    conn_b.write(versions_table, [Mutation("d").put("f", "q", "d4", timestamp=4)])
    with conn_b.bulk_import(versions_table) as bulk:
        with bulk.file("deletes") as f:
            # a delete at 5 hides the puts of a and b at 5 and below; one at 4 hides d (written, not bulk loaded);
            # c's delete at 4 leaves its put at 5; in the same file, e's put at 8 stays above its delete at 6
            # while e's put at 6 (a delete sorts first at equal timestamps) and at 2 are hidden
            f.add_cells(sort_cells(batch([
                delete(b"a", b"q", 5), delete(b"b", b"q", 5), delete(b"c", b"q", 4), delete(b"d", b"q", 4),
                put(b"e", b"q", 8, b"e8"), delete(b"e", b"q", 6), put(b"e", b"q", 6, b"e6"), put(b"e", b"q", 2, b"e2"),
            ])))
        bulk.load()
    assert all_versions(conn_b, versions_table) == [(b"c", b"f", b"q", 5, b"c5"), (b"e", b"f", b"q", 8, b"e8")]


def test_an_import_repeated_after_it_succeeded_loads_nothing_twice(conn_b, versions_table):
    with conn_b.bulk_import(versions_table) as bulk:
        with bulk.file("f0") as f:
            f.add_cells(batch([put(b"r%02d" % i, b"q", 1, b"v") for i in range(20)]))
        bulk.load()
        bulk.load()  # the files are in the table now: nothing left to load
        resumed = conn_b.bulk_import(versions_table, bulk_id=bulk.bulk_id)  # a client that resumes asks
        assert resumed.files_left() == 0
        resumed.load()
        with bulk.file("f1") as f:  # the same staging directory, one more file: only it is loaded
            f.add_cells(batch([put(b"s", b"q", 1, b"v")]))
        bulk.load()
    cells = all_versions(conn_b, versions_table)
    assert len(cells) == 21 and len(set(cells)) == 21  # no key twice (a table without versioning shows repeats)
    with pytest.raises(AccumuloError, match="no bulk import"):  # leaving the block removed the staging directory
        resumed.files_left()


def test_out_of_order_keys_fail_the_file_with_a_clear_message_and_load_nothing(conn_b, versions_table):
    with pytest.raises(MutationsRejectedError, match=r"key 'a' 'f':'q' ts 1 came after key 'b' 'f':'q' ts 1") as info, \
            conn_b.bulk_import(versions_table) as bulk:
        with bulk.file("good") as f:
            f.add_cells(batch([put(b"x", b"q", 1, b"v")]))
        with bulk.file("bad") as f:
            f.add_cells(batch([put(b"b", b"q", 1, b"v")]))
            f.add_cells(batch([put(b"a", b"q", 1, b"v")]))  # lower than the batch before
            f.add_cells(batch([put(b"c", b"q", 1, b"v")]))  # sent before the failure is known: dropped
        bulk.load()
    assert "nothing of it will be loaded" in str(info.value)
    assert all_versions(conn_b, versions_table) == []
    with pytest.raises(AccumuloError, match="no bulk import"):  # the failed block removed the staging directory
        conn_b.bulk_import(versions_table, bulk_id=bulk.bulk_id).files_left()


def test_a_failed_file_is_never_loaded_and_the_others_are(conn_b, versions_table):
    with conn_b.bulk_import(versions_table) as bulk:
        with bulk.file("good") as f:
            f.add_cells(batch([put(b"x", b"q", 1, b"v")]))
        bad = bulk.file("no_ts")
        bad.add_cells(batch([put(b"n", b"q", None, b"v")]))  # a put without a timestamp
        with pytest.raises(MutationsRejectedError, match="row 'n' column 'f':'q' has no timestamp"):
            bad.flush()
        with pytest.raises(MutationsRejectedError, match="no timestamp"):  # it stays failed
            bad.add_cells(batch([put(b"o", b"q", 1, b"v")]))
        bad.abort()
        assert bulk.files_left() == 1
        bulk.load()
    assert all_versions(conn_b, versions_table) == [(b"x", b"f", b"q", 1, b"v")]


def test_cells_of_one_batch_are_sorted_and_exact_duplicates_dropped_by_the_gateway(conn_b, versions_table):
    with conn_b.bulk_import(versions_table) as bulk:
        with bulk.file("f") as f:
            f.add_cells(batch([put(b"b", b"q", 1, b"b1"), put(b"a", b"q", 1, b"a1"), put(b"a", b"q", 2, b"a2"),
                               put(b"a", b"q", 1, b"a1-again")]))  # unsorted, and a's key at 1 twice
            f.add_cells(batch([put(b"b", b"q", 1, b"b1-again"), put(b"c", b"q", 1, b"c1")]))  # starts at the last key
        bulk.load()
    assert all_versions(conn_b, versions_table) == [(b"a", b"f", b"q", 2, b"a2"), (b"a", b"f", b"q", 1, b"a1"),
                                                    (b"b", b"f", b"q", 1, b"b1"), (b"c", b"f", b"q", 1, b"c1")]


def test_a_file_written_again_replaces_it_and_an_aborted_file_is_discarded(conn_b, versions_table):
    with conn_b.bulk_import(versions_table) as bulk:
        with bulk.file("f") as f:
            f.add_cells(batch([put(b"first", b"q", 1, b"v")]))
        with bulk.file("f") as f:  # written again (as after a lost connection): replaces the first
            f.add_cells(batch([put(b"second", b"q", 1, b"v")]))
        half = bulk.file("g")
        half.add_cells(batch([put(b"half", b"q", 1, b"v")]))
        with pytest.raises(AccumuloError, match=r"file\(s\) \[g\] still being written"):
            bulk.load()
        half.abort()  # discarded: never loaded
        assert bulk.files_left() == 1
        bulk.load()
    assert all_versions(conn_b, versions_table) == [(b"second", b"f", b"q", 1, b"v")]


@contextlib.contextmanager
def staging_gateway(accumulo, staging: Path) -> Iterator[Connection]:
    """A connection to the deployable jar, a standalone gateway of B staging bulk files under ``staging``."""
    gateway = StandaloneGateway(accumulo["b"], extra_properties={"gateway.bulk.dir": staging.as_uri()})
    gateway.start()
    try:
        with gateway.connect() as conn:
            yield conn
    finally:
        gateway.stop()


def test_the_deployable_jar_stages_under_gateway_bulk_dir(accumulo, conn_b, versions_table, tmp_path):
    """The jar (Accumulo 2.1.6 client) against the 2.1.4 cluster, with gateway.bulk.dir a file: URI: the
    staging directory is there while files wait, and gone after the import."""
    staging = tmp_path / "bulk-staging"
    with staging_gateway(accumulo, staging) as conn:
        with conn.bulk_import(versions_table) as bulk:
            with bulk.file("f") as f:
                f.add_cells(batch([put(b"r", b"q", 42, b"v")]))
            assert sorted(p.name for p in (staging / bulk.bulk_id).iterdir()) == ["_bulk", "f.rf"]
            bulk.load()
            assert not list((staging / bulk.bulk_id).glob("*.rf"))  # moved into the table (a local file system
            # keeps the .crc of the load map the client wrote: removed with the directory)
        assert list(staging.iterdir()) == []
    assert all_versions(conn_b, versions_table) == [(b"r", b"f", b"q", 42, b"v")]


def test_a_load_killed_inside_accumulos_writability_probe_does_not_block_its_resume(accumulo, conn_b, versions_table,
                                                                                   tmp_path):
    """Accumulo's client probes a bulk directory by creating a file ``isWritable`` in it and deleting it again, and
    refuses a directory where that file exists ("... is not writable."). A gateway killed between the two left it
    behind, and every resume of that bootstrap then failed (chaos seed 9722: 62 attempts of one bulk bootstrap).
    The gateway removes the probe's leftover before it loads."""
    staging = tmp_path / "bulk-staging"
    with staging_gateway(accumulo, staging) as conn, conn.bulk_import(versions_table) as bulk:
        with bulk.file("f") as f:
            f.add_cells(batch([put(b"r", b"q", 7, b"v")]))
        (staging / bulk.bulk_id / "isWritable").touch()  # what the killed load left
        bulk.load()
    assert all_versions(conn_b, versions_table) == [(b"r", b"f", b"q", 7, b"v")]


def test_bulk_calls_on_a_missing_table_or_with_a_bad_name_are_refused(conn_b, versions_table):
    with pytest.raises(AccumuloError, match="does not exist"):
        conn_b.bulk_import("no_such_table_for_bulk")
    with conn_b.bulk_import(versions_table) as bulk, pytest.raises(AccumuloError, match="bulk file name"):
        bulk.file("../escape")


def test_an_upstream_proxy_gives_the_clear_error(accumulo, versions_table):
    b = accumulo["b"]
    with UpstreamProxy(b.gateway_host, b.gateway_port) as upstream, \
            Connection("127.0.0.1", upstream.port, secret_file=b.secret_file) as conn:
        assert conn.table_exists(versions_table)
        with pytest.raises(AccumuloError, match="bulk imports need this project's gateway") as info:
            conn.bulk_import(versions_table)
        assert "unknown-method" in str(info.value)
        with conn.batch_writer(versions_table) as w:  # the same batches go the ordinary way there
            w.add_cells(batch([put(b"r", b"q", 3, b"v")]))
        assert all_versions(conn, versions_table) == [(b"r", b"f", b"q", 3, b"v")]


# --- sort_cells (no cluster) ---------------------------------------------------------------------------------


def _java_key(c: Cell) -> tuple:
    """Accumulo's Key order: row, cf, cq, cv ascending (bytes), timestamp descending, a delete first."""
    return (c[0], c[1], c[2], c[3], -(c[4] or 0), not c[6])


def test_sort_cells_puts_a_batch_in_key_order_without_duplicates():
    rng = random.Random(3)
    parts = [b"", b"a", b"a\x00", b"b", b"\x7f", b"\x80", b"\xff"]
    for _ in range(30):
        cells: list[Cell] = []
        for _ in range(rng.randrange(0, 60)):
            deleted = rng.random() < 0.2
            cells.append((rng.choice(parts[1:]), rng.choice(parts), rng.choice(parts), rng.choice([b"", b"A"]),
                          rng.randrange(0, 4), None if deleted else b"%d" % rng.randrange(9), deleted))
        expected: list[Cell] = []
        for c in sorted(cells, key=_java_key):  # stable: the first of equal keys stays first
            if not expected or _java_key(expected[-1]) != _java_key(c):
                expected.append(c)
        out = sort_cells(batch(cells))
        assert [tuple(r.values()) for r in out.to_pylist()] == expected
    rising = batch([put(b"a", b"q", 2, b"v"), put(b"a", b"q", 1, b"v"), put(b"b", b"q", 1, b"v")])
    assert sort_cells(rising).equals(rising)
    no_delete_column = batch([put(b"b", b"q", 1, b"v"), delete(b"a", b"q", 1)]).drop_columns(["delete"])
    assert sort_cells(no_delete_column).column("delete").to_pylist() == [True, False]
