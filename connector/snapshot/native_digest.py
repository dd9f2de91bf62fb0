"""The Rust core's digests of cells per tablet range (``connector._native``, ``src/digest.rs``), in pyarrow
types: the snapshot layer's face of the crate."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from connector import _native


def range_digests(cells: pa.RecordBatch, splits: Sequence[bytes]) -> tuple[list[int], list[int]]:
    """Per tablet range of ``splits`` (a tablet ends at its split row, inclusive): the number of cells of
    ``cells`` (columns row, cf, cq, cv, value) in it and the wrapping sum of their content hashes (the
    timestamp is not part of the content)."""
    return _native.range_digests(cells, list(splits))


def range_indices(rows: pa.Array, splits: Sequence[bytes]) -> pa.Array:
    """The index of the tablet range holding each row."""
    return pa.array(_native.range_indices(rows, list(splits)))


def keys_distinct(cells: pa.Table) -> bool:
    """True when no two cells of ``cells`` (columns row, cf, cq, cv) have the same key: their keys' hashes all
    differ. Two keys whose hashes collide answer False, which is always safe to act on."""
    empty = pa.scalar(b"", pa.binary())
    hashes = [pa.array(_native.cell_hashes(pa.record_batch([*batch.columns, pa.repeat(empty, batch.num_rows)],
                                                           names=["row", "cf", "cq", "cv", "value"])))
              for batch in cells.select(["row", "cf", "cq", "cv"]).to_batches()]
    n = sum(len(h) for h in hashes)
    return n < 2 or pc.count_distinct(pa.chunked_array(hashes, pa.uint64())).as_py() == n
