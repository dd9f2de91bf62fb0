"""The ``createScanner`` and ``createBatchScanner`` calls encoded directly.

thriftpy2's compact protocol builds and walks three structs per range: 52 ms of CPU for a thousand exact-row
ranges in one batch scan (about a third of a producer's CPU per transaction in ``run_all``), and 39 us for the one
range of a scan, which every read of a row, a queue bucket or a mark begins with. These write the same bytes for
the common options (ranges, columns, the page size, the scan's timeout, isolation); a scan with authorizations or
iterators goes through thriftpy2. ``tests/test_scanner_wire.py`` checks both byte for byte against thriftpy2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .compact import BINARY, FALSE, I32, I64, LIST, STRUCT, TRUE, binary, call_head, field_header, list_header, zigzag

if TYPE_CHECKING:
    from ..cells import Key, Range

SCANNER, BATCH_SCANNER = "createScanner", "createBatchScanner"


def _key(key: Key) -> bytes:
    # Key: row(1), colFamily(2), colQualifier(3), colVisibility(4), timestamp(5, i64), stop
    return (b"\x18" + binary(key.row) + b"\x18" + binary(key.cf) + b"\x18" + binary(key.cq) + b"\x18"
            + binary(key.cv) + bytes([(1 << 4) | I64]) + zigzag(key.ts) + b"\x00")


def _range(rng: Range) -> bytes:
    # Range: start(1, struct), startInclusive(2, bool), stop(3, struct), stopInclusive(4, bool), stop
    out = []
    delta = 1
    if rng.start is not None:
        out.append(bytes([(delta << 4) | STRUCT]) + _key(rng.start))
        delta = 0
    out.append(bytes([((delta + 1) << 4) | (TRUE if rng.start_inclusive else FALSE)]))
    delta = 1
    if rng.stop is not None:
        out.append(bytes([(delta << 4) | STRUCT]) + _key(rng.stop))
        delta = 0
    out.append(bytes([((delta + 1) << 4) | (TRUE if rng.stop_inclusive else FALSE)]))
    out.append(b"\x00")
    return b"".join(out)


def _head(method: str, secret: str, table: str, seqid: int) -> list[bytes]:
    """The call up to its options struct: (sharedSecret, tableName, options)."""
    return [call_head(method, seqid), bytes([(1 << 4) | BINARY]), binary(secret.encode("utf-8")),
            bytes([(1 << 4) | BINARY]), binary(table.encode("utf-8")), bytes([(1 << 4) | STRUCT])]


def _columns(columns: Sequence[Any]) -> bytes:
    # list<ScanColumn>: colFamily(1, binary), colQualifier(2, optional binary), stop
    out = [list_header(len(columns), STRUCT)]
    for column in columns:
        out.append(bytes([(1 << 4) | BINARY]) + binary(column.colFamily))
        if column.colQualifier is not None:
            out.append(bytes([(1 << 4) | BINARY]) + binary(column.colQualifier))
        out.append(b"\x00")
    return b"".join(out)


def _tail(out: list[bytes], last: int, timeout_ms: int | None, isolated: bool | None = None) -> bytes:
    """The options' extensions, timeoutMs(101, i64) and isolated(102, bool), then the ends of the options and the
    arguments."""
    if timeout_ms is not None:
        out.append(field_header(101, last, I64) + zigzag(timeout_ms))
        last = 101
    if isolated is not None:
        out.append(field_header(102, last, TRUE if isolated else FALSE))
    out.append(b"\x00\x00")
    return b"".join(out)


def encode_scanner_call(secret: str, table: str, rng: Range, columns: Sequence[Any] | None,
                        buffer_size: int | None, timeout_ms: int | None, isolated: bool | None,
                        seqid: int = 0) -> bytes:
    """The whole ``createScanner(secret, table, ScanOptions{range, columns, bufferSize, timeoutMs, isolated})``
    call message (no authorizations or iterators); ``columns`` are thrift ``ScanColumn`` structs."""
    # ScanOptions: range(2, Range), columns(3, list<ScanColumn>), bufferSize(5, i32), then the extensions
    out = _head(SCANNER, secret, table, seqid)
    out.append(bytes([(2 << 4) | STRUCT]) + _range(rng))
    last = 2
    if columns is not None:
        out.append(bytes([(1 << 4) | LIST]) + _columns(columns))
        last = 3
    if buffer_size is not None:
        out.append(field_header(5, last, I32) + zigzag(buffer_size))
        last = 5
    return _tail(out, last, timeout_ms, isolated)


def encode_batch_scanner_call(secret: str, table: str, ranges: Sequence[Range], threads: int | None,
                              timeout_ms: int | None, seqid: int = 0) -> bytes:
    """The whole ``createBatchScanner(secret, table, BatchScanOptions{ranges, threads, timeoutMs})`` call
    message (no authorizations, columns or iterators: the user's authorizations and every column)."""
    out = _head(BATCH_SCANNER, secret, table, seqid)
    # BatchScanOptions: ranges(2, list<Range>), threads(5, i32), then the extension timeoutMs
    out.append(bytes([(2 << 4) | LIST]) + list_header(len(ranges), STRUCT))
    out.extend(_range(r) for r in ranges)
    last = 2
    if threads is not None:
        out.append(bytes([(3 << 4) | I32]) + zigzag(threads))
        last = 5
    return _tail(out, last, timeout_ms)
