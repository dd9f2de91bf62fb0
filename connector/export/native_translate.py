"""Built-in translators over a whole batch of exports in the Rust core (``connector._native``), and in
Python for the rare entries the native code hands back.

A batch of translated changes has the columns of :data:`CHANGE_SCHEMA`: ``entry`` (int32, index of the
export in its batch), ``row, cf, cq, cv`` (binary), ``value`` (binary, null for a delete), already
collapsed per export (the last change to a cell wins); :func:`changes_to_updates` stamps them with
ts = the export's seq, as ``BatchWriter.add_cells`` takes them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connector import _native
from connector.accumulo import UPDATE_SCHEMA
from connector.serializers import DEFAULT_SERIALIZER, NATIVE_ENCODINGS, serializer_from_name

from .core import EntryFailure, SequencedExport, TranslationError, last_change_per_cell
from .translators import BUILT_IN, NATIVE_TRANSLATORS

CHANGE_SCHEMA = pa.schema([
    pa.field("entry", pa.int32(), nullable=False),
    pa.field("row", pa.binary(), nullable=False),
    pa.field("cf", pa.binary(), nullable=False),
    pa.field("cq", pa.binary(), nullable=False),
    pa.field("cv", pa.binary(), nullable=False),
    pa.field("value", pa.binary()),
])


def translate_batch(translator: str, exports: pa.RecordBatch,
                    encoding: str = DEFAULT_SERIALIZER) -> tuple[pa.RecordBatch, list[EntryFailure]]:
    """Run a built-in translator (``difference``, ``replicator``, ``cells``) over a batch of exports with
    columns ``key`` (binary), ``value`` (bytes of the serializer ``encoding``: ``json`` or ``packed``) and
    ``seq`` (int64).

    Gives the changes the Python translator gives for each export, after the same-cell collapse, grouped by
    entry in entry order, and one ``EntryFailure`` per export that cannot be translated (in entry order),
    with the Python message. The native code decides almost every entry; the few it cannot decide exactly
    as Python would (bytes serde_json refuses, an error message showing non-ASCII text, a packed value of
    another translator's shape or a malformed one) are translated here by the Python translator.
    """
    if translator not in NATIVE_TRANSLATORS:
        raise ValueError(f"no native translator {translator!r}: use one of {list(NATIVE_TRANSLATORS)}")
    if encoding not in NATIVE_ENCODINGS:
        raise ValueError(f"no native encoding {encoding!r}: use one of {list(NATIVE_ENCODINGS)}")
    try:
        raw, native_errors, fallback = _native.translate(translator, exports.column("value"), encoding)
    except _native.SchemaError as exc:
        raise TypeError(str(exc)) from None
    changes = pa.record_batch(raw)
    errors = [EntryFailure(i, "translation", message) for i, message in native_errors]
    if fallback:
        extra, fallback_errors = _translate_in_python(translator, exports, list(fallback), encoding)
        errors = sorted(errors + fallback_errors)
        if extra:
            table = pa.Table.from_batches([changes, pa.RecordBatch.from_pylist(extra, schema=CHANGE_SCHEMA)])
            # stable: keeps each entry's changes in order
            table = table.take(pc.sort_indices(table["entry"], sort_keys=[("entry", "ascending")]))
            changes = table.combine_chunks().to_batches()[0] if table.num_rows else changes
    return changes, errors


def _translate_in_python(translator: str, exports: pa.RecordBatch, entries: list[int],
                         encoding: str) -> tuple[list[dict[str, Any]], list[EntryFailure]]:
    """The Python path for the few entries native code hands back."""
    python_translator = BUILT_IN[translator]
    serializer = serializer_from_name(encoding)
    keys, values, seqs = exports.column("key"), exports.column("value"), exports.column("seq")
    rows: list[dict[str, Any]] = []
    errors: list[EntryFailure] = []
    for i in entries:
        try:
            obj = serializer.loads(values[i].as_py())
        except Exception as exc:  # noqa: BLE001 - the codec's reason names any error
            errors.append(EntryFailure(i, "undecodable", f"undecodable value: {type(exc).__name__}: {exc}"))
            continue
        try:
            cells = last_change_per_cell(python_translator(SequencedExport(keys[i].as_py(), obj, seqs[i].as_py())))
        except TranslationError as exc:
            errors.append(EntryFailure(i, "translation", str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - an entry's error must not fail the batch
            errors.append(EntryFailure(i, "translation", f"{type(exc).__name__}: {exc}"))
            continue
        rows += [{"entry": i, "row": r, "cf": f, "cq": q, "cv": v, "value": value}
                 for (r, f, q, v), value in cells.items()]
    return rows, errors


def changes_to_updates(changes: pa.RecordBatch, seqs: pa.Array) -> pa.RecordBatch:
    """Translated changes as updates for ``BatchWriter.add_cells``: every change at ts = the seq of its
    export (``seqs[entry]``), a null value as a delete. Translators never choose timestamps."""
    value = changes.column("value")
    return pa.record_batch(
        [changes.column("row"), changes.column("cf"), changes.column("cq"), changes.column("cv"),
         pc.take(seqs, changes.column("entry")), value, pc.is_null(value)],
        schema=UPDATE_SCHEMA,
    )
