"""The ``packed`` queue value encoding (connector/packed.py): its round trip, what it refuses, that the native
drain translates packed values exactly as the Python translators translate their decoded form (and as JSON
values of the same cells), and a real queue chosen packed at init, filled, relayed and drained to B."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector import _native
from connector.combine import CombineConfig, CombineConfigError
from connector.export import AccumuloExporter, DifferenceUpdate
from connector.export.native_translate import translate_batch
from connector.packed import MAGIC, pack, unpack
from connector.queue import ExportQueue, QueueConfig, QueueConfigError, drain_queue
from connector.serializers import serializer_from_name
from connector.transactions import RowTransactions
from tests.conftest import unique_table
from tests.test_native_translators import exports_batch, good_cell, good_cells, good_op, python_reference


def native_packed(name: str, values: list[bytes]) -> list[tuple[str, object]]:
    """Per export, as ``python_reference`` gives it: the packed values through the native path."""
    changes, errors = translate_batch(name, exports_batch(values), "packed")
    out: list[tuple[str, object]] = [("ok", []) for _ in values]
    for c in changes.to_pylist():
        out[c["entry"]][1].append((c["row"], c["cf"], c["cq"], c["cv"], c["value"]))  # type: ignore[union-attr]
    for e in errors:
        out[e.entry] = (e.kind, e.reason)
    return out


def packed_reference(name: str, values: list[bytes]) -> list[tuple[str, object]]:
    """The Python translator over each packed value's decoded form."""
    return python_reference(name, values, loads=unpack)


GOOD = {
    "difference": st.fixed_dictionaries({}, optional={"old": good_cells, "new": good_cells}),
    "cells": st.one_of(st.lists(good_cell({}), max_size=6), good_cell({})),
    "replicator": st.lists(good_op, min_size=1, max_size=6),
}


@pytest.mark.parametrize("name", list(GOOD))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_packed_values_translate_natively_as_their_json(name, data):
    """The same cells give the same changes whether the queue holds them as JSON or packed, and the native
    path decides every well-formed packed value itself (no Python fallback)."""
    objs = data.draw(st.lists(GOOD[name], max_size=10))
    packed = [pack(o) for o in objs]
    assert native_packed(name, packed) == python_reference(name, [json.dumps(o).encode() for o in objs])
    assert native_packed(name, packed) == packed_reference(name, packed)
    _, errors, fallback = _native.translate(name, pa.array(packed, pa.binary()), "packed")
    assert (errors, fallback) == ([], [])


@settings(max_examples=300, deadline=None)
@given(obj=st.one_of(GOOD["difference"], GOOD["cells"], GOOD["replicator"]))
def test_unpack_gives_the_canonical_form_which_packs_to_the_same_bytes(obj):
    data = pack(obj)
    assert data[:2] == MAGIC
    canonical = unpack(data)
    assert pack(canonical) == data
    assert unpack(pack(canonical)) == canonical


def test_canonical_forms():
    cell = {"row": "r", "cf": "f", "cq": "q", "value": "v"}
    assert unpack(pack({"new": [cell]})) == {"old": [], "new": [cell]}
    assert unpack(pack(DifferenceUpdate(old=[cell]))) == {"old": [cell], "new": []}
    assert unpack(pack(([cell], None))) == {"old": [cell], "new": []}
    assert unpack(pack(cell)) == [cell]
    # numbers are kept as their decimal text, bytes as bytes, an empty cv is no cv
    assert unpack(pack([{"row": b"r", "cf": "f", "cq": 7, "cv": "", "value": 2.5}])) == [
        {"row": b"r", "cf": b"f", "cq": b"7", "value": b"2.5"}]
    assert unpack(pack([{"row": "r", "cf": "f", "cq": "q", "cv": "a&b", "value": None}])) == [
        {"row": "r", "cf": "f", "cq": "q", "cv": "a&b", "delete": True}]
    # bytes-like fields, and mappings that are not dicts
    assert unpack(pack([{"row": bytearray(b"r"), "cf": memoryview(b"f"), "cq": "q", "value": "v"}])) == [
        {"row": b"r", "cf": b"f", "cq": b"q", "value": b"v"}]
    assert unpack(pack(MappingProxyType({"new": (MappingProxyType(cell),)}))) == {"old": [], "new": [cell]}
    ops = [{"op": "set", **cell}, {"op": "delete", "row": "r", "cf": "f", "cq": "q"}]
    assert unpack(pack({"ops": ops})) == ops
    # a packed value is about a third of its JSON (41 bytes here, 119 in JSON)
    update = {"old": [{"row": "w123", "cf": "doc", "cq": "d4567", "value": "1"}],
              "new": [{"row": "w124", "cf": "doc", "cq": "d4567", "value": "1"}]}
    assert len(pack(update)) * 2.5 <= len(serializer_from_name("json").dumps(update))


