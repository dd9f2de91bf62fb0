"""The native codec, the client's one encoder of ``update`` calls and its one decoder of ``nextK`` replies,
writes and reads exactly the bytes thriftpy2 and the Python oracles (``tests/wire_oracle.py``,
``tests/next_k_oracle.py``) do: here from Arrow batches (``add_cells``); from mutations' ``ColumnUpdate``
lists (``add_mutation``) in ``tests/test_mutation_frames.py``."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

from connector.accumulo import InvalidMutationError
from connector.accumulo._idl import MAX_TIMESTAMP, proxy
from connector.accumulo.mutation import ColumnUpdate
from connector.accumulo.wire import native
from connector.accumulo.wire.structs import column_update_to_thrift

from .next_k_oracle import decode_reply_cells
from .wire_oracle import encode_column_update, encode_row_entry, encode_update_message

Cell = tuple[bytes, bytes, bytes, bytes, "int | None", "bytes | None"]  # row, cf, cq, cv, ts, value (None: delete)


def batch_of(cells: list[Cell]) -> pa.RecordBatch:
    rows, cfs, cqs, cvs, tss, values = (list(col) for col in zip(*cells, strict=True)) if cells else ([],) * 6
    return pa.record_batch([pa.array(rows, pa.binary()), pa.array(cfs, pa.binary()), pa.array(cqs, pa.binary()),
                            pa.array(cvs, pa.binary()), pa.array(tss, pa.int64()), pa.array(values, pa.binary()),
                            pa.array([v is None for v in values], pa.bool_())],
                           schema=native.UPDATE_SCHEMA)


def by_row(cells: list[Cell]) -> dict[bytes, list[ColumnUpdate]]:
    """The writer's merge-by-row: first-seen row order, batch order within a row."""
    out: dict[bytes, list[ColumnUpdate]] = {}
    for row, cf, cq, cv, ts, value in cells:
        out.setdefault(row, []).append(ColumnUpdate(cf, cq, cv, ts, value or b"", value is None))
    return out


def thriftpy2_update(writer_id: str, rows: dict[bytes, list[ColumnUpdate]]) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("update", TMessageType.ONEWAY, 0)
    cells = {r: [column_update_to_thrift(u) for u in ups] for r, ups in rows.items()}
    proto.write_struct(proxy.AccumuloProxy.update_args(writer=writer_id, cells=cells))
    proto.write_message_end()
    return buf.getvalue()


def wire_py_update(writer_id: str, rows: dict[bytes, list[ColumnUpdate]]) -> bytes:
    entries = b"".join(encode_row_entry(r, [encode_column_update(u) for u in ups]) for r, ups in rows.items())
    return encode_update_message(writer_id, len(rows), entries)


def thriftpy2_read_update(frame: bytes) -> tuple[str, dict[bytes, list[ColumnUpdate]]]:
    proto = TCompactProtocol(TMemoryBuffer(frame))
    name, mtype, _ = proto.read_message_begin()
    assert (name, mtype) == ("update", TMessageType.ONEWAY)
    args = proxy.AccumuloProxy.update_args()
    proto.read_struct(args)
    return args.writer, {
        row: [ColumnUpdate(u.colFamily, u.colQualifier, u.colVisibility or b"", u.timestamp, u.value or b"",
                           bool(u.deleteCell)) for u in ups]
        for row, ups in args.cells.items()}


# rows from a small pool, so one batch often touches a row several times and not next to each other
row = st.one_of(st.sampled_from([b"a", b"b", b"row\x00\xff", b"\xc3(", b"r" * 200]), st.binary(min_size=1, max_size=40))
ts = st.one_of(st.none(), st.integers(0, 200), st.integers(0, MAX_TIMESTAMP))
cell = st.tuples(row, st.binary(max_size=200), st.binary(max_size=150), st.sampled_from([b"", b"a&b", b"x|(y&z)"]),
                 ts, st.one_of(st.none(), st.binary(max_size=300)))
writer_id = st.text(max_size=40)


@settings(max_examples=300, deadline=None)
@given(writer_id=writer_id, cells=st.lists(cell, max_size=60))
def test_one_frame_matches_thriftpy2_and_wire_py(writer_id, cells):
    frames = native.encode_update_frames(writer_id, batch_of(cells), 1 << 30)
    if not cells:
        assert frames == []
        return
    rows = by_row(cells)
    assert frames == [thriftpy2_update(writer_id, rows)]
    assert frames == [wire_py_update(writer_id, rows)]


