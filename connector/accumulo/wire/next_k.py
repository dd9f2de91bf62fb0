"""Fast path for ``nextK``, the hot path of reading.

thriftpy2 decodes a ScanResult at about 30k cells/s; this module sends the ``nextK`` call itself and has its
reply decoded natively (:mod:`.native_wire`, Thrift compact protocol, structs Key/KeyValue/ScanResult of
proxy.thrift), into an Arrow batch or, for ``scan()``, cells. Anything unusual in the reply (an exception, an
unknown field) is handed to thriftpy2 to decode, so errors surface exactly as on the generic path.
``tests/test_wire.py`` and ``tests/test_native_wire.py`` check the decoding against thriftpy2 (and the Python
decoder kept as their oracle, ``tests/next_k_oracle.py``).
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TMemoryBuffer, TTransportException

from ._idl import proxy
from .cells import Cell
from .native_wire import decode_next_k_reply
from .wire import _FIELD1_BINARY, _binary, varint

#: what ``Connection.scan_batches`` yields, one batch per ``nextK`` page (as ``native_wire.decode_next_k_reply``)
CELLS_SCHEMA = pa.schema([pa.field(name, pa.int64() if name == "ts" else pa.binary(), nullable=False)
                          for name in ("row", "cf", "cq", "cv", "ts", "value")])


_CALL, _EXCEPTION = 1, 3


def encode_next_k(scanner_id: str, k: int, seqid: int = 0) -> bytes:
    head = bytes([0x82, 0x01 | (_CALL << 5)]) + varint(seqid) + _binary(b"nextK")
    args = _FIELD1_BINARY + _binary(scanner_id.encode()) + bytes([(1 << 4) | 5]) + varint((k << 1) ^ (k >> 31))
    body = head + args + b"\x00"
    return struct.pack("!i", len(body)) + body


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _read_binary(buf: bytes, pos: int) -> tuple[bytes, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = _varint(buf, pos)
    end = pos + n
    return buf[pos:end], end


def _recv_exact(sock: Any, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        r = sock.recv_into(view[got:], n - got)
        if r == 0:
            raise TTransportException(TTransportException.END_OF_FILE, "gateway closed the connection")
        got += r
    return bytes(buf)


def next_k_frame(client: Any, scanner_id: str, k: int) -> bytes:
    """Call ``nextK`` on ``client``'s socket and return the reply message (the frame without its length)."""
    sock = client.raw_socket.sock
    sock.sendall(encode_next_k(scanner_id, k))
    (size,) = struct.unpack("!i", _recv_exact(sock, 4))
    frame = _recv_exact(sock, size)
    if frame[0] != 0x82:
        raise TTransportException(TTransportException.UNKNOWN, "not a compact-protocol reply")
    return frame


def next_k_batch(client: Any, scanner_id: str, k: int) -> tuple[pa.RecordBatch, bool]:
    """``nextK`` with the reply decoded natively into a cells batch (row, cf, cq, cv, ts, value); a reply
    the native decoder hands back (an exception, an unknown field) goes through thriftpy2, which raises
    what the generic call raises."""
    frame = next_k_frame(client, scanner_id, k)
    decoded = decode_next_k_reply(frame)
    if decoded is not None:
        return decoded
    cells, more = _generic(frame)
    return cells_batch(cells), more


def cells_batch(cells: list[Cell]) -> pa.RecordBatch:
    """Cells as a scanned-cells batch (the rare path: replies the native decoder does not take)."""
    columns = list(zip(*cells, strict=True)) if cells else [()] * 6
    return pa.record_batch([pa.array(col, type=f.type) for col, f in zip(columns, CELLS_SCHEMA, strict=True)],
                           schema=CELLS_SCHEMA)


def next_k(client: Any, scanner_id: str, k: int) -> tuple[list[Cell], bool]:
    """Call ``nextK`` on ``client``'s socket and decode the reply; raises what the generic call raises."""
    return decode_reply(next_k_frame(client, scanner_id, k))


def decode_reply(frame: bytes) -> tuple[list[Cell], bool]:
    """A ``nextK`` reply message decoded into cells, or the error it carries raised."""
    decoded = decode_next_k_reply(frame)
    if decoded is None:
        return _generic(frame)
    batch, more = decoded
    return [Cell(*cell) for cell in zip(*(column.to_pylist() for column in batch.columns), strict=True)], more


def _generic(frame: bytes) -> tuple[list[Cell], bool]:
    """thriftpy2's decoding of a reply the native decoder hands back: the error it carries, raised."""
    mtype = frame[1] >> 5
    _, pos = _varint(frame, 2)  # seqid
    _, pos = _read_binary(frame, pos)  # method name
    proto = TCompactProtocol(TMemoryBuffer(frame[pos:]))
    if mtype == _EXCEPTION:
        exc = TApplicationException()
        proto.read_struct(exc)
        raise exc
    result = proxy.AccumuloProxy.nextK_result()
    proto.read_struct(result)
    for name in ("ouch1", "ouch2", "ouch3"):
        err = getattr(result, name, None)
        if err is not None:
            raise err
    if result.success is None:
        raise TApplicationException(TApplicationException.MISSING_RESULT, "nextK failed: unknown result")
    r = result.success
    cells = [Cell(kv.key.row, kv.key.colFamily, kv.key.colQualifier, kv.key.colVisibility, kv.key.timestamp,
                  kv.value) for kv in r.results or []]
    return cells, bool(r.more)
