"""Native columnar translators give what the Python translators give (after the exporter's same-cell collapse),
and the same per-export error messages."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector import _native
from connector.export import native_translate
from connector.export.core import SequencedExport, TranslationError
from connector.export.native_translate import translate_batch
from connector.export.translators import BUILT_IN
from connector.serializers import JsonSerializer

NAMES = list(native_translate.NATIVE_TRANSLATORS)


JSON_LOADS = JsonSerializer().loads


def python_reference(name: str, values: list[bytes],
                     loads: Callable[[bytes], Any] = JSON_LOADS) -> list[tuple[str, object]]:
    """Per export: ("ok", [(row, cf, cq, cv, value)...]) or (kind, message), the Python way (values decoded
    by ``loads``)."""
    out: list[tuple[str, object]] = []
    for i, raw in enumerate(values):
        try:
            obj = loads(raw)
        except Exception as exc:  # noqa: BLE001
            out.append(("undecodable", f"undecodable value: {type(exc).__name__}: {exc}"))
            continue
        try:
            seen: dict = {}
            for change in BUILT_IN[name](SequencedExport(b"k%d" % i, obj, i)):
                seen.pop(change.cell, None)  # AccumuloExporter.mutations: the last change to a cell wins
                seen[change.cell] = change
            out.append(("ok", [(*c.cell, c.value) for c in seen.values()]))
        except TranslationError as exc:
            out.append(("translation", str(exc)))
        except Exception as exc:  # noqa: BLE001
            out.append(("translation", f"{type(exc).__name__}: {exc}"))
    return out


def exports_batch(values: list[bytes]) -> pa.RecordBatch:
    return pa.record_batch({"key": pa.array([b"k%d" % i for i in range(len(values))], pa.binary()),
                            "value": pa.array(values, pa.binary()),
                            "seq": pa.array(range(len(values)), pa.int64())})


def native_result(name: str, values: list[bytes]) -> list[tuple[str, object]]:
    changes, translated_errors = translate_batch(name, exports_batch(values))
    assert changes.schema == native_translate.CHANGE_SCHEMA
    entries = changes.column("entry").to_pylist()
    assert entries == sorted(entries)
    per_entry: dict[int, list] = {}
    for c in changes.to_pylist():
        per_entry.setdefault(c["entry"], []).append((c["row"], c["cf"], c["cq"], c["cv"], c["value"]))
    errors = {e.entry: (e.kind, e.reason) for e in translated_errors}
    assert len(errors) == len(translated_errors)
    assert not set(errors) & set(per_entry)
    return [errors.get(i) or ("ok", per_entry.get(i, [])) for i in range(len(values))]


# --- JSON values shaped like each translator's input, often slightly wrong ------------------------

text = st.one_of(st.sampled_from(["a", "b", "row", "it's", 'say "hi"', "back\\slash", "tab\t", "\x00", "\x7f",
                                  "caf\u00e9", "\u65e5\u672c", "\u00a0", "\U0001f600", ""]),
                 st.text(max_size=6))
number = st.one_of(st.integers(-(10**30), 10**30), st.sampled_from([0, -0.0, 0.0, 1.0, 1e16, 1e-5, 2.5, 1e300]),
                   st.floats(allow_nan=False, allow_infinity=False))
scalar = st.one_of(text, number, st.booleans(), st.none())
anything = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(text, inner, max_size=3)), max_leaves=6)
field = st.one_of(st.sampled_from(["a", "b", "c"]), st.sampled_from(["a", "b", "c"]), scalar, anything)
good_field = st.sampled_from(["r1", "r2", "f", "q", "\u00e9"])


def good_cell(extra: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    """Well-formed cells (one bad cell fails its whole export), with numbers and falsy cvs."""
    return st.fixed_dictionaries({"row": good_field, "cf": good_field, "cq": good_field,
                                  "value": st.one_of(good_field, number), **extra},
                                 optional={"cv": st.sampled_from(["", "a&b", 0, None, False, []]),
                                           "delete": st.booleans()})


def cell(extra: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    good = good_cell(extra)
    valid = st.fixed_dictionaries({"row": good_field, "cf": good_field, "cq": good_field, **extra},
                                  optional={"cv": st.one_of(st.sampled_from(["", "a&b", "x"]), field),
                                            "value": st.one_of(good_field, field), "delete": field})
    broken = st.dictionaries(st.sampled_from(["row", "cf", "cq", "cv", "value", "delete", "op", "extra"]), field,
                             max_size=7)
    return st.one_of(good, good, good, good, good, good, valid, broken, anything)


good_cells = st.lists(good_cell({}), max_size=6)
difference_value = st.one_of(
    st.fixed_dictionaries({"old": good_cells, "new": good_cells}),
    st.fixed_dictionaries({"old": good_cells, "new": good_cells}),
    st.fixed_dictionaries({}, optional={"old": st.one_of(st.lists(cell({}), max_size=5), field),
                                        "new": st.one_of(st.lists(cell({}), max_size=5), field),
                                        "other": field}),
    st.tuples(st.lists(cell({}), max_size=4), st.lists(cell({}), max_size=4)).map(list),
    anything)
replicator_op = cell({"op": st.sampled_from(["set", "delete", "set", "nope"])})
good_op = good_cell({"op": st.sampled_from(["set", "delete"])})
replicator_value = st.one_of(
    st.lists(good_op, max_size=8), st.lists(good_op, max_size=8), st.lists(replicator_op, max_size=8),
    st.fixed_dictionaries({"ops": st.lists(replicator_op, max_size=8)}), anything)
cells_value = st.one_of(st.lists(cell({}), max_size=8), cell({}), anything)
raw = st.sampled_from([b"", b"NaN", b'{"old": NaN}', b"[1,", b"\xff", b'\xef\xbb\xbf{}', b'{"a":1,"a":2}',
                       b'[{"row":"\\ud800","cf":"f","cq":"q","value":"v"}]', b'{"new": [{"row": "r", "cf": 1e400, '
                       b'"cq": -0, "value": 1E2}]}', b"[" * 200 + b"]" * 200,
                       b'{"new":[{"row":"r","cf":"f","cq":"q","value":"v","x":' + b"9" * 4301 + b"}]}"])


def encoded(value_strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        value_strategy.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8")),
        value_strategy.map(lambda v: json.dumps(v, sort_keys=True, separators=(",", ":")).encode("utf-8")),
        raw)


STRATEGIES = {"difference": difference_value, "replicator": replicator_value, "cells": cells_value}


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_native_equals_python_per_export(name, data):
    values = data.draw(st.lists(encoded(STRATEGIES[name]), max_size=12))
    assert native_result(name, values) == python_reference(name, values)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_ascii_json_is_decided_natively(name, data):
    """Only an error message that must show non-ASCII text needs the Python fallback for valid JSON: the
    native path really does the work."""
    values = data.draw(st.lists(STRATEGIES[name].map(lambda v: json.dumps(v).encode()), max_size=12))
    _, errors, fallback = _native.translate(name, pa.array(values, pa.binary()))
    for i in fallback:
        assert not json.dumps(json.loads(values[i]), ensure_ascii=False).isascii()
        assert python_reference(name, [values[i]])[0][0] == "translation"
    ascii_values = [i for i, v in enumerate(values) if json.dumps(json.loads(v), ensure_ascii=False).isascii()]
    assert not set(ascii_values) & set(fallback)


def test_known_messages_and_shapes():
    values = [
        b'{"old":[{"row":"r","cf":"f","cq":"q","value":"1"}],"new":[{"row":"r","cf":"f","cq":"q","value":1}]}',
        b'{"old":[{"row":"r","cf":"f","cq":"q","cv":"a","value":"1"}],"new":null}',
        b'{"new":[{"row":"","cf":"f","cq":"q","value":"v"}]}',
        b'{"new":[{"row":"r","cf":"f","cq":"q"}]}',
        b'{"new":[{"row":"r","cf":"f","cq":"q","value":[1]}]}',
        b'{"new":"x"}',
        b'[1, 2, 3]',
        b'not json',
    ]
    assert native_result("difference", values) == [
        ("ok", []),
        ("ok", [(b"r", b"f", b"q", b"a", None)]),
        ("translation", "new[0]: cell has an empty row"),
        ("translation", "new[0]: cell {'row': 'r', 'cf': 'f', 'cq': 'q'} lacks value"),
        ("translation", "new[0]: value must be text or bytes, not list"),
        ("translation", "new must be a list of cells, not str"),
        ("translation", "difference update must be {'old': [...], 'new': [...]}, got [1, 2, 3]"),
        ("undecodable", "undecodable value: JSONDecodeError: Expecting value: line 1 column 1 (char 0)"),
    ]


def test_replicator_last_operation_wins_and_cells_deletes():
    log = [{"op": "set", "row": "r", "cf": "f", "cq": "q", "value": "1"},
           {"op": "set", "row": "s", "cf": "f", "cq": "q", "value": "2"},
           {"op": "delete", "row": "r", "cf": "f", "cq": "q"}]
    assert native_result("replicator", [json.dumps(log).encode()]) == [
        ("ok", [(b"s", b"f", b"q", b"", b"2"), (b"r", b"f", b"q", b"", None)])]
    cells = [{"row": "r", "cf": "f", "cq": "q", "value": "v", "delete": 1}, {"row": "s", "cf": "f", "cq": "q"}]
    assert native_result("cells", [json.dumps(cells).encode()]) == [
        ("ok", [(b"r", b"f", b"q", b"", None), (b"s", b"f", b"q", b"", None)])]


def test_changes_become_updates_at_ts_seq():
    exports = exports_batch([b'{"new":[{"row":"r","cf":"f","cq":"q","value":"v"}]}',
                             b'{"old":[{"row":"r","cf":"f","cq":"q","value":"v"}]}'])
    exports = exports.set_column(2, "seq", pa.array([100, 200], pa.int64()))
    updates = native_translate.changes_to_updates(translate_batch("difference", exports)[0], exports.column("seq"))
    assert updates.to_pylist() == [
        {"row": b"r", "cf": b"f", "cq": b"q", "cv": b"", "ts": 100, "value": b"v", "delete": False},
        {"row": b"r", "cf": b"f", "cq": b"q", "cv": b"", "ts": 200, "value": None, "delete": True}]


def test_unknown_translator_is_refused():
    with pytest.raises(ValueError, match="no native translator 'x'"):
        translate_batch("x", exports_batch([]))


def test_a_float_halfway_between_two_shortest_reprs_prints_as_python_does():
    # 562949953421312.2 is the double ...312.25: ".2" and ".3" both round-trip; Python's repr takes the even one
    values = [json.dumps({"old": [], "new": [{"row": "r", "cf": "f", "cq": "q", "value": 562949953421312.2}]}).encode()]
    assert native_result("difference", values) == python_reference("difference", values)
    assert native_result("difference", values)[0][1][0][4] == b"562949953421312.2"


def test_the_registry_and_the_crate_list_the_same_native_translators():
    """One registry line per translator in Python (connector/export/translators.py) and one table line in Rust
    (src/translate/mod.rs): the two lists agree, and every native one has its Python twin."""
    from connector.export.translators import TRANSLATORS

    assert sorted(_native.translator_names()) == sorted(native_translate.NATIVE_TRANSLATORS)
    assert {t.name for t in TRANSLATORS if t.native} == set(_native.translator_names())
    assert all(callable(BUILT_IN[name]) for name in _native.translator_names())
    with pytest.raises(_native.InvalidArgumentError, match='no native translator "value": use one of difference'):
        _native.translate("value", pa.array([b"{}"]))


def test_the_readme_table_and_the_cli_help_come_from_the_registry():
    from connector.export.translators import HELP, METAVAR, TRANSLATORS, markdown_table

    assert all(t.shown in METAVAR and t.writes in HELP for t in TRANSLATORS)
    assert markdown_table().count("\n") == len(TRANSLATORS) + 1
