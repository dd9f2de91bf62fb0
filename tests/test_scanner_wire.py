"""The hand-written ``createScanner`` and ``createBatchScanner`` encoders must produce exactly the bytes thriftpy2
does."""

from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

from connector.accumulo import Range
from connector.accumulo._idl import MAX_TIMESTAMP, proxy
from connector.accumulo.cells import Key, columns_to_thrift
from connector.accumulo.wire.scanners import encode_batch_scanner_call, encode_scanner_call


def thriftpy2_bytes(secret: str, table: str, ranges: list[Range], threads: int | None,
                    timeout_ms: int | None) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("createBatchScanner", TMessageType.CALL, 0)
    options = proxy.BatchScanOptions(ranges=[r.to_thrift() for r in ranges], threads=threads, timeoutMs=timeout_ms)
    proto.write_struct(proxy.AccumuloProxy.createBatchScanner_args(sharedSecret=secret, tableName=table,
                                                                   options=options))
    proto.write_message_end()
    return buf.getvalue()


small = st.binary(max_size=60)
key = st.builds(Key, row=small, cf=small, cq=small, cv=st.sampled_from([b"", b"a&b"]),
                ts=st.one_of(st.just(MAX_TIMESTAMP), st.integers(-(2**63), MAX_TIMESTAMP)))
ranges = st.one_of(
    st.builds(Range, start=st.one_of(st.none(), key), start_inclusive=st.booleans(),
              stop=st.one_of(st.none(), key), stop_inclusive=st.booleans()),
    st.builds(Range.exact_row, st.binary(min_size=1, max_size=40)),
    st.builds(Range.prefix, st.binary(min_size=1, max_size=40)),
)


@settings(max_examples=300, deadline=None)
@given(secret=st.text(max_size=40), table=st.text(min_size=1, max_size=40),
       ranges=st.lists(ranges, max_size=40), threads=st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
       timeout_ms=st.one_of(st.none(), st.integers(0, 2**62)))
def test_batch_scanner_call_matches_thriftpy2(secret, table, ranges, threads, timeout_ms):
    assert (encode_batch_scanner_call(secret, table, ranges, threads, timeout_ms)
            == thriftpy2_bytes(secret, table, ranges, threads, timeout_ms))


def thriftpy2_scanner_bytes(secret: str, table: str, rng: Range, columns: list | None, buffer_size: int | None,
                            timeout_ms: int | None, isolated: bool | None) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("createScanner", TMessageType.CALL, 0)
    options = proxy.ScanOptions(range=rng.to_thrift(), columns=columns_to_thrift(columns), bufferSize=buffer_size,
                                timeoutMs=timeout_ms, isolated=isolated)
    proto.write_struct(proxy.AccumuloProxy.createScanner_args(sharedSecret=secret, tableName=table, options=options))
    proto.write_message_end()
    return buf.getvalue()


columns = st.one_of(st.none(), st.lists(st.one_of(small, st.tuples(small, small)), max_size=20))


@settings(max_examples=400, deadline=None)
@given(secret=st.text(max_size=40), table=st.text(min_size=1, max_size=40), rng=ranges, columns=columns,
       buffer_size=st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
       timeout_ms=st.one_of(st.none(), st.integers(0, 2**62)), isolated=st.one_of(st.none(), st.booleans()))
def test_scanner_call_matches_thriftpy2(secret, table, rng, columns, buffer_size, timeout_ms, isolated):
    assert (encode_scanner_call(secret, table, rng, columns_to_thrift(columns), buffer_size, timeout_ms, isolated)
            == thriftpy2_scanner_bytes(secret, table, rng, columns, buffer_size, timeout_ms, isolated))
