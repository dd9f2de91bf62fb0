"""The test oracle for entry-row parsing: ``QueueLayout.parse_row`` as it was written in Python, check for
check and reason for reason, before the Rust parser (``connector._native``, through
``QueueLayout.parse_rows``) became the only one. Tests compare the native parser against it."""

from __future__ import annotations

from connector.export.core import MAX_SEQ
from connector.queue.errors import MalformedEntryError
from connector.queue.layout import SEQ_BYTES, ParsedRow, QueueLayout, bucket_of

_HEX_DIGITS = frozenset(b"0123456789abcdef")


def parse_row(layout: QueueLayout, row: bytes) -> ParsedRow:
    """Take an entry row apart; raises ``MalformedEntryError`` with the reason when it is not one of
    ``layout``'s entry rows (wrong prefix, short, bad bucket, bad sequence, key in the wrong bucket)."""
    prefix = layout.qid.encode("utf-8") + b":"
    width = layout.hex_width
    if not row.startswith(prefix):
        raise MalformedEntryError(row, f"wrong prefix: expected {prefix!r}")
    hex_end = len(prefix) + width
    if len(row) <= hex_end:
        raise MalformedEntryError(row, f"short row: no bucket id of {width} hex digits and ':'")
    hex_part = row[len(prefix):hex_end]
    if not set(hex_part) <= _HEX_DIGITS or row[hex_end] != ord(":"):
        raise MalformedEntryError(
            row, f"bad bucket hex: expected {width} lowercase hex digits and ':' after {prefix!r}")
    bucket = int(hex_part, 16)
    if bucket >= layout.num_buckets:
        raise MalformedEntryError(row, f"bucket {bucket} out of range for {layout.num_buckets} buckets")
    rest = row[hex_end + 1:]
    if len(rest) < SEQ_BYTES:
        raise MalformedEntryError(
            row, f"short row: {len(rest)} bytes after the bucket prefix, need at least {SEQ_BYTES} for the seq")
    key_bytes, seq_bytes = rest[:-SEQ_BYTES], rest[-SEQ_BYTES:]
    seq = int.from_bytes(seq_bytes, "big")
    if seq > MAX_SEQ:
        raise MalformedEntryError(row, f"seq {seq_bytes.hex()} does not fit in a non-negative signed 64-bit int")
    actual = bucket_of(key_bytes, layout.num_buckets)
    if actual != bucket:
        raise MalformedEntryError(row, f"key hashes to bucket {actual}, but the row is in bucket {bucket}")
    return ParsedRow(bucket, key_bytes, seq)