@settings(max_examples=200, deadline=None)
@given(writer_id=writer_id, cells=st.lists(cell, min_size=1, max_size=80), limit=st.integers(600, 6000))
def test_chunked_frames_respect_the_limit_and_keep_rows_whole(writer_id, cells, limit):
    try:
        frames = native.encode_update_frames(writer_id, batch_of(cells), limit)
    except InvalidMutationError as exc:
        # only when one row alone cannot fit; then the message names a row that really is too big
        assert "over max_frame_bytes=" in str(exc)
        single = {r: ups for r, ups in by_row(cells).items() if len(thriftpy2_update(writer_id, {r: ups})) > limit}
        assert single and any(repr(r) in str(exc) for r in single)
        return
    assert all(len(f) <= limit for f in frames)
    decoded = [thriftpy2_read_update(f) for f in frames]
    assert all(w == writer_id for w, _ in decoded)
    # every frame is exactly what thriftpy2 writes for its content, and no row appears in two frames
    assert [thriftpy2_update(writer_id, rows) for _, rows in decoded] == frames
    seen_rows = [r for _, rows in decoded for r in rows]
    assert len(seen_rows) == len(set(seen_rows))
    merged = {r: ups for _, rows in decoded for r, ups in rows.items()}
    assert list(merged.items()) == list(by_row(cells).items())
    # greedy packing: the next frame's first row would not have fitted in the previous frame
    for (_, prev), (_, nxt) in zip(decoded, decoded[1:], strict=False):
        first = next(iter(nxt.items()))
        assert len(thriftpy2_update(writer_id, {**prev, first[0]: first[1]})) > limit


def test_long_varints_empty_values_and_huge_rows():
    huge_row = bytes(range(256)) * 4096  # 1 MiB, non-UTF-8
    cells: list[Cell] = [
        (huge_row, b"f", b"q", b"", MAX_TIMESTAMP, b""),
        (b"r", b"", b"", b"", 0, b""),
        (b"r", b"f" * 20000, b"q", b"(a|b)&c", 1 << 40, b"\x00" * 70000),
        (b"\xff\xfe", b"f", b"q", b"", None, None),
        (huge_row, b"f", b"q2", b"", 7, None),
    ] + [(b"many", b"f", b"q%d" % i, b"", i, b"v") for i in range(40)]  # a list longer than 15: long header
    frames = native.encode_update_frames("writer-\u00e9", batch_of(cells), 1 << 30)
    assert frames == [thriftpy2_update("writer-\u00e9", by_row(cells))]


def test_a_row_too_large_for_one_frame_is_an_error_naming_it():
    cells: list[Cell] = [(b"small", b"f", b"q", b"", 1, b"v"), (b"big\xff", b"f", b"q", b"", 1, b"x" * 5000)]
    with pytest.raises(InvalidMutationError, match=r"mutation for row b'big\\xff' \(1 cells\) encodes to \d+ "
                                                    r"bytes, over max_frame_bytes=4096"):
        native.encode_update_frames("w", batch_of(cells), 4096)


def test_bad_cells_are_refused_before_encoding():
    with pytest.raises(InvalidMutationError, match="cell 0: row must not be empty"):
        native.encode_update_frames("w", batch_of([(b"", b"f", b"q", b"", 1, b"v")]), 1 << 20)
    negative = batch_of([(b"r", b"f", b"q", b"", 1, b"v")]).set_column(4, "ts", pa.array([-1], pa.int64()))
    with pytest.raises(InvalidMutationError, match=r"timestamp must be in \[0, 2\*\*63-1\], got -1"):
        native.encode_update_frames("w", negative, 1 << 20)
    put_without_value = batch_of([(b"r", b"f", b"q", b"", 1, None)]).set_column(
        6, "delete", pa.array([False]))
    with pytest.raises(InvalidMutationError, match="a put needs a value"):
        native.encode_update_frames("w", put_without_value, 1 << 20)
    with pytest.raises(TypeError, match='no column "ts"'):
        native.encode_update_frames("w", batch_of([]).drop_columns(["ts"]), 1 << 20)


