"""The Rust wire codec (``connector._native``) with the client's types and errors: the client's one encoder
of ``update`` calls and its one decoder of ``nextK`` replies.

``update`` is encoded from either shape the client writes: a whole Arrow batch of cell changes
(:func:`encode_update_frames`, what ``BatchWriter.add_cells`` takes), or mutations' ``ColumnUpdate`` lists
(the ``add_mutation`` path: each mutation's updates encoded and sized when it is added,
:func:`encode_column_updates`; a chunk's rows put together by :func:`encode_update_entries`; the message
around them by :func:`update_message`). An updates batch has the columns of :data:`UPDATE_SCHEMA`:
``row, cf, cq, cv`` (binary), ``ts`` (int64, null: the server chooses), ``value`` (binary, null for a
delete), ``delete`` (bool, optional: without it a null value deletes). A decoded ``nextK`` page has the
columns of :data:`CELLS_SCHEMA`.

Each function maps the crate's exception classes to the client's: a cell or row that cannot be sent is
``InvalidMutationError``, an input of the wrong shape ``TypeError``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from connector import _native

from ..errors import InvalidMutationError

UPDATE_SCHEMA = pa.schema([
    pa.field("row", pa.binary(), nullable=False),
    pa.field("cf", pa.binary(), nullable=False),
    pa.field("cq", pa.binary(), nullable=False),
    pa.field("cv", pa.binary(), nullable=False),
    pa.field("ts", pa.int64()),
    pa.field("value", pa.binary()),
    pa.field("delete", pa.bool_(), nullable=False),
])

#: what ``Connection.scan_batches`` yields, one batch per ``nextK`` page (as :func:`decode_next_k_reply`)
CELLS_SCHEMA = pa.schema([pa.field(name, pa.int64() if name == "ts" else pa.binary(), nullable=False)
                          for name in ("row", "cf", "cq", "cv", "ts", "value")])


def encode_update_frames(writer_id: str, cells: pa.RecordBatch, max_frame_bytes: int) -> list[bytes]:
    """The oneway ``update(writer_id, cells)`` message bodies for a batch of cell changes, each at most
    ``max_frame_bytes`` long (send each with ``transport.send_frame``). Cells of one row share one map
    entry and one frame; rows keep their first-seen order, cells their batch order within a row.

    Raises ``InvalidMutationError`` for a cell that cannot be sent (empty row, negative timestamp, a put
    without a value) or a row whose cells cannot fit in one frame (the message names the row), and
    ``TypeError`` for a batch without the columns above.
    """
    if not isinstance(max_frame_bytes, int) or max_frame_bytes < 1:
        raise ValueError(f"max_frame_bytes must be an int >= 1, got {max_frame_bytes!r}")
    try:
        return _native.encode_update_frames(writer_id, cells, max_frame_bytes)
    except _native.InvalidCellError as exc:  # RowTooLargeError included
        raise InvalidMutationError(str(exc)) from None
    except _native.SchemaError as exc:
        raise TypeError(str(exc)) from None


def encode_column_updates(row: bytes, updates: list[Any]) -> tuple[bytes, int]:
    """The ``ColumnUpdate`` structs of ``row``'s ``updates`` back to back, and the exact bytes of the
    ``update`` map entry they make on their own (merged with other updates of the row it is never larger
    than counted apart). Raises ``InvalidMutationError`` for an update a ``Mutation`` would refuse."""
    try:
        return _native.encode_column_updates(row, updates)
    except _native.InvalidCellError as exc:
        raise InvalidMutationError(str(exc)) from None
    except _native.SchemaError as exc:
        raise TypeError(str(exc)) from None


def encode_update_entries(rows: dict[bytes, list[Any]], size_hint: int = 0) -> tuple[int, bytes]:
    """The map entries of an ``update`` call for ``rows``, in the dict's order: (how many, their bytes).
    Each row maps to ``[n, structs, ...]``: ``n`` updates in all, encoded by :func:`encode_column_updates`
    (one bytes object per mutation of the row). ``size_hint``: the bytes expected, to allocate once."""
    try:
        return _native.encode_update_entries(rows, size_hint)
    except _native.SchemaError as exc:
        raise TypeError(str(exc)) from None


def update_message(writer_id: str, n_rows: int, entries: bytes) -> bytes:
    """The whole oneway ``update(writer_id, cells)`` message around ``n_rows`` map entries from
    :func:`encode_update_entries` (send it with ``transport.send_frame``)."""
    try:
        return _native.update_message(writer_id, n_rows, entries)
    except _native.InvalidArgumentError as exc:
        raise ValueError(str(exc)) from None


def decode_next_k_reply(frame: bytes) -> tuple[pa.RecordBatch, bool] | None:
    """A ``nextK`` reply message (the frame without its length) as (cells batch, more); None when the reply
    is not a plain ScanResult (an exception, an unknown field, truncated bytes): decode it with thriftpy2,
    which raises what the generic call raises."""
    decoded = _native.decode_next_k_reply(frame)
    if decoded is None:
        return None
    batch, more = decoded
    return pa.record_batch(batch), more
