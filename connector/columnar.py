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

from typing import TYPE_CHECKING, Literal, NamedTuple

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
    #: entries the native code hands back to the Python translator (the exporter runs them)
    fallback: list[int]


def translate(translator: str, exports: pa.RecordBatch) -> Translated:
    """Run a built-in translator (``difference``, ``replicator``, ``cells``) over a batch of exports with
    columns ``key`` (binary), ``value`` (JSON bytes) and ``seq`` (int64).

    Gives the changes the Python translator gives for each export, after the exporter's same-cell collapse
    (the last change to a cell wins), and one error per export that cannot be translated, with the Python
    message. Entries the native code cannot decide exactly as Python would (bytes serde_json refuses, an
    error message showing non-ASCII text) come back in ``fallback``, for the Python translator.
    """
    if translator not in NATIVE_TRANSLATORS:
        raise ValueError(f"no native translator {translator!r}: use one of {list(NATIVE_TRANSLATORS)}")
    raw, native_errors, fallback = _native.translate(translator, exports.column("value"))
    return Translated(pa.record_batch(raw), [EntryError(i, "translation", msg) for i, msg in native_errors],
                      list(fallback))


def changes_to_updates(changes: pa.RecordBatch, seqs: pa.Array) -> pa.RecordBatch:
    """Translated changes as updates for :func:`encode_update_frames`: every change at ts = the seq of its
    export (``seqs[entry]``), a null value as a delete. Translators never choose timestamps."""
    value = changes.column("value")
    return pa.record_batch(
        [changes.column("row"), changes.column("cf"), changes.column("cq"), changes.column("cv"),
         pc.take(seqs, changes.column("entry")), value, pc.is_null(value)],
        schema=UPDATE_SCHEMA,
    )