def test_the_crate_raises_typed_classes_and_the_wrapper_maps_them_by_class():
    """src/error.rs: one class per error variant, mapped once; the wrapper maps classes, not messages."""
    from connector import _native

    too_large = batch_of([(b"big", b"f", b"q", b"", 1, b"x" * 5000)])
    with pytest.raises(_native.RowTooLargeError) as info:
        _native.encode_update_frames("w", too_large, 4096)
    assert isinstance(info.value, _native.InvalidCellError) and isinstance(info.value, _native.NativeError)
    with pytest.raises(_native.InvalidCellError) as bad:
        _native.encode_update_frames("w", batch_of([(b"", b"f", b"q", b"", 1, b"v")]), 1 << 20)
    assert not isinstance(bad.value, _native.RowTooLargeError)
    with pytest.raises(_native.SchemaError):
        _native.encode_update_frames("w", batch_of([]).drop_columns(["ts"]), 1 << 20)
    with pytest.raises(_native.SchemaError, match="expected a pyarrow Array"):
        _native.parse_entry_rows([b"q:1"], "q", 13)
    with pytest.raises(_native.InvalidArgumentError, match="queue id"):
        _native.parse_entry_rows(pa.array([b"q:1"]), "a:b", 13)
    with pytest.raises(_native.InvalidArgumentError, match="num_buckets"):
        _native.parse_entry_rows(pa.array([b"q:1"]), "q", 0)
    with pytest.raises(_native.InvalidArgumentError, match="no native translator"):
        _native.translate("nope", pa.array([b"{}"]))
    # the client's own errors, and nothing of the crate leaks through the wrapper
    with pytest.raises(InvalidMutationError) as mapped:
        native.encode_update_frames("w", too_large, 4096)
    assert not isinstance(mapped.value, _native.NativeError) and mapped.value.__cause__ is None


# --- nextK replies --------------------------------------------------------------------------------

def thriftpy2_next_k_reply(result) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("nextK", TMessageType.REPLY, 0)
    proto.write_struct(proxy.AccumuloProxy.nextK_result(success=result))
    proto.write_message_end()
    return buf.getvalue()


key = st.builds(proxy.Key, row=st.one_of(st.binary(max_size=200), st.just(b"\xff" * 70000)),
                colFamily=st.binary(max_size=20), colQualifier=st.binary(max_size=300),
                colVisibility=st.binary(max_size=10), timestamp=st.integers(-(2**63), 2**63 - 1))


@settings(max_examples=200, deadline=None)
@given(kvs=st.lists(st.builds(proxy.KeyValue, key=key, value=st.binary(max_size=500)), max_size=40),
       more=st.booleans())
def test_next_k_reply_decodes_like_thriftpy2_and_wire_scan(kvs, more):
    frame = thriftpy2_next_k_reply(proxy.ScanResult(results=kvs, more=more))
    decoded = native.decode_next_k_reply(frame)
    assert decoded is not None
    batch, got_more = decoded
    assert got_more == more
    assert batch.schema.names == ["row", "cf", "cq", "cv", "ts", "value"]
    got = list(zip(*(batch.column(i).to_pylist() for i in range(6)), strict=True))
    assert got == [(kv.key.row, kv.key.colFamily, kv.key.colQualifier, kv.key.colVisibility, kv.key.timestamp,
                    kv.value) for kv in kvs]
    cells, _ = decode_reply_cells(frame)
    assert got == [(c.row, c.cf, c.cq, c.cv, c.ts, c.value) for c in cells]


def test_key_defaults_and_empty_results():
    frame = thriftpy2_next_k_reply(proxy.ScanResult(results=[proxy.KeyValue(key=proxy.Key(row=b"r"), value=b"")],
                                                    more=False))
    batch, more = native.decode_next_k_reply(frame)
    assert batch.to_pylist() == [{"row": b"r", "cf": b"", "cq": b"", "cv": b"", "ts": MAX_TIMESTAMP, "value": b""}]
    batch, more = native.decode_next_k_reply(thriftpy2_next_k_reply(proxy.ScanResult(results=[], more=True)))
    assert (batch.num_rows, more) == (0, True)


def test_unusual_replies_are_left_to_thriftpy2():
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("nextK", TMessageType.REPLY, 0)
    proto.write_struct(proxy.AccumuloProxy.nextK_result(ouch2=proxy.UnknownScanner(msg="gone")))
    proto.write_message_end()
    assert native.decode_next_k_reply(buf.getvalue()) is None
    good = thriftpy2_next_k_reply(proxy.ScanResult(results=[proxy.KeyValue(key=proxy.Key(row=b"r" * 300),
                                                                            value=b"v")], more=True))
    for cut in (1, 5, 20, len(good) - 1):
        assert native.decode_next_k_reply(good[:cut]) is None
    assert native.decode_next_k_reply(b"") is None
