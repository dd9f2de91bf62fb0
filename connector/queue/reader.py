"""Reading queue entries as they are stored, without decoding them (decoding is the processor's job)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Connection

from .config import QueueConfig
from .layout import ENTRY_FAMILY, ENTRY_QUALIFIER


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """One entry as read from the queue table: its ``row``, its Accumulo timestamp ``ts`` (the version to
    delete once exported) and its serialized ``value``."""

    row: bytes
    ts: int
    value: bytes

    @property
    def size(self) -> int:
        """Bytes this entry counts for in a batch: row plus value."""
        return len(self.row) + len(self.value)


def read_bucket(conn: Connection, config: QueueConfig, bucket: int, batch_size: int = 1000) -> Iterator[QueueEntry]:
    """Yield the entries of one bucket in row order (key, then seq), fetched ``batch_size`` at a time."""
    rng = config.layout.bucket_range(bucket)
    for cell in conn.scan(config.table, rng, columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)], batch_size=batch_size):
        yield QueueEntry(cell.row, cell.ts, cell.value)


#: entries as the drain moves them: the entry row, its Accumulo timestamp, its serialized value
ENTRY_SCHEMA = pa.schema([("row", pa.binary()), ("ts", pa.int64()), ("value", pa.binary())])


def read_bucket_batches(conn: Connection, config: QueueConfig, bucket: int,
                        batch_size: int = 1000) -> Iterator[pa.RecordBatch]:
    """The entries of one bucket in row order as Arrow batches (``ENTRY_SCHEMA``), one per scan page of up
    to ``batch_size`` entries, decoded natively."""
    rng = config.layout.bucket_range(bucket)
    for page in conn.scan_batches(config.table, rng, columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)],
                                  batch_size=batch_size):
        if page.num_rows:
            yield pa.record_batch([page.column("row"), page.column("ts"), page.column("value")], schema=ENTRY_SCHEMA)


def read_bucket_head(conn: Connection, config: QueueConfig, bucket: int, max_entries: int | None = None,
                     max_bytes: int | None = None, batch_size: int = 1000) -> Iterator[pa.RecordBatch]:
    """The first entries of one bucket (as :func:`read_bucket_batches`): at most ``max_entries``, and up to
    the entry that reaches ``max_bytes`` (row + value; so at least one entry: a limited reader still moves
    on). None: no such limit."""
    left, bytes_left = max_entries, max_bytes
    for page in read_bucket_batches(conn, config, bucket, batch_size):
        if left is not None:
            if left <= 0:
                return
            page = page.slice(0, left)
            left -= page.num_rows
        if bytes_left is not None:
            if bytes_left <= 0:
                return
            sizes = pc.add(pc.binary_length(page.column("row")), pc.binary_length(page.column("value")))
            sizes = sizes.cast(pa.int64())
            before = pc.subtract(pc.cumulative_sum(sizes), sizes)  # bytes ahead of each entry
            keep = pc.sum(pc.less(before, bytes_left).cast(pa.int64())).as_py()
            page = page.slice(0, keep)
            bytes_left -= pc.sum(sizes.slice(0, keep)).as_py() or 0
        yield page


def entries_to_batches(entries: Iterable[QueueEntry], rows_per_batch: int = 1000) -> Iterator[pa.RecordBatch]:
    """``QueueEntry`` objects (the per-entry API) as ``ENTRY_SCHEMA`` batches."""
    chunk: list[QueueEntry] = []
    for entry in entries:
        chunk.append(entry)
        if len(chunk) >= rows_per_batch:
            yield _to_batch(chunk)
            chunk = []
    if chunk:
        yield _to_batch(chunk)


def _to_batch(entries: list[QueueEntry]) -> pa.RecordBatch:
    columns = ([e.row for e in entries], [e.ts for e in entries], [e.value for e in entries])
    return pa.record_batch([pa.array(c, f.type) for c, f in zip(columns, ENTRY_SCHEMA, strict=True)],
                           schema=ENTRY_SCHEMA)
