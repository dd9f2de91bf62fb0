"""Native queue-row parsing and buckets agree with QueueLayout, row for row and reason for reason."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector import columnar
from connector.queue.errors import MalformedEntryError
from connector.queue.layout import QueueLayout, bucket_of, murmur3_32


def python_parse(layout: QueueLayout, row: bytes) -> dict:
    try:
        p = layout.parse_row(row)
    except MalformedEntryError as exc:
        return {"bucket": None, "key": None, "seq": None, "error": exc.reason}
    return {"bucket": p.bucket, "key": p.key_bytes, "seq": p.seq, "error": None}


def test_design_md_murmur_checks():
    keys = pa.array([b"a", b"0001", b"k1"], pa.binary())
    assert columnar.murmur3_32(keys).to_pylist() == [1009084850, -195267438, -37330902]
    assert columnar.buckets_of(keys, 13).to_pylist()[1:] == [2, 11]
    assert columnar.buckets_of(keys, 1009).to_pylist()[1] == 713


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.binary(max_size=100), max_size=50), num_buckets=st.integers(1, 2**31 - 1))
def test_hash_and_buckets_match_the_python_layout(keys, num_buckets):
    arr = pa.array(keys, pa.binary())
    assert columnar.murmur3_32(arr).to_pylist() == [murmur3_32(k) for k in keys]
    assert columnar.buckets_of(arr, num_buckets).to_pylist() == [bucket_of(k, num_buckets) for k in keys]


def test_int_min_hash_bucket_like_java():
    # abs(-2**31) must be 2**31 (Python ints), not overflow; any key works as a check of the formula
    keys = pa.array([b"x" * n for n in range(64)], pa.binary())
    assert columnar.buckets_of(keys, 7).to_pylist() == [bucket_of(b"x" * n, 7) for n in range(64)]


def good_rows(layout: QueueLayout):
    return st.tuples(st.binary(max_size=60), st.integers(0, 2**63 - 1)).map(lambda ks: layout.entry_row(*ks))


def mangled(layout: QueueLayout):
    """Rows broken in every way parse_row knows, and some it does not expect."""
    def mangle(args):
        row, how, pos, byte = args
        if how == "cut":
            return row[:pos % (len(row) + 1)]
        if how == "flip":
            i = pos % len(row)
            return row[:i] + bytes([byte]) + row[i + 1:]
        if how == "seq":
            return row[:-8] + b"\x80" + row[-7:]
        return bytes([byte]) + row
    return st.tuples(good_rows(layout), st.sampled_from(["cut", "flip", "seq", "prefix"]), st.integers(0, 500),
                     st.integers(0, 255)).map(mangle)


@pytest.mark.parametrize("qid,num_buckets", [("q", 13), ("idx", 1009), ("\u00e9t\u00e9", 16), ("a", 1), ("z", 15)])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_parse_matches_parse_row_including_reasons(qid, num_buckets, data):
    layout = QueueLayout(qid, num_buckets)
    rows = data.draw(st.lists(st.one_of(good_rows(layout), mangled(layout), st.binary(max_size=30)), max_size=40))
    batch = columnar.parse_entry_rows(pa.array(rows, pa.binary()), layout)
    assert batch.schema.names == ["bucket", "key", "seq", "error"]
    assert batch.to_pylist() == [python_parse(layout, r) for r in rows]


def test_every_reason():
    layout = QueueLayout("q", 13)
    good = layout.entry_row(b"0001", 5)
    assert good.startswith(b"q:2:")
    wrong_bucket = b"q:3:0001" + (5).to_bytes(8, "big")
    rows = [good, b"x:2:", b"q:", b"q:G:abc", b"q:e:" + b"k" * 9, b"q:2:short", b"q:2:k" + b"\xff" * 8, wrong_bucket]
    got = columnar.parse_entry_rows(pa.array(rows, pa.binary()), layout).column("error").to_pylist()
    assert got == [python_parse(layout, r)["error"] for r in rows]
    assert got[0] is None and all(got[1:])
    assert got[-1] == "key hashes to bucket 2, but the row is in bucket 3"


def test_large_binary_and_string_rows_are_accepted():
    layout = QueueLayout("q", 13)
    row = layout.entry_row(b"k1", 9)
    for typ in (pa.large_binary(),):
        assert columnar.parse_entry_rows(pa.array([row], typ), layout).column("seq").to_pylist() == [9]
    assert columnar.parse_entry_rows(pa.array(["q:"], pa.string()), layout).column("error").to_pylist() == [
        "short row: no bucket id of 1 hex digits and ':'"]


def test_entry_deletes_batch():
    rows = pa.array([b"q:2:a", b"q:3:b"], pa.binary())
    ts = pa.array([17, 2**63 - 1], pa.int64())
    batch = columnar.entry_deletes(rows, ts)
    assert batch.schema == columnar.UPDATE_SCHEMA
    assert batch.to_pylist() == [
        {"row": b"q:2:a", "cf": b"e", "cq": b"v", "cv": b"", "ts": 17, "value": None, "delete": True},
        {"row": b"q:3:b", "cf": b"e", "cq": b"v", "cv": b"", "ts": 2**63 - 1, "value": None, "delete": True}]
    with pytest.raises(ValueError, match="one non-null ts per non-null row"):
        columnar.entry_deletes(rows, pa.array([1], pa.int64()))


def test_entry_deletes_encode_like_drain_mutations():
    """The frames for the deletes equal what the drain's Mutation(...).delete(e, v, ts) path sends."""
    from connector.accumulo import Mutation
    from connector.accumulo.wire import encode_column_update, encode_row_entry, encode_update_message

    rows, ts = [b"q:2:a", b"q:3:b"], [17, 4]
    frames = columnar.encode_update_frames("w", columnar.entry_deletes(pa.array(rows), pa.array(ts)), 1 << 20)
    muts = [Mutation(r).delete(b"e", b"v", timestamp=t) for r, t in zip(rows, ts, strict=True)]
    entries = b"".join(encode_row_entry(m.row, [encode_column_update(u) for u in m.updates]) for m in muts)
    assert frames == [encode_update_message("w", len(muts), entries)]
