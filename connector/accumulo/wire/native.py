"""The Rust wire codec (``connector._native``) with the client's types and errors: ``update`` frames for a
whole batch of cell changes, and ``nextK`` replies decoded into Arrow batches.

An updates batch (what :func:`encode_update_frames` sends, what ``BatchWriter.add_cells`` takes) has the
columns of :data:`UPDATE_SCHEMA`: ``row, cf, cq, cv`` (binary), ``ts`` (int64, null: the server chooses),
``value`` (binary, null for a delete), ``delete`` (bool, optional: without it a null value deletes). A
decoded ``nextK`` page has ``row, cf, cq, cv, ts, value`` (as ``wire_scan.CELLS_SCHEMA``).
"""

from __future__ import annotations

import pyarrow as pa

from connector import _native

from .errors import InvalidMutationError

UPDATE_SCHEMA = pa.schema([
    pa.field("row", pa.binary(), nullable=False),
    pa.field("cf", pa.binary(), nullable=False),
    pa.field("cq", pa.binary(), nullable=False),
    pa.field("cv", pa.binary(), nullable=False),
    pa.field("ts", pa.int64()),
    pa.field("value", pa.binary()),
    pa.field("delete", pa.bool_(), nullable=False),
])


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


def decode_next_k_reply(frame: bytes) -> tuple[pa.RecordBatch, bool] | None:
    """A ``nextK`` reply message (the frame without its length) as (cells batch, more); None when the reply
    is not a plain ScanResult (an exception, an unknown field, truncated bytes): decode it with thriftpy2,
    which raises what the generic call raises."""
    decoded = _native.decode_next_k_reply(frame)
    if decoded is None:
        return None
    batch, more = decoded
    return pa.record_batch(batch), more
