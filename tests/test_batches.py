"""Batches, not entries (issue 8, phase 2) on a real Accumulo: ``Connection.scan_batches``,
``BatchWriter.add_cells`` and ``AccumuloExporter.export_batch`` against their per-entry counterparts."""

from __future__ import annotations

import json
import random
import time

import pyarrow as pa
import pytest

from connector.accumulo import (
    UPDATE_SCHEMA,
    Connection,
    InvalidMutationError,
    Mutation,
    MutationsRejectedError,
    Range,
    RetryPolicy,
)
from connector.accumulo import writer as writer_module
from connector.export import AccumuloExporter, CellChange, EntryFailure, SequencedExport
from connector.export.core import translation_reason
from connector.export.tombstones import hide_tombstones_filter
from connector.serializers import JsonSerializer
from integration.harness import StandaloneGateway

from .conftest import unique_table

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module", autouse=True)
def visibilities_a_and_b(accumulo):
    """The gateway user may read cells labelled A and B (restored afterwards), so scans compare them too."""
    restore = []
    for name in ("a", "b"):
        conn = accumulo[name].connect()
        user = accumulo[name].user
        before = conn.call("getUserAuthorizations", user)
        conn.call("changeUserAuthorizations", user, {*before, b"A", b"B"})
        restore.append((conn, user, before))
    yield
    for conn, user, before in restore:
        conn.call("changeUserAuthorizations", user, set(before))
        conn.close()


def updates(cells: list[tuple]) -> pa.RecordBatch:
    """(row, cf, cq, cv, ts, value) tuples as an UPDATE_SCHEMA batch; a None value is a delete."""
    cols = list(zip(*cells, strict=True))
    return pa.record_batch([pa.array(c, f.type) for c, f in zip(cols, UPDATE_SCHEMA, strict=False)]
                           + [pa.array([v is None for v in cols[5]], pa.bool_())], schema=UPDATE_SCHEMA)


def cells_of(conn, table, **kw):
    return [tuple(c) for c in conn.scan(table, **kw)]


def batch_cells(conn, table, **kw):
    out = []
    for batch in conn.scan_batches(table, **kw):
        assert batch.schema.names == ["row", "cf", "cq", "cv", "ts", "value"]
        assert batch.schema.field("ts").type == pa.int64()
        out += [tuple(r.values()) for r in batch.to_pylist()]
    return out


# --- scan_batches ---------------------------------------------------------------------------------

