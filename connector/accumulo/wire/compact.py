"""The Thrift compact-protocol primitives of the calls the client encodes by hand in Python: the ``nextK``
request (:mod:`.next_k`), ``updateRowsConditionally`` (:mod:`.conditional`) and the scanners' ``createScanner``
and ``createBatchScanner`` (:mod:`.scanners`). ``update`` calls and ``nextK`` replies are encoded and decoded in
Rust (:mod:`.native`), never with these."""

from __future__ import annotations

#: compact-protocol type ids (a bool field's value is its header's type: TRUE or FALSE)
TRUE, FALSE, I32, I64, BINARY, LIST, SET, MAP, STRUCT = 1, 2, 5, 6, 8, 9, 10, 11, 12
PROTOCOL_ID, VERSION, CALL = 0x82, 1, 1


def varint(n: int) -> bytes:
    """Unsigned LEB128, as the compact protocol writes sizes and zigzagged integers."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def binary(b: bytes) -> bytes:
    """A binary or string: its length, then its bytes."""
    return varint(len(b)) + b


def list_header(n: int, elem: int) -> bytes:
    """The header of a list of ``n`` elements of type ``elem``."""
    return bytes([(n << 4) | elem]) if n < 15 else bytes([0xF0 | elem]) + varint(n)


def call_head(method: str, seqid: int = 0) -> bytes:
    """A CALL message's header up to its arguments struct."""
    return bytes([PROTOCOL_ID, VERSION | (CALL << 5)]) + varint(seqid) + binary(method.encode())


def zigzag(n: int) -> bytes:
    """A signed integer (i16, i32, i64) as the compact protocol writes it."""
    return varint((n << 1) ^ (n >> 63))


def field_header(field_id: int, last_id: int, kind: int) -> bytes:
    """A field's header: the id's delta from the struct's previous field in the high nibble when it fits, else
    the type alone and the id in full."""
    delta = field_id - last_id
    return bytes([(delta << 4) | kind]) if 0 < delta <= 15 else bytes([kind]) + zigzag(field_id)
