"""Translators are pure functions; these are the export-queue recipe's cases and the shapes' errors."""

from __future__ import annotations

import pytest

from connector.export import (
    AccumuloExporter,
    CellChange,
    SequencedExport,
    TranslationError,
    cell_rows,
    difference,
    replicator,
    translator_from_name,
)


def cells(*names: str) -> list[dict]:
    return [{"row": n, "cf": "f", "cq": "q", "value": "1"} for n in names]


def diff(old: str, new: str) -> set[tuple[str, bytes]]:
    changes = difference(SequencedExport("k", {"old": cells(*old), "new": cells(*new)}, 7))
    return {("del" if c.is_delete else "put", c.row) for c in changes}


def test_recipe_cases():
    assert diff("", "a") == {("put", b"a")}
    assert diff("a", "a") == set()
    assert diff("b", "ab") == {("put", b"a")}
    assert diff("c", "d") == {("del", b"c"), ("put", b"d")}
    assert diff("e", "") == {("del", b"e")}
    assert diff("ef", "fg") == {("del", b"e"), ("put", b"g")}


def test_difference_puts_changed_value_and_keeps_visibility():
    old = [{"row": "r", "cf": "f", "cq": "q", "cv": "A", "value": "1"}]
    new = [{"row": "r", "cf": "f", "cq": "q", "cv": "A", "value": "2"}]
    assert list(difference(SequencedExport("k", {"old": old, "new": new}, 3))) == [
        CellChange(b"r", b"f", b"q", b"A", b"2")]


def test_exporter_stamps_every_change_with_seq_and_never_put_and_delete_on_one_cell():
    exporter = AccumuloExporter.__new__(AccumuloExporter)  # mutations() needs no connection
    exporter.translator, exporter.delete_mode = replicator, __import__("connector.export").export.DeleteMode.DELETE
    log = [{"op": "set", "row": "r", "cf": "f", "cq": "q", "value": "1"},
           {"op": "delete", "row": "r", "cf": "f", "cq": "q"},
           {"op": "set", "row": "r", "cf": "f", "cq": "q2", "value": "x"},
           {"op": "delete", "row": "s", "cf": "f", "cq": "q"},
           {"op": "set", "row": "s", "cf": "f", "cq": "q", "value": "back"}]
    muts = exporter.mutations(SequencedExport("tx", log, 99))
    updates = {(m.row, u.cq, u.delete, u.value) for m in muts for u in m.updates}
    assert updates == {(b"r", b"q", True, b""), (b"r", b"q2", False, b"x"), (b"s", b"q", False, b"back")}
    assert {u.timestamp for m in muts for u in m.updates} == {99}


def test_cells_translator_rows():
    changes = cell_rows(SequencedExport(None, [{"row": "a", "cf": "f", "cq": "q", "value": "v"},
                                                {"row": "b", "cf": "f", "cq": "q", "value": None},
                                                {"row": "c", "cf": "f", "cq": "q", "value": "x", "delete": True}], 1))
    assert [(c.row, c.value) for c in changes] == [(b"a", b"v"), (b"b", None), (b"c", None)]


@pytest.mark.parametrize("value, match", [
    ({"old": "nope"}, "list of cells"),
    ({"new": [{"row": "r", "cf": "f"}]}, "lacks cq"),
    ({"new": [{"row": "r", "cf": "f", "cq": "q"}]}, "lacks value"),
    ({"new": [{"row": "", "cf": "f", "cq": "q", "value": "v"}]}, "empty row"),
    ({"older": []}, "unknown fields"),
    (42, "must be"),
])
def test_difference_rejects_malformed_values_by_name(value, match):
    with pytest.raises(TranslationError, match=match):
        list(difference(SequencedExport("k", value, 1)))


def test_replicator_rejects_unknown_op():
    with pytest.raises(TranslationError, match="operation 0"):
        list(replicator(SequencedExport("k", [{"op": "upsert", "row": "r", "cf": "f", "cq": "q"}], 1)))


def test_seq_must_fit_an_accumulo_timestamp():
    for bad in (-1, 1 << 63, "5", True):
        with pytest.raises(ValueError, match="seq"):
            SequencedExport("k", None, bad)
    SequencedExport("k", None, (1 << 63) - 1)


def test_translator_names():
    assert translator_from_name("difference") is difference
    assert translator_from_name("connector.export.replicator:replicator") is replicator
    with pytest.raises(ValueError, match="unknown translator"):
        translator_from_name("nope")
    with pytest.raises(ValueError, match="cannot import"):
        translator_from_name("no_such_module_xyz:f")


class UserCode:
    """User code reached by a dotted attribute (``module:Class.attribute``)."""

    @staticmethod
    def translator(export):
        return [CellChange(b"r", b"f", b"q", value=b"v")]

    NOT_CALLABLE = 3


def test_every_kind_of_user_code_is_loaded_by_one_loader():
    """Translators, combiners and serializers are found by name the same way (``connector.plugins``): a dotted
    attribute works for each (translators once refused it), and each names what is missing in the same words."""
    from connector.combine.functions import combiner_from_name
    from connector.serializers import serializer_from_name

    assert translator_from_name(f"{__name__}:UserCode.translator") is UserCode.translator
    assert combiner_from_name(f"{__name__}:UserCode.translator") is UserCode.translator
    for load, kind in ((translator_from_name, "translator"), (combiner_from_name, "combiner"),
                       (serializer_from_name, "serializer")):
        with pytest.raises(ValueError, match=f"{kind} '{__name__}:Nothing': {__name__} has no attribute 'Nothing'"):
            load(f"{__name__}:Nothing")
        with pytest.raises(ValueError, match="cannot import 'no_such_module_xyz'"):
            load("no_such_module_xyz:f")
    with pytest.raises(ValueError, match="has no callable 'UserCode.NOT_CALLABLE'"):
        translator_from_name(f"{__name__}:UserCode.NOT_CALLABLE")
