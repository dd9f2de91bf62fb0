"""The test oracle for ``update`` calls: the Python encoder that ``BatchWriter.add_mutation`` (and the
conditional call's updates) used before the Rust encoder (``connector.accumulo.wire.native``) became the
only one. ``tests/test_wire.py`` checks it byte for byte against thriftpy2, and the Rust encoder against it
(``tests/test_native_wire.py``). Nothing outside ``tests/`` imports it (the benchmark of the codec times
thriftpy2 instead).

The Thrift compact protocol, field ids of ``ColumnUpdate`` from proxy.thrift."""

from __future__ import annotations

from functools import lru_cache

from connector.accumulo.mutation import ColumnUpdate

# Compact protocol type ids.
_BOOL_TRUE, _I64, _BINARY, _LIST, _MAP, _STRUCT = 1, 6, 8, 9, 11, 12
_PROTOCOL_ID, _VERSION, _ONEWAY = 0x82, 1, 4


def varint(n: int) -> bytes:
    """Unsigned LEB128, as the compact protocol writes sizes and zigzagged integers."""
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes([i]) for i in range(0x80)]


@lru_cache(maxsize=8192)
def _timestamp_field(ts: int) -> bytes:
    # field 4 (i64), delta 1 after field 3; zigzag of a non-negative value is value << 1
    return bytes([(1 << 4) | _I64]) + varint(ts << 1)


def _binary(b: bytes) -> bytes:
    n = len(b)
    return (_SMALL[n] if n < 0x80 else varint(n)) + b


_FIELD1_BINARY = bytes([(1 << 4) | _BINARY])  # field delta 1, binary


def encode_column_update(u: ColumnUpdate) -> bytes:
    """One ColumnUpdate struct: cf(1), cq(2), cv(3), [timestamp(4)], value(5) or deleteCell(6), stop."""
    cf, cq, cv, ts, value, delete = u
    n1, n2, n3 = len(cf), len(cq), len(cv)
    small = _SMALL
    if n1 < 0x80 and n2 < 0x80 and n3 < 0x80:
        head = b"\x18" + small[n1] + cf + b"\x18" + small[n2] + cq + b"\x18" + small[n3] + cv
    else:
        head = b"\x18" + varint(n1) + cf + b"\x18" + varint(n2) + cq + b"\x18" + varint(n3) + cv
    if ts is not None:
        head += _timestamp_field(ts)
        if delete:
            return head + b"\x21\x00"  # deleteCell(6) = true, field delta 2
        value_header = b"\x18"  # value(5), delta 1
    else:
        if delete:
            return head + b"\x31\x00"  # deleteCell(6) = true, field delta 3
        value_header = b"\x28"  # value(5), delta 2
    n = len(value)
    return head + value_header + (small[n] if n < 0x80 else varint(n)) + value + b"\x00"


def encode_row_entry(row: bytes, encoded_updates: list[bytes]) -> bytes:
    """One map entry: the row key, then the list<ColumnUpdate> of already-encoded structs."""
    n = len(encoded_updates)
    header = bytes([(n << 4) | _STRUCT]) if n < 15 else bytes([0xF0 | _STRUCT]) + varint(n)
    return _binary(row) + header + b"".join(encoded_updates)


def encode_update_message(writer_id: str, n_rows: int, entries: bytes, seqid: int = 0) -> bytes:
    """The whole oneway ``update(writer, cells)`` message, ready to be framed."""
    name = b"update"
    head = bytes([_PROTOCOL_ID, (_VERSION & 0x1F) | (_ONEWAY << 5)]) + varint(seqid) + _binary(name)
    args = _FIELD1_BINARY + _binary(writer_id.encode("utf-8"))
    if n_rows == 0:
        cells = bytes([(1 << 4) | _MAP, 0])
    else:
        cells = bytes([(1 << 4) | _MAP]) + varint(n_rows) + bytes([(_BINARY << 4) | _LIST]) + entries
    return head + args + cells + b"\x00"
