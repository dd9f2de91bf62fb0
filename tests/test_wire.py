"""The Python oracles of the wire codec (``tests/wire_oracle.py``, ``tests/next_k_oracle.py``) and the
hand-encoded ``nextK`` request produce and read exactly the bytes thriftpy2's compact protocol does; ``scan()``'s
cells (native decoding, cells built from the batch) read what thriftpy2 wrote."""

from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

from connector.accumulo._idl import MAX_TIMESTAMP, proxy
from connector.accumulo.mutation import ColumnUpdate
from connector.accumulo.wire.structs import column_update_to_thrift

from .wire_oracle import encode_column_update, encode_row_entry, encode_update_message


def thriftpy2_bytes(writer_id: str, cells: dict) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("update", TMessageType.ONEWAY, 0)
    args = proxy.AccumuloProxy.update_args(writer=writer_id, cells=cells)
    proto.write_struct(args)
    proto.write_message_end()
    return buf.getvalue()


def ours(writer_id: str, rows: dict[bytes, list[ColumnUpdate]]) -> bytes:
    entries = b"".join(encode_row_entry(r, [encode_column_update(u) for u in ups]) for r, ups in rows.items())
    return encode_update_message(writer_id, len(rows), entries)


small = st.binary(max_size=300)
update = st.builds(
    ColumnUpdate,
    cf=small, cq=small, cv=st.sampled_from([b"", b"a&b", b"x"]),
    timestamp=st.one_of(st.none(), st.integers(0, MAX_TIMESTAMP)),
    value=st.binary(max_size=400),
    delete=st.booleans(),
).map(lambda u: u._replace(value=b"") if u.delete else u)


@settings(max_examples=300, deadline=None)
@given(writer_id=st.text(max_size=40), rows=st.dictionaries(st.binary(min_size=1, max_size=200),
                                                             st.lists(update, max_size=20), max_size=20))
def test_update_message_matches_thriftpy2(writer_id, rows):
    cells = {r: [column_update_to_thrift(u) for u in ups] for r, ups in rows.items()}
    assert ours(writer_id, rows) == thriftpy2_bytes(writer_id, cells)


def test_large_lists_and_sizes_use_long_forms():
    rows = {b"r" * 200: [ColumnUpdate(b"f", b"q%d" % i, b"", i, b"v" * 1000, False) for i in range(40)]}
    cells = {r: [column_update_to_thrift(u) for u in ups] for r, ups in rows.items()}
    assert ours("w", rows) == thriftpy2_bytes("w", cells)


def thriftpy2_next_k_reply(result) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("nextK", TMessageType.REPLY, 0)
    proto.write_struct(proxy.AccumuloProxy.nextK_result(success=result))
    proto.write_message_end()
    return buf.getvalue()


key = st.builds(proxy.Key, row=st.binary(max_size=200), colFamily=st.binary(max_size=20),
                colQualifier=st.binary(max_size=300), colVisibility=st.binary(max_size=10),
                timestamp=st.integers(-(2**63), 2**63 - 1))


@settings(max_examples=200, deadline=None)
@given(kvs=st.lists(st.builds(proxy.KeyValue, key=key, value=st.binary(max_size=500)), max_size=40),
       more=st.booleans())
def test_scan_reply_decoders_match_thriftpy2(kvs, more):
    """scan()'s decoding (native into a batch, cells built from it) and the Python oracle both read what
    thriftpy2 wrote."""
    from connector.accumulo.scanner import cells_of
    from connector.accumulo.wire.native import decode_next_k_reply

    from .next_k_oracle import decode_reply_cells

    frame = thriftpy2_next_k_reply(proxy.ScanResult(results=kvs, more=more))
    expected = [(kv.key.row, kv.key.colFamily, kv.key.colQualifier, kv.key.colVisibility, kv.key.timestamp,
                 kv.value) for kv in kvs]
    batch, native_more = decode_next_k_reply(frame)
    for cells, got_more in ((cells_of(batch), native_more), decode_reply_cells(frame)):
        assert all(type(c).__name__ == "Cell" for c in cells)
        assert got_more == more
        assert [(c.row, c.cf, c.cq, c.cv, c.ts, c.value) for c in cells] == expected


def test_next_k_request_matches_thriftpy2():
    from connector.accumulo.wire.next_k import encode_next_k

    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("nextK", TMessageType.CALL, 0)
    proto.write_struct(proxy.AccumuloProxy.nextK_args(scanner="abc-123", k=1000))
    proto.write_message_end()
    assert encode_next_k("abc-123", 1000)[4:] == buf.getvalue()
