"""The one exporter contract (``Exporter``: ``export_batch``, with ``export`` as its per-export convenience)
and the adapter that makes an exporter written with ``export`` only into one. Pure logic: the exporters
here are the user's in-memory code, which is what the adapter serves."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from connector.export import (
    AccumuloExporter,
    BatchTranslationError,
    EntryFailure,
    Exporter,
    PerExportExporter,
    SequencedExport,
    batch_exporter,
)


class ListExporter:
    """Refuses exports whose value is not a dict, as a translator would; keeps the rest."""

    def __init__(self) -> None:
        self.calls: list[list[SequencedExport]] = []

    def export(self, exports):
        bad = {i: f"not a dict: {e.value!r}" for i, e in enumerate(exports) if not isinstance(e.value, dict)}
        if bad:
            raise BatchTranslationError(bad)
        self.calls.append(list(exports))


def batch(*triples: tuple[bytes, bytes, int]) -> pa.RecordBatch:
    keys, values, seqs = zip(*triples, strict=True)
    return pa.record_batch([pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(seqs, pa.int64())],
                           names=["key", "value", "seq"])


def test_the_accumulo_exporter_is_a_full_exporter_and_is_used_as_it_is():
    exporter = AccumuloExporter.__new__(AccumuloExporter)  # no connection needed to check the contract
    assert isinstance(exporter, Exporter)
    assert batch_exporter(exporter) is exporter


def test_an_export_only_exporter_is_adapted_and_anything_else_refused():
    inner = ListExporter()
    assert not isinstance(inner, Exporter)
    adapted = batch_exporter(inner)
    assert isinstance(adapted, PerExportExporter) and isinstance(adapted, Exporter)
    with pytest.raises(TypeError, match="export"):
        batch_exporter(object())


def test_the_adapter_returns_failures_in_batch_order_and_exports_the_rest():
    inner = ListExporter()
    good = json.dumps({"n": 1}).encode()
    failures = batch_exporter(inner).export_batch(batch(
        (b'"a"', good, 10), (b'"b"', b"{not json", 11), (b'"c"', b"[1]", 12), (b'"d"', good, 13)))
    assert [f.entry for f in failures] == [1, 2]
    assert failures[0].kind == "undecodable" and failures[0].reason.startswith("undecodable value: JSONDecodeError")
    assert failures[1] == EntryFailure(2, "translation", "not a dict: [1]")
    # the first call named the untranslatable export; the second wrote the rest without it
    assert [[e.key for e in call] for call in inner.calls] == [["a", "d"]]
    assert inner.calls[0][1] == SequencedExport("d", {"n": 1}, 13)


def test_the_adapter_lets_a_failure_of_the_batch_propagate():
    class Down:
        def export(self, exports):
            raise ConnectionError("destination down")

    with pytest.raises(ConnectionError):
        batch_exporter(Down()).export_batch(batch((b'"a"', b"{}", 1)))
