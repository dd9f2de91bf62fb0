"""Queue entry rows in whole Arrow batches, taken apart and deleted by the Rust core (``connector._native``).

The one parser of entry rows: ``QueueLayout.parse_rows`` and ``QueueLayout.parse_row`` call it, so the
checks and reasons of a malformed row are the same on every path.
"""

from __future__ import annotations

import pyarrow as pa

from connector import _native


def parse_entry_rows(rows: pa.Array, qid: str, num_buckets: int) -> pa.RecordBatch:
    """Entry rows of queue ``qid`` taken apart: a batch (bucket int32, key binary, seq int64, error string).
    A malformed row has null bucket/key/seq and its reason (the ``MalformedEntryError`` reason) in ``error``;
    the other rows are parsed all the same. Raises ``ValueError`` for a bad queue id or number of buckets and
    ``TypeError`` when ``rows`` is not a binary or string array."""
    try:
        return pa.record_batch(_native.parse_entry_rows(rows, qid, num_buckets))
    except _native.InvalidArgumentError as exc:
        raise ValueError(str(exc)) from None
    except _native.SchemaError as exc:
        raise TypeError(str(exc)) from None


def entry_deletes(rows: pa.Array, ts: pa.Array) -> pa.RecordBatch:
    """Updates (``BatchWriter.add_cells``) deleting queue entries: each row's ``e:v`` at the entry's own
    timestamp ``ts`` (so a newer re-add of the same row survives). Raises ``ValueError`` unless there is one
    non-null ``ts`` per non-null row, ``TypeError`` for arrays that are not binary rows and int64 ``ts``."""
    try:
        return pa.record_batch(_native.entry_deletes(rows, ts))
    except _native.InvalidArgumentError as exc:
        raise ValueError(str(exc)) from None
    except _native.SchemaError as exc:
        raise TypeError(str(exc)) from None