@pytest.mark.parametrize(("obj", "error", "message"), [
    ({"old": [], "other": []}, ValueError, r"unknown fields \['other'\]"),
    ({"new": [{"row": "r", "cf": "f"}]}, ValueError, r"new\[0\]: the cell lacks cq"),
    ({"new": [{"row": "", "cf": "f", "cq": "q", "value": "v"}]}, ValueError, r"new\[0\]: the cell has an empty row"),
    ({"new": [{"row": "r", "cf": "f", "cq": "q"}]}, ValueError, r"new\[0\]: the cell lacks a value"),
    ({"old": {"row": "r"}}, TypeError, "old must be a list of cells, not dict"),
    ([{"row": True, "cf": "f", "cq": "q", "value": "v"}], TypeError, "cell 0: row must be text, bytes or a number"),
    ([{"op": "put", "row": "r", "cf": "f", "cq": "q"}], ValueError, "operation 0: op must be 'set' or 'delete'"),
    ([{"op": "set", "row": "r", "cf": "f", "cq": "q"}], ValueError, "operation 0: the cell lacks a value"),
    ([{"op": "set", "row": "r", "cf": "f", "cq": "q", "value": "v"}, {"row": "r", "cf": "f", "cq": "q"}],
     ValueError, "operation 1: op must be 'set' or 'delete', got None"),
    ([{"row": "r", "cf": "f", "cq": "q", "value": "v"}, {"op": "set", "row": "r", "cf": "f", "cq": "q"}],
     ValueError, "cell 1: a list mixes operations and cells"),
    ("text", TypeError, "packed takes a difference update, cells or operations, not str"),
    ([1, 2], TypeError, "cell 0 must be a mapping, not int"),
])
def test_what_pack_refuses_is_named(obj, error, message):
    with pytest.raises(error, match=message):
        pack(obj)


@pytest.mark.parametrize(("data", "message"), [
    (b'{"new": []}', "not a packed value"),
    (MAGIC + b"\x09", "unknown shape 9"),
    (MAGIC + b"\x02\x01\x02\x01r\x01f", "ends early"),
    (MAGIC + b"\x02\x00\x00", "1 bytes after its end"),
    (MAGIC + b"\x02\x01\x08\x01r\x01f\x01q", "unknown cell flags 0x08"),
    (MAGIC + b"\x02\x01\x06\x01\xff\x01f\x01q\x01v", "not UTF-8"),
    (MAGIC + b"\x01\x01\x00\x01r\x01f\x01q\x00", "difference update has a cell without a value"),
    (MAGIC + b"\x02" + b"\xff" * 11, "overlong varint"),
    # a tenth varint byte above 1 holds bits past 64: refused, not truncated (the crate once read this count as 0)
    (MAGIC + b"\x02" + b"\x80" * 9 + b"\x02", "overlong varint at byte 3"),
    # pack never writes an empty row (Python's decoder once gave one back)
    (MAGIC + b"\x02\x01\x02\x00\x01f\x01q\x01v", "a cell with an empty row at byte 4"),
])
def test_malformed_packed_values_are_refused_and_drained_as_undecodable(data, message):
    with pytest.raises(ValueError, match=message):
        unpack(data)
    [(kind, reason)] = native_packed("cells", [data])
    assert kind == "undecodable"
    assert isinstance(reason, str) and reason.startswith("undecodable value: ValueError: ") and message in reason


