"""The test oracle for ``nextK`` replies: the Python decoder of a ScanResult that the client used before the
native decoder (``connector.accumulo.wire.native``) became the only one. Tests check it against thriftpy2 and
the native decoder against it. Nothing outside ``tests/`` imports it (the benchmark of the codec times
thriftpy2 instead)."""

from __future__ import annotations

from connector.accumulo.cells import Cell

_TRUE, _FALSE, _I64, _BINARY, _LIST, _STRUCT = 1, 2, 6, 8, 9, 12


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


class _Fallback(Exception):
    """The reply is not a plain ScanResult."""


def decode_reply_cells(frame: bytes) -> tuple[list[Cell], bool]:
    """The cells and ``more`` of a plain ``nextK`` reply message (raises for anything else)."""
    _, pos = _varint(frame, 2)  # seqid
    _, pos = _read_binary(frame, pos)  # method name
    # field 0 (success) needs the long-form header: the type byte, then the zigzag field id 0
    assert frame[pos:pos + 2] == bytes([_STRUCT, 0]), "not a plain ScanResult reply"
    return decode_scan_result(frame, pos + 2)


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
