"""``left_out``: which exports of a batch each destination must not get (a re-queued export whose dead letter is
older than that destination's bootstrap read A), held to a plain reading of its rule on random batches."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.queue.requeued import left_out

KEYS = st.sampled_from([b"a", b"b", b"c\x00", b""])
SEQS = st.integers(min_value=0, max_value=4)


def _batch(pairs: list[tuple[bytes, int]]) -> pa.RecordBatch:
    return pa.record_batch([pa.array([k for k, _ in pairs], pa.binary()), pa.array([b"v"] * len(pairs), pa.binary()),
                            pa.array([s for _, s in pairs], pa.int64())], names=["key", "value", "seq"])


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(KEYS, SEQS), max_size=12),
       requeued=st.dictionaries(st.tuples(KEYS, SEQS), st.integers(min_value=0, max_value=10), max_size=8),
       read_ms=st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=11)), min_size=1, max_size=3))
def test_an_export_is_left_out_exactly_where_its_dead_letter_is_older_than_the_reading(
        pairs: list[tuple[bytes, int]], requeued: dict[tuple[bytes, int], int], read_ms: list[int | None]) -> None:
    masks = left_out(_batch(pairs), requeued, read_ms)
    assert len(masks) == len(read_ms)
    for ms, mask in zip(read_ms, masks, strict=True):
        expected = [ms is not None and pair in requeued and requeued[pair] < ms for pair in pairs]
        got = [False] * len(pairs) if mask is None else [bool(x) for x in mask]
        assert got == expected
        if ms is None:
            assert mask is None


def test_nothing_re_queued_in_the_batch_is_no_mask_at_all() -> None:
    assert left_out(_batch([(b"a", 1)]), {(b"b", 1): 5}, [10, None]) == [None, None]
    mask = left_out(_batch([(b"a", 1), (b"a", 2), (b"a", 1)]), {(b"a", 1): 5}, [10])[0]
    assert mask is not None and np.array_equal(mask, [True, False, True])  # a key seen twice: both copies
