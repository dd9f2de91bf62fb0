"""The raw ``nextK`` call, the hot path of reading.

thriftpy2 decodes a ScanResult at about 30k cells/s; this sends the ``nextK`` call itself on the client's
socket and has its reply decoded natively (:mod:`.native`, the one decoder of ``nextK`` replies) into a
cells batch. Anything unusual in the reply (an exception, an unknown field) is handed to thriftpy2, so
errors surface exactly as on the generic path. ``tests/test_wire.py`` and ``tests/test_native_wire.py``
check the decoding against thriftpy2 and the Python oracle ``tests/next_k_oracle.py``.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TApplicationException, TMessageType
from thriftpy2.transport import TMemoryBuffer, TTransportException

from .._idl import proxy
from .compact import I32, binary, call_head, varint
from .native import CELLS_SCHEMA, decode_next_k_reply


def encode_next_k(scanner_id: str, k: int, seqid: int = 0) -> bytes:
    """The framed ``nextK(scanner_id, k)`` call (its 4-byte length first), ready for the socket."""
    args = b"\x18" + binary(scanner_id.encode()) + bytes([(1 << 4) | I32]) + varint((k << 1) ^ (k >> 31))
    body = call_head("nextK", seqid) + args + b"\x00"
    return struct.pack("!i", len(body)) + body


def recv_exact(sock: Any, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock``; a closed connection is a transport error."""
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
    (size,) = struct.unpack("!i", recv_exact(sock, 4))
    frame = recv_exact(sock, size)
    if frame[0] != 0x82:
        raise TTransportException(TTransportException.UNKNOWN, "not a compact-protocol reply")
    return frame


def next_k_batch(client: Any, scanner_id: str, k: int) -> tuple[pa.RecordBatch, bool]:
    """``nextK`` with the reply decoded natively into a cells batch (:data:`.native.CELLS_SCHEMA`); a reply
    the native decoder hands back (an exception, an unknown field) goes through thriftpy2, which raises what
    the generic call raises."""
    frame = next_k_frame(client, scanner_id, k)
    decoded = decode_next_k_reply(frame)
    if decoded is not None:
        return decoded
    return _generic(frame)


def _generic(frame: bytes) -> tuple[pa.RecordBatch, bool]:
    """thriftpy2's decoding of a reply the native decoder hands back: the error it carries raised, or (the
    rare plain reply it did not take) its cells as a batch."""
    proto = TCompactProtocol(TMemoryBuffer(frame))
    _, mtype, _ = proto.read_message_begin()
    if mtype == TMessageType.EXCEPTION:
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
    cells = [(kv.key.row, kv.key.colFamily, kv.key.colQualifier, kv.key.colVisibility, kv.key.timestamp,
              kv.value) for kv in r.results or []]
    columns = list(zip(*cells, strict=True)) if cells else [()] * 6
    batch = pa.record_batch([pa.array(col, type=f.type) for col, f in zip(columns, CELLS_SCHEMA, strict=True)],
                            schema=CELLS_SCHEMA)
    return batch, bool(r.more)
