"""Columnar hot paths: whole Arrow batches in, whole batches or bytes out, computed in Rust.

The typed Python face of ``connector._native`` (an implementation detail). Every function takes and
returns pyarrow objects (or bytes) and never loops over rows in Python, except over the rare entries
that only Python can decide exactly (see :func:`translate`).

Cell-change batches use these columns (binary unless noted):

* updates (what :func:`encode_update_frames` sends): ``row, cf, cq, cv, ts`` (int64, null: the server
  chooses), ``value`` (null for a delete), ``delete`` (bool, optional: without it a null value deletes);
* scanned cells (:func:`decode_next_k_reply`): ``row, cf, cq, cv, ts`` (int64), ``value``;
* translated changes (:func:`translate`): ``entry`` (int32, index of the export), ``row, cf, cq, cv``,
  ``value`` (null for a delete); :func:`changes_to_updates` stamps them with ts = the export's seq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from connector import _native
from connector.accumulo.errors import InvalidMutationError

if TYPE_CHECKING:
    from connector.queue.layout import QueueLayout

NATIVE_TRANSLATORS = ("difference", "replicator", "cells")

UPDATE_SCHEMA = pa.schema([
    pa.field("row", pa.binary(), nullable=False),
    pa.field("cf", pa.binary(), nullable=False),
    pa.field("cq", pa.binary(), nullable=False),
    pa.field("cv", pa.binary(), nullable=False),
    pa.field("ts", pa.int64()),
    pa.field("value", pa.binary()),
    pa.field("delete", pa.bool_(), nullable=False),
])

CHANGE_SCHEMA = pa.schema([
    pa.field("entry", pa.int32(), nullable=False),
    pa.field("row", pa.binary(), nullable=False),
    pa.field("cf", pa.binary(), nullable=False),
    pa.field("cq", pa.binary(), nullable=False),
    pa.field("cv", pa.binary(), nullable=False),
    pa.field("value", pa.binary()),
])


# --- wire -----------------------------------------------------------------------------------------

def encode_update_frames(writer_id: str, cells: pa.RecordBatch, max_frame_bytes: int) -> list[bytes]:
    """The oneway ``update(writer_id, cells)`` message bodies for a batch of cell changes, each at most
    ``max_frame_bytes`` long (send each with ``transport.send_frame``). Cells of one row share one map
    entry and one frame; rows keep their first-seen order, cells their batch order within a row.

    Raises ``InvalidMutationError`` for a cell that cannot be sent (empty row, negative timestamp, a put
    without a value) or a row whose cells cannot fit in one frame (the message names the row).
    """
    if not isinstance(max_frame_bytes, int) or max_frame_bytes < 1:
        raise ValueError(f"max_frame_bytes must be an int >= 1, got {max_frame_bytes!r}")
    try:
        return _native.encode_update_frames(writer_id, cells, max_frame_bytes)
    except ValueError as exc:  # RowTooLargeError is a ValueError too
        raise InvalidMutationError(str(exc)) from None


def decode_next_k_reply(frame: bytes) -> tuple[pa.RecordBatch, bool] | None:
    """A ``nextK`` reply message (the frame without its length) as (cells batch, more); None when the reply
    is not a plain ScanResult (an exception, an unknown field, truncated bytes): decode it with thriftpy2,
    which raises what the generic call raises."""
    decoded = _native.decode_next_k_reply(frame)
    if decoded is None:
        return None
    batch, more = decoded
    return pa.record_batch(batch), more


# --- queue rows -----------------------------------------------------------------------------------

def parse_entry_rows(rows: pa.Array, layout: QueueLayout) -> pa.RecordBatch:
    """Entry rows taken apart like ``QueueLayout.parse_row``: a batch (bucket int32, key binary, seq int64,
    error string). A malformed row has null bucket/key/seq and its reason (the ``MalformedEntryError``
    reason) in ``error``; the other rows are parsed all the same."""
    return pa.record_batch(_native.parse_entry_rows(rows, layout.qid, layout.num_buckets))


def murmur3_32(keys: pa.Array) -> pa.Int32Array:
    """Signed murmur3_32 (seed 0) of each serialized key, as ``layout.murmur3_32``."""
    return pa.array(_native.murmur3_32(keys))


def buckets_of(keys: pa.Array, num_buckets: int) -> pa.Int32Array:
    """The bucket of each serialized key, as ``layout.bucket_of``."""
    return pa.array(_native.buckets_of(keys, num_buckets))


def entry_deletes(rows: pa.Array, ts: pa.Array) -> pa.RecordBatch:
    """Updates deleting queue entries: each row's ``e:v`` at the entry's own timestamp ``ts`` (so a newer
    re-add of the same row survives)."""
    return pa.record_batch(_native.entry_deletes(rows, ts))


# --- translators ----------------------------------------------------------------------------------

class EntryError(NamedTuple):
    """Why one export of a batch produced no changes. ``kind`` "undecodable": the value is not JSON
    (``message`` is the ``MalformedEntryError`` reason the queue codec gives); "translation": the
    translator refused it (``message`` is the ``TranslationError`` message)."""

    entry: int
    kind: Literal["undecodable", "translation"]
    message: str


class Translated(NamedTuple):
    changes: pa.RecordBatch  # CHANGE_SCHEMA, grouped by entry in entry order
    errors: list[EntryError]  # in entry order


def translate(translator: str, exports: pa.RecordBatch) -> Translated:
    """Run a built-in translator (``difference``, ``replicator``, ``cells``) over a batch of exports with
    columns ``key`` (binary), ``value`` (JSON bytes) and ``seq`` (int64).

    Gives the changes the Python translator gives for each export, after the exporter's same-cell collapse
    (the last change to a cell wins), and one error per export that cannot be translated, with the Python
    message. The batch always completes. Entries the native code cannot decide exactly as Python would
    (bytes serde_json refuses, an error message showing non-ASCII text) go through the Python translator.
    """
    if translator not in NATIVE_TRANSLATORS:
        raise ValueError(f"no native translator {translator!r}: use one of {list(NATIVE_TRANSLATORS)}")
    values = exports.column("value")
    raw, native_errors, fallback = _native.translate(translator, values)
    changes = pa.record_batch(raw)
    errors = [EntryError(i, "translation", msg) for i, msg in native_errors]
    if fallback:
        extra, fallback_errors = _translate_in_python(translator, exports, fallback)
        errors = sorted(errors + fallback_errors)
        if extra:
            table = pa.Table.from_batches([changes, pa.RecordBatch.from_pylist(extra, schema=CHANGE_SCHEMA)])
            # stable: keeps each entry's changes in order
            table = table.take(pc.sort_indices(table["entry"], sort_keys=[("entry", "ascending")]))
            changes = table.combine_chunks().to_batches()[0] if table.num_rows else changes
    return Translated(changes, errors)


def _translate_in_python(
    translator: str, exports: pa.RecordBatch, entries: list[int]
) -> tuple[list[dict[str, Any]], list[EntryError]]:
    """The Python path for the few entries native code hands back (see :func:`translate`)."""
    from connector.export.core import SequencedExport, TranslationError
    from connector.export.translators import BUILT_IN
    from connector.serializers import JsonSerializer

    python_translator = BUILT_IN[translator]
    serializer = JsonSerializer()
    keys, values, seqs = exports.column("key"), exports.column("value"), exports.column("seq")
    rows: list[dict[str, Any]] = []
    errors: list[EntryError] = []
    for i in entries:
        try:
            obj = serializer.loads(values[i].as_py())
        except Exception as exc:  # noqa: BLE001 - the codec's reason names any error
            errors.append(EntryError(i, "undecodable", f"undecodable value: {type(exc).__name__}: {exc}"))
            continue
        try:
            export = SequencedExport(keys[i].as_py(), obj, seqs[i].as_py())
            seen: dict[tuple[bytes, bytes, bytes, bytes], bytes | None] = {}
            for change in python_translator(export):
                seen.pop(change.cell, None)  # the exporter's same-cell collapse: the last change wins
                seen[change.cell] = change.value
        except TranslationError as exc:
            errors.append(EntryError(i, "translation", str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - an entry's error must not fail the batch
            errors.append(EntryError(i, "translation", f"{type(exc).__name__}: {exc}"))
            continue
        rows += [{"entry": i, "row": r, "cf": f, "cq": q, "cv": v, "value": value}
                 for (r, f, q, v), value in seen.items()]
    return rows, errors


def changes_to_updates(changes: pa.RecordBatch, seqs: pa.Array) -> pa.RecordBatch:
    """Translated changes as updates for :func:`encode_update_frames`: every change at ts = the seq of its
    export (``seqs[entry]``), a null value as a delete. Translators never choose timestamps."""
    value = changes.column("value")
    return pa.record_batch(
        [changes.column("row"), changes.column("cf"), changes.column("cq"), changes.column("cv"),
         pc.take(seqs, changes.column("entry")), value, pc.is_null(value)],
        schema=UPDATE_SCHEMA,
    )
