"""The Rust core's digests of cells per tablet range (``connector._native``, ``src/digest.rs``), in pyarrow
types: the snapshot layer's face of the crate."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from connector import _native


def range_digests(cells: pa.RecordBatch, splits: Sequence[bytes]) -> tuple[list[int], list[int]]:
    """Per tablet range of ``splits`` (a tablet ends at its split row, inclusive): the number of cells of
    ``cells`` (columns row, cf, cq, cv, value) in it and the wrapping sum of their content hashes (the
    timestamp is not part of the content)."""
    return _native.range_digests(cells, list(splits))


def range_indices(rows: pa.Array, splits: Sequence[bytes]) -> pa.Array:
    """The index of the tablet range holding each row."""
    return pa.array(_native.range_indices(rows, list(splits)))