def test_scan_batches_equals_scan_cell_for_cell(conn_a, table):
    with conn_a.batch_writer(table) as w:
        for i in range(3000):
            w.add_mutation(Mutation(b"r%04d\xff" % (i // 3)).put(b"f%d" % (i % 3), b"q", b"" if i % 11 == 0 else
                                                                  b"\x00v%d" % i, visibility=b"", timestamp=i))
    seen_pages = [b.num_rows for b in conn_a.scan_batches(table, batch_size=700)]
    assert sum(seen_pages) == 3000 and max(seen_pages) <= 700
    assert batch_cells(conn_a, table, batch_size=700) == cells_of(conn_a, table)
    rng = Range.rows(b"r0100\xff", b"r0200\xff")
    assert batch_cells(conn_a, table, range=rng, columns=[b"f1"], batch_size=37) == cells_of(
        conn_a, table, range=rng, columns=[b"f1"])
    assert list(conn_a.scan_batches(table, range=Range.exact_row(b"none"))) == []


def test_scan_batches_resume_after_gateway_restart(accumulo, table):
    with accumulo["a"].connect() as direct, direct.batch_writer(table) as w:
        for i in range(5000):
            w.add_mutation(Mutation(b"s%05d" % i).put("f", "q", b"%d" % i, timestamp=3))
        w.flush()
        expected = cells_of(direct, table)
    gw = StandaloneGateway(accumulo["a"], accumulo.classpath)
    port = gw.start()
    conn = Connection("127.0.0.1", port, secret_file=accumulo["a"].secret_file,
                      retry=RetryPolicy(attempts=20, max_seconds=60, max_wait=1.0))
    try:
        got = []
        for n, batch in enumerate(conn.scan_batches(table, batch_size=500)):
            got += [tuple(r.values()) for r in batch.to_pylist()]
            if n == 2:
                gw.kill()
                gw.start()
        assert got == expected
    finally:
        conn.close()
        gw.stop()


# --- add_cells ------------------------------------------------------------------------------------

def test_add_cells_round_trip_with_deletes_at_ts(conn_a, table):
    with conn_a.batch_writer(table) as w:
        w.add_mutation(Mutation("m").put("f", "q", "before", timestamp=1))
        w.add_cells(updates([(b"r%03d" % i, b"f", b"q%d" % j, b"A|B" if j else b"", 10 + j, b"v%d" % i)
                             for i in range(200) for j in range(3)]))
        w.flush()
        assert w.cells_added == 600
        # deletes at ts 10 hide the q0 versions (ts 10) only; a newer put of one survives
        w.add_cells(updates([(b"r%03d" % i, b"f", b"q0", b"", 10, None) for i in range(200)]
                            + [(b"r000", b"f", b"q0", b"", 50, b"newer")]))
    got = cells_of(conn_a, table)
    assert (b"m", b"f", b"q", b"", 1, b"before") in got
    assert (b"r000", b"f", b"q0", b"", 50, b"newer") in got
    assert not [c for c in got if c[2] == b"q0" and c[0] != b"r000"]
    assert len([c for c in got if c[2] in (b"q1", b"q2") and c[3] == b"A|B"]) == 400


def test_add_cells_without_ts_gets_server_time(conn_a, table):
    before = int(time.time() * 1000) - 60_000
    with conn_a.batch_writer(table) as w:
        w.add_cells(updates([(b"r", b"f", b"q", b"", None, b"v")]))
    [(_, _, _, _, ts, value)] = cells_of(conn_a, table)
    assert value == b"v" and ts > before


@pytest.mark.parametrize("bad, match", [
    ((b"bad", b"f", b"q", b"a&|b", 1, b"v"), r"row b'bad': unexpected .* in visibility"),
    ((b"mix", b"f", b"q", b"a&b|c", 1, b"v"), r"row b'mix': cannot mix & and \|"),
    ((b"", b"f", b"q", b"", 1, b"v"), "row must not be empty"),
    ((b"nov", b"f", b"q", b"", 1, None), "a put needs a value"),
    ((b"neg", b"f", b"q", b"", -5, b"v"), "timestamp must be"),
])
def test_add_cells_invalid_cells_refused_nothing_sent(conn_a, table, monkeypatch, bad, match):
    sent = []
    real_send = writer_module.send_frame
    monkeypatch.setattr(writer_module, "send_frame", lambda c, f: (sent.append(f), real_send(c, f)))
    batch = updates([(b"good", b"f", b"q", b"A", 1, b"v"), bad])
    if bad[5] is None:  # a put without a value: delete false although the value is null
        batch = batch.set_column(6, UPDATE_SCHEMA.field("delete"), pa.array([False, False]))
    with conn_a.batch_writer(table) as w:
        with pytest.raises(InvalidMutationError, match=match):
            w.add_cells(batch)
        assert w.cells_added == 0
    assert sent == [] and cells_of(conn_a, table) == []


def test_add_cells_frames_keep_the_frame_budget(conn_a, table, monkeypatch):
    sent = []
    real_send = writer_module.send_frame
    monkeypatch.setattr(writer_module, "send_frame", lambda c, f: (sent.append(len(f)), real_send(c, f)))
    big = 20_000
    cells = [(b"r%03d" % i, b"f", b"q%d" % j, b"", 5, bytes([65 + j]) * (big if j == 0 else 10))
             for i in range(40) for j in range(2)]
    limit = 64 << 10
    with conn_a.batch_writer(table, max_frame_bytes=limit) as w:
        w.add_cells(updates(cells))
    assert len(sent) > 5 and all(n + big <= limit for n in sent)
    assert cells_of(conn_a, table) == sorted(cells)
    # 63 KB: under the frame limit alone, but not with its largest value on top (the frames.py rule)
    with conn_a.batch_writer(table, max_frame_bytes=limit) as w, \
            pytest.raises(InvalidMutationError, match="row b'wide'"):
        w.add_cells(updates([(b"wide", b"f", b"q%d" % j, b"", 1, b"x" * 9000) for j in range(7)]))


def test_add_cells_replayed_after_the_writer_expired(accumulo, table):
    gw = StandaloneGateway(accumulo["a"], accumulo.classpath, idle_timeout_ms=1000)
    port = gw.start()
    conn = Connection("127.0.0.1", port, secret_file=accumulo["a"].secret_file)
    try:
        with conn.batch_writer(table) as w:
            w.add_cells(updates([(b"before", b"f", b"q", b"", 1, b"1")]))
            w.flush()
            first_id = w.writer_id
            time.sleep(3)  # the server-side writer expires; the next frames go to a writer nobody knows
            w.add_mutation(Mutation("mutation").put("f", "q", "2", timestamp=1))
            w.add_cells(updates([(b"after%d" % i, b"f", b"q", b"", 1, b"2") for i in range(100)]))
            w.flush()  # UnknownWriter: reopened, and the mutation and the batch re-encoded and replayed
            assert w.writer_id != first_id
        assert [c[0] for c in cells_of(conn, table)] == sorted(
            [b"before", b"mutation", *[b"after%d" % i for i in range(100)]])
    finally:
        conn.close()
        gw.stop()


def test_add_cells_rejection_reopens_the_writer(conn_a, table):
    conn_a.set_table_property(table, "table.constraint.2",
                              "org.apache.accumulo.core.data.constraints.VisibilityConstraint")
    time.sleep(1.5)  # constraint configuration propagates to the tablet server
    with conn_a.batch_writer(table) as w:
        w.add_cells(updates([(b"secret", b"f", b"q", b"TOPSECRET", 1, b"v")]))
        with pytest.raises(MutationsRejectedError, match="secret|onstraint"):
            w.flush()
        w.add_cells(updates([(b"public", b"f", b"q", b"", 1, b"v")]))
    assert [c[0] for c in cells_of(conn_a, table)] == [b"public"]


# --- export_batch ---------------------------------------------------------------------------------

def exports_batch(exports: list[SequencedExport], serialize=json.dumps) -> pa.RecordBatch:
    return pa.record_batch({
        "key": pa.array([json.dumps(e.key).encode() for e in exports], pa.binary()),
        "value": pa.array([v if isinstance(v := serialize(e.value), bytes) else v.encode() for e in exports],
                          pa.binary()),
        "seq": pa.array([e.seq for e in exports], pa.int64()),
    })


def visible_and_raw(conn, table):
    """The cells readers see, and every cell including tombstones (the filter overridden to keep all)."""
    keep_all = hide_tombstones_filter(negate=False)
    keep_all = type(keep_all)(keep_all.priority, keep_all.name, keep_all.iterator_class,
                              {**keep_all.properties, "valueRegex": ".*"})
    return cells_of(conn, table), cells_of(conn, table, iterators=[keep_all])


def test_export_batch_returns_poison_entries_and_writes_the_rest(conn_b):
    table = unique_table("poison")
    exporter = AccumuloExporter(conn_b, table, "difference").ensure_table()
    good = [SequencedExport(f"k{i}", {"new": [{"row": f"r{i}", "cf": "f", "cq": "q", "value": "v"}]}, 10 + i)
            for i in range(4)]
    bad_translation = SequencedExport("b", {"old": 5}, 20)
    bad_visibility = SequencedExport("c", {"new": [{"row": "vis", "cf": "f", "cq": "q", "cv": "a&|b",
                                                    "value": "v"}]}, 21)
    batch = exports_batch([good[0], bad_translation, good[1], bad_visibility, good[2], good[3]])
    values = batch.column("value").to_pylist()
    values[4] = b"{not json"
    batch = batch.set_column(1, "value", pa.array(values, pa.binary()))

    failures = exporter.export_batch(batch)

    def python_reason(export):
        try:
            exporter.mutations(export)
        except ValueError as exc:
            return translation_reason(exc)
        raise AssertionError("expected a failure")

    try:
        JsonSerializer().loads(b"{not json")
    except Exception as exc:  # noqa: BLE001
        undecodable = f"undecodable value: {type(exc).__name__}: {exc}"
    assert failures == [EntryFailure(1, "translation", python_reason(bad_translation)),
                        EntryFailure(3, "translation", python_reason(bad_visibility)),
                        EntryFailure(4, "undecodable", undecodable)]
    assert "row b'vis'" in failures[1].reason
    assert cells_of(conn_b, table) == [(b"r%d" % i, b"f", b"q", b"", 10 + i, b"v") for i in (0, 1, 3)]
    assert exporter.exported == 3
    exporter.close()
    conn_b.delete_table(table)


def swap_translator(export: SequencedExport):
    """A user translator (module:callable, the slow path): writes then deletes cells of one row, with
    repeats, so the exporter's same-cell collapse decides what is written."""
    row = export.key if isinstance(export.key, bytes) else export.key.encode()
    for op in export.value:
        yield CellChange(row, b"f", op["cq"].encode(), value=None if op["v"] is None else op["v"].encode())


def random_exports(kind: str, n: int, rnd: random.Random) -> list[SequencedExport]:
    """Valid exports with repeated cells within one export and across exports; distinct seqs."""
    seqs = rnd.sample(range(1, 10 * n), n)

    def cell(with_value: bool = True):
        c = {"row": f"r{rnd.randrange(6)}", "cf": "f", "cq": f"q{rnd.randrange(3)}",
             "cv": rnd.choice(["", "", "A", "A|B"])}
        if with_value:
            c["value"] = f"v{rnd.randrange(5)}"
        return c

    out = []
    for seq in seqs:
        if kind == "difference":
            value: object = {"old": [cell() for _ in range(rnd.randrange(3))],
                             "new": [cell() for _ in range(rnd.randrange(3))]}
        elif kind == "replicator":
            value = [dict(cell(), op="set") if rnd.random() < 0.6 else dict(cell(False), op="delete")
                     for _ in range(rnd.randrange(1, 5))]
        elif kind == "cells":
            value = [dict(cell(), delete=rnd.random() < 0.3) for _ in range(rnd.randrange(1, 4))]
        else:
            value = [{"cq": f"q{rnd.randrange(2)}", "v": rnd.choice([None, "x", "y"])}
                     for _ in range(rnd.randrange(1, 5))]
        out.append(SequencedExport(f"r{rnd.randrange(4)}" if kind == "user" else "k", value, seq))
    return out


@pytest.mark.parametrize("translator, kind, mode", [
    ("difference", "difference", "delete"),
    ("replicator", "replicator", "delete"),
    ("cells", "cells", "delete"),
    ("tests.test_batches:swap_translator", "user", "delete"),
    ("difference", "difference", "tombstone"),
    ("tests.test_batches:swap_translator", "user", "tombstone"),
])
@pytest.mark.parametrize("seed", [1, 2])
def test_export_batch_and_export_leave_the_same_state(conn_b, translator, kind, mode, seed):
    rnd = random.Random(seed)
    exports = random_exports(kind, 300, rnd)
    per_entry, batched = unique_table("per_entry"), unique_table("batched")
    a = AccumuloExporter(conn_b, per_entry, translator, delete_mode=mode).ensure_table()
    b = AccumuloExporter(conn_b, batched, translator, delete_mode=mode).ensure_table()
    try:
        for start in range(0, len(exports), 70):
            chunk = exports[start:start + 70]
            a.export(chunk)
            assert b.export_batch(exports_batch(chunk)) == []
        assert a.exported == b.exported == len(exports)
        assert visible_and_raw(conn_b, per_entry) == visible_and_raw(conn_b, batched)
        assert cells_of(conn_b, batched), "the workload writes something"
    finally:
        a.close()
        b.close()
        conn_b.delete_table(per_entry)
        conn_b.delete_table(batched)


def test_export_batch_with_a_non_json_serializer_goes_through_python(conn_b):
    table = unique_table("bytes")
    exporter = AccumuloExporter(conn_b, table, "tests.test_batches:swap_translator").ensure_table()
    batch = exports_batch([SequencedExport("r", [{"cq": "q", "v": "x"}], 7)])
    batch = batch.set_column(0, "key", pa.array([b"raw-row"], pa.binary()))
    assert exporter.export_batch(batch, key_serializer="bytes") == []
    assert cells_of(conn_b, table) == [(b"raw-row", b"f", b"q", b"", 7, b"x")]
    exporter.close()
    conn_b.delete_table(table)