#: the test vectors every side checks: the Rust decoder, this file (pack and unpack), the Java encoder
VECTORS = json.loads((Path(__file__).parent / "vectors" / "packed.json").read_text())["vectors"]


def _from_vector(obj):
    """A vector's canonical object: a field written ``{"hex": ...}`` is bytes."""
    if isinstance(obj, dict):
        return bytes.fromhex(obj["hex"]) if set(obj) == {"hex"} else {k: _from_vector(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_vector(v) for v in obj]
    return obj


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"][:40] for v in VECTORS])
def test_the_shared_vectors_pack_and_unpack_exactly(vector):
    canonical, data = _from_vector(vector["canonical"]), bytes.fromhex(vector["packed"])
    assert pack(canonical) == data
    assert unpack(data) == canonical
    # what the drain makes of them is what the Python translator makes of their decoded form
    name = "difference" if isinstance(canonical, dict) else "replicator" if "op" in canonical[0] else "cells"
    assert native_packed(name, [data]) == packed_reference(name, [data])
    assert native_packed(name, [data])[0][0] == "ok"


@pytest.mark.parametrize("cv", [None, "", 0, 0.0, False, [], {}])
def test_a_falsy_visibility_is_no_visibility_in_either_encoding(cv):
    """JSON keeps such a ``cv`` in the queue and ``pack`` leaves it out, but both mean no visibility: the same
    destination cell, natively and in Python."""
    cell = {"row": "r", "cf": "f", "cq": "q", "cv": cv, "value": "v"}
    assert unpack(pack([cell])) == [{"row": "r", "cf": "f", "cq": "q", "value": "v"}]
    for name, obj in (("cells", [cell]), ("difference", {"new": [cell]})):
        as_json = python_reference(name, [json.dumps(obj).encode()])
        assert as_json == [("ok", [(b"r", b"f", b"q", b"", b"v")])]
        assert native_packed(name, [pack(obj)]) == packed_reference(name, [pack(obj)]) == as_json


def test_a_value_of_another_translators_shape_gets_that_translators_message():
    """The native path hands such values to Python, which says what the JSON path says."""
    difference = {"old": [], "new": [{"row": "r", "cf": "f", "cq": "q", "value": "v"}]}
    cells = [{"row": "r", "cf": "f", "cq": "q", "value": "v"}]
    for name, obj in (("cells", difference), ("replicator", cells), ("replicator", difference),
                      ("difference", cells)):
        assert native_packed(name, [pack(obj)]) == packed_reference(name, [pack(obj)])
        assert native_packed(name, [pack(obj)])[0][0] == "translation"
    # the cells translator reads an operation log natively, as Python reads its decoded form
    ops = [{"op": "set", "row": "r", "cf": "f", "cq": "q", "value": "v"}, {"op": "delete", "row": "s", "cf": "f",
                                                                        "cq": "q"}]
    assert native_packed("cells", [pack(ops)]) == packed_reference("cells", [pack(ops)]) == [
        ("ok", [(b"r", b"f", b"q", b"", b"v"), (b"s", b"f", b"q", b"", None)])]


def test_packed_is_a_value_encoding_not_a_key_encoding():
    with pytest.raises(QueueConfigError, match="key_serializer 'packed' encodes export values"):
        QueueConfig(table="t", qid="q", num_buckets=2, key_serializer="packed")
    with pytest.raises(CombineConfigError, match="a combine queue's keys and deltas are values, not cells"):
        CombineConfig(table="t", cid="c", num_buckets=2, value_serializer="packed")


# --- a real queue on the MiniAccumuloCluster ----------------------------------------------------------------

def test_a_packed_queue_is_filled_relayed_and_drained_to_b(conn_a, conn_b):
    """A queue chosen packed at init stores it, refuses to be opened as JSON, holds packed entries (a third of
    JSON's bytes), takes a row transaction's exports through the outbox, and drains to the same cells a JSON
    queue of the same updates gives."""
    tables = {enc: unique_table(f"pk_{enc}") for enc in ("json", "packed")}
    dest = {enc: unique_table(f"pk_dest_{enc}") for enc in ("json", "packed")}
    updates = [(f"doc{i}", {"old": [{"row": f"w{i % 7}", "cf": "doc", "cq": f"d{i}", "value": "1"}] if i % 3 else [],
                            "new": [{"row": f"w{(i + 1) % 7}", "cf": "doc", "cq": f"d{i}", "value": str(i)}]},
                1000 + i) for i in range(200)]
    value_bytes = {}
    for enc, table in tables.items():
        config = QueueConfig(table=table, qid="q", num_buckets=4, value_serializer=enc)
        with ExportQueue(conn_a, config) as q:
            q.init()
            q.add_all(updates)
        value_bytes[enc] = sum(len(c.value) for c in conn_a.scan(table) if c.cf == b"e")
        if enc == "packed":
            assert all(c.value.startswith(MAGIC) for c in conn_a.scan(table) if c.cf == b"e")
            with pytest.raises(QueueConfigError, match="value_serializer"):
                ExportQueue(conn_a, QueueConfig(table=table, qid="q", num_buckets=4)).init()
            txs = RowTransactions(conn_a, table + "_src", relay_delay=None)
            txs.init()
            txs.run(b"doc-tx", lambda tx, queue=config: tx.export(queue, "doc-tx", DifferenceUpdate(
                new=[{"row": "wtx", "cf": "doc", "cq": "dtx", "value": "t"}])))
            txs.close()
        exporter = AccumuloExporter(conn_b, dest[enc], "difference").ensure_table()
        stats = drain_queue(conn_a, config, exporter)
        assert stats.dead_lettered == 0
        assert stats.exported == len(updates) + (enc == "packed")
    assert value_bytes["packed"] * 2.5 <= value_bytes["json"]
    cells = {enc: [(c.row, c.cf, c.cq, c.ts, c.value) for c in conn_b.scan(t)] for enc, t in dest.items()}
    tx_cells = [c for c in cells["packed"] if c[0] == b"wtx"]
    assert len(tx_cells) == 1 and tx_cells[0][4] == b"t"
    assert [c for c in cells["packed"] if c[0] != b"wtx"] == cells["json"]
    assert len(cells["json"]) == len(updates)


@pytest.mark.spark
def test_the_queue_source_reads_a_packed_queue_only_when_told(spark, accumulo, conn_a):
    """Options naming JSON for a packed queue are refused when Spark plans the read (the sink would dead-letter
    every entry as undecodable); with ``queue.value_serializer`` packed the entries come through as stored."""
    from connector.jobs import DrainJob

    config = QueueConfig(table=unique_table("pk_src"), qid="q", num_buckets=3, value_serializer="packed")
    with ExportQueue(conn_a, config) as q:
        q.init()
        q.add("k", {"new": [{"row": "r", "cf": "f", "cq": "q", "value": "v"}]}, 5)
    job = DrainJob(source=accumulo["a"].gateway_options(), dest=accumulo["b"].gateway_options(), queue=config,
                   dest_table="unused")
    options = job.source_options()
    assert options["queue.value_serializer"] == "packed"
    rows = spark.read.format("export-queue").options(**options).load().collect()
    assert [(r.key, r.value, r.seq) for r in rows] == [(b'"k"', pack({"new": [{"row": "r", "cf": "f", "cq": "q",
                                                                               "value": "v"}]}), 5)]
    with pytest.raises(Exception, match="value_serializer 'packed', not 'json'"):
        spark.read.format("export-queue").options(**{**options, "queue.value_serializer": "json"}).load().collect()
