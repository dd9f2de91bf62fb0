"""Fast path for ``nextK``, the hot path of reading.

thriftpy2 decodes a ScanResult at about 30k cells/s; this module sends the ``nextK`` call and decodes its
reply directly (Thrift compact protocol, structs Key/KeyValue/ScanResult of proxy.thrift), several times
faster. Anything unusual in the reply (an exception, an unknown field) is handed to thriftpy2 to decode, so
errors surface exactly as on the generic path. ``tests/test_wire.py`` checks the decoder against thriftpy2.
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


_CALL, _REPLY, _EXCEPTION = 1, 2, 3
_TRUE, _FALSE, _I64, _BINARY, _LIST, _STRUCT = 1, 2, 6, 8, 9, 12


class _Fallback(Exception):
    """The reply is not a plain ScanResult; let thriftpy2 decode it."""


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


def _decode_key(buf: bytes, pos: int) -> tuple[tuple[bytes, bytes, bytes, bytes, int], int]:
    parts = [b"", b"", b"", b""]
    ts = 0x7FFFFFFFFFFFFFFF
    fid = 0
    while True:
        header = buf[pos]
        pos += 1
        if header == 0:
            return (parts[0], parts[1], parts[2], parts[3], ts), pos
        delta, ftype = header >> 4, header & 0x0F
        if delta == 0:
            raise _Fallback
        fid += delta
        if ftype == _BINARY and 1 <= fid <= 4:
            parts[fid - 1], pos = _read_binary(buf, pos)
        elif ftype == _I64 and fid == 5:
            z, pos = _varint(buf, pos)
            ts = (z >> 1) ^ -(z & 1)
        else:
            raise _Fallback


def decode_scan_result(buf: bytes, pos: int) -> tuple[list[Cell], bool]:
    """Decode a ScanResult struct starting at ``pos``."""
    cells: list[Cell] = []
    more = False
    fid = 0
    while True:
        header = buf[pos]
        pos += 1
        if header == 0:
            return cells, more
        delta, ftype = header >> 4, header & 0x0F
        if delta == 0:
            raise _Fallback
        fid += delta
        if fid == 1 and ftype == _LIST:
            size_type = buf[pos]
            pos += 1
            n = size_type >> 4
            if n == 15:
                n, pos = _varint(buf, pos)
            if n and size_type & 0x0F != _STRUCT:
                raise _Fallback
            for _ in range(n):
                key = None
                value = b""
                kv_fid = 0
                while True:
                    h = buf[pos]
                    pos += 1
                    if h == 0:
                        break
                    d, t = h >> 4, h & 0x0F
                    if d == 0:
                        raise _Fallback
                    kv_fid += d
                    if kv_fid == 1 and t == _STRUCT:
                        key, pos = _decode_key(buf, pos)
                    elif kv_fid == 2 and t == _BINARY:
                        value, pos = _read_binary(buf, pos)
                    else:
                        raise _Fallback
                if key is None:
                    raise _Fallback
                cells.append(Cell(key[0], key[1], key[2], key[3], key[4], value))
        elif fid == 2 and ftype in (_TRUE, _FALSE):
            more = ftype == _TRUE
        else:
            raise _Fallback


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
    cells, more = decode_reply(frame)
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
    """A ``nextK`` reply message decoded into cells (in Python), or the error it carries raised."""
    mtype = frame[1] >> 5
    _, pos = _varint(frame, 2)  # seqid
    _, pos = _read_binary(frame, pos)  # method name
    try:
        if mtype == _REPLY and frame[pos] == _STRUCT and frame[pos + 1] == 0:
            # field 0 (success) needs the long-form header: the type byte, then the zigzag field id 0
            return decode_scan_result(frame, pos + 2)
        raise _Fallback
    except (_Fallback, IndexError):
        return _generic(frame, pos, mtype)


def _generic(frame: bytes, pos: int, mtype: int) -> tuple[list[Cell], bool]:
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
