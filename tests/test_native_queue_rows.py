"""The native queue-row parser (``QueueLayout.parse_rows``/``parse_row``) agrees with the Python oracle
(tests/queue_row_oracle.py), row for row and reason for reason, and its bucket check with the Python hash."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.accumulo import UPDATE_SCHEMA
from connector.accumulo.wire.native import encode_update_frames
from connector.queue.errors import MalformedEntryError
from connector.queue.layout import MAX_BUCKETS, QueueLayout, bucket_of, murmur3_32
from connector.queue.native_rows import entry_deletes

from .queue_row_oracle import parse_row as oracle_parse_row


def python_parse(layout: QueueLayout, row: bytes) -> dict:
    try:
        p = oracle_parse_row(layout, row)
    except MalformedEntryError as exc:
        return {"bucket": None, "key": None, "seq": None, "error": exc.reason}
    return {"bucket": p.bucket, "key": p.key_bytes, "seq": p.seq, "error": None}


def buckets_natively(keys: list[bytes], num_buckets: int) -> list[int]:
    """The bucket the native parser checks each key against: every row is put in bucket 0 and the
    parser's reason names the bucket the key hashes to (or the row passes: bucket 0)."""
    layout = QueueLayout("q", num_buckets)
    rows = [layout.bucket_prefix(0) + k + (7).to_bytes(8, "big") for k in keys]
    out = []
    for row in layout.parse_rows(pa.array(rows, pa.binary())).to_pylist():
        error = row["error"]
        out.append(0 if error is None else int(error.split("key hashes to bucket ")[1].split(",")[0]))
    return out


def test_design_md_murmur_checks():
    keys = [b"a", b"0001", b"k1"]
    assert [murmur3_32(k) for k in keys] == [1009084850, -195267438, -37330902]
    assert [bucket_of(k, 13) for k in keys[1:]] == [2, 11]
    assert bucket_of(b"0001", 1009) == 713
    assert buckets_natively(keys[1:], 13) == [2, 11]
    assert buckets_natively([b"0001"], 1009) == [713]


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.binary(max_size=100), max_size=50), num_buckets=st.integers(1, MAX_BUCKETS))
def test_native_bucket_check_matches_the_python_hash(keys, num_buckets):
    assert buckets_natively(keys, num_buckets) == [bucket_of(k, num_buckets) for k in keys]
    layout = QueueLayout("q", num_buckets)
    rows = [layout.entry_row(k, 3) for k in keys]  # each in the bucket Python's mmh3 chose
    assert layout.parse_rows(pa.array(rows, pa.binary())).column("error").to_pylist() == [None] * len(keys)


def test_int_min_hash_bucket_like_java():
    # abs(-2**31) must be 2**31 (Python ints), not overflow; any key works as a check of the formula
    keys = [b"x" * n for n in range(64)]
    assert buckets_natively(keys, 7) == [bucket_of(k, 7) for k in keys]


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
    batch = layout.parse_rows(pa.array(rows, pa.binary()))
    assert batch.schema.names == ["bucket", "key", "seq", "error"]
    assert batch.to_pylist() == [python_parse(layout, r) for r in rows]
    for r, parsed in zip(rows, batch.to_pylist(), strict=True):  # parse_row is the same parser, one row
        if parsed["error"] is None:
            assert layout.parse_row(r) == (parsed["bucket"], parsed["key"], parsed["seq"])
        else:
            with pytest.raises(MalformedEntryError) as info:
                layout.parse_row(r)
            assert info.value.reason == parsed["error"]


def test_every_reason():
    layout = QueueLayout("q", 13)
    good = layout.entry_row(b"0001", 5)
    assert good.startswith(b"q:2:")
    wrong_bucket = b"q:3:0001" + (5).to_bytes(8, "big")
    rows = [good, b"x:2:", b"q:", b"q:G:abc", b"q:e:" + b"k" * 9, b"q:2:short", b"q:2:k" + b"\xff" * 8, wrong_bucket]
    got = layout.parse_rows(pa.array(rows, pa.binary())).column("error").to_pylist()
    assert got == [python_parse(layout, r)["error"] for r in rows]
    assert got[0] is None and all(got[1:])
    assert got[-1] == "key hashes to bucket 2, but the row is in bucket 3"


def test_large_binary_and_string_rows_are_accepted():
    layout = QueueLayout("q", 13)
    row = layout.entry_row(b"k1", 9)
    for typ in (pa.large_binary(),):
        assert layout.parse_rows(pa.array([row], typ)).column("seq").to_pylist() == [9]
    assert layout.parse_rows(pa.array(["q:"], pa.string())).column("error").to_pylist() == [
        "short row: no bucket id of 1 hex digits and ':'"]


def test_entry_deletes_batch():
    rows = pa.array([b"q:2:a", b"q:3:b"], pa.binary())
    ts = pa.array([17, 2**63 - 1], pa.int64())
    batch = entry_deletes(rows, ts)
    assert batch.schema == UPDATE_SCHEMA
    assert batch.to_pylist() == [
        {"row": b"q:2:a", "cf": b"e", "cq": b"v", "cv": b"", "ts": 17, "value": None, "delete": True},
        {"row": b"q:3:b", "cf": b"e", "cq": b"v", "cv": b"", "ts": 2**63 - 1, "value": None, "delete": True}]
    with pytest.raises(ValueError, match="one non-null ts per non-null row"):
        entry_deletes(rows, pa.array([1], pa.int64()))


def test_entry_deletes_encode_like_drain_mutations():
    """The frames for the deletes equal what the drain's Mutation(...).delete(e, v, ts) path sends."""
    from connector.accumulo import Mutation

    from .wire_oracle import encode_column_update, encode_row_entry, encode_update_message

    rows, ts = [b"q:2:a", b"q:3:b"], [17, 4]
    frames = encode_update_frames("w", entry_deletes(pa.array(rows), pa.array(ts)), 1 << 20)
    muts = [Mutation(r).delete(b"e", b"v", timestamp=t) for r, t in zip(rows, ts, strict=True)]
    entries = b"".join(encode_row_entry(m.row, [encode_column_update(u) for u in m.updates]) for m in muts)
    assert frames == [encode_update_message("w", len(muts), entries)]
