"""The ``createBatchScanner`` call encoded directly, for a read of many ranges (a ``run_all`` round reads a
thousand rows in one batch scan).

thriftpy2's compact protocol builds and walks three structs per range: 52 ms of CPU for a thousand exact-row
ranges, about a third of a producer's CPU per transaction in ``run_all``. This writes the same bytes for the
common options (ranges, threads, the scan's timeout); a scan with authorizations, columns or iterators goes
through thriftpy2. ``tests/test_batch_scanner_wire.py`` checks it byte for byte against thriftpy2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .compact import BINARY, I32, I64, LIST, STRUCT, binary, call_head, list_header, varint

if TYPE_CHECKING:
    from ..cells import Key, Range

METHOD = "createBatchScanner"
_TRUE, _FALSE = 1, 2  # a bool field's value is its header's type


def _zigzag(n: int) -> bytes:
    return varint((n << 1) ^ (n >> 63))


def _key(key: Key) -> bytes:
    # Key: row(1), colFamily(2), colQualifier(3), colVisibility(4), timestamp(5, i64), stop
    return (b"\x18" + binary(key.row) + b"\x18" + binary(key.cf) + b"\x18" + binary(key.cq) + b"\x18"
            + binary(key.cv) + bytes([(1 << 4) | I64]) + _zigzag(key.ts) + b"\x00")


def _range(rng: Range) -> bytes:
    # Range: start(1, struct), startInclusive(2, bool), stop(3, struct), stopInclusive(4, bool), stop
    out = []
    delta = 1
    if rng.start is not None:
        out.append(bytes([(delta << 4) | STRUCT]) + _key(rng.start))
        delta = 0
    out.append(bytes([((delta + 1) << 4) | (_TRUE if rng.start_inclusive else _FALSE)]))
    delta = 1
    if rng.stop is not None:
        out.append(bytes([(delta << 4) | STRUCT]) + _key(rng.stop))
        delta = 0
    out.append(bytes([((delta + 1) << 4) | (_TRUE if rng.stop_inclusive else _FALSE)]))
    out.append(b"\x00")
    return b"".join(out)


def encode_batch_scanner_call(secret: str, table: str, ranges: Sequence[Range], threads: int | None,
                              timeout_ms: int | None, seqid: int = 0) -> bytes:
    """The whole ``createBatchScanner(secret, table, BatchScanOptions{ranges, threads, timeoutMs})`` call
    message (no authorizations, columns or iterators: the user's authorizations and every column)."""
    out = [call_head(METHOD, seqid), bytes([(1 << 4) | BINARY]), binary(secret.encode("utf-8")),
           bytes([(1 << 4) | BINARY]), binary(table.encode("utf-8")), bytes([(1 << 4) | STRUCT])]
    # BatchScanOptions: ranges(2, list<Range>), threads(5, i32), timeoutMs(101, i64), stop
    out.append(bytes([(2 << 4) | LIST]) + list_header(len(ranges), STRUCT))
    out.extend(_range(r) for r in ranges)
    last = 2
    if threads is not None:
        out.append(bytes([(3 << 4) | I32]) + _zigzag(threads))
        last = 5
    if timeout_ms is not None:
        out.append(bytes([I64]) + _zigzag(101) if 101 - last > 15 else bytes([((101 - last) << 4) | I64]))
        out.append(_zigzag(timeout_ms))
    out.append(b"\x00\x00")  # end of the options, end of the arguments
    return b"".join(out)
