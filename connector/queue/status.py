"""What is waiting in a queue: entries, bytes and the oldest sequence number, per bucket and in total."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Connection, IteratorSetting

from .config import QueueConfig
from .layout import DEAD_FAMILY, DEAD_REASON, ENTRY_FAMILY, ENTRY_QUALIFIER, QueueLayout
from .marks import read_marks

#: a server-side iterator that drops values: counting entries then moves keys only
KEYS_ONLY = IteratorSetting(50, "keysOnly", "org.apache.accumulo.core.iterators.SortedKeyIterator")


@dataclass(frozen=True)
class BucketStatus:
    """One bucket: ``entries`` waiting, their ``bytes`` (row + value), the smallest ``oldest_seq``, and
    ``oldest_written_ms``: when the oldest entry was written (its Accumulo timestamp, the tablet server's
    clock, milliseconds since the epoch), which gives the bucket's lag."""

    bucket: int
    entries: int = 0
    bytes: int = 0
    oldest_seq: int | None = None
    oldest_written_ms: int | None = None

    def lag_seconds(self, now: float | None = None) -> float | None:
        """How long the oldest entry has waited (``now``: seconds since the epoch, default the clock)."""
        if self.oldest_written_ms is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.oldest_written_ms / 1000)


@dataclass(frozen=True)
class QueueStatus:
    """A snapshot of a queue. ``buckets`` lists the non-empty buckets in order; ``malformed`` counts entry
    rows that do not parse (they stay until a drain dead-letters them); ``dead_letters`` counts dead-letter
    rows."""

    qid: str
    num_buckets: int
    buckets: tuple[BucketStatus, ...] = ()
    malformed: int = 0
    dead_letters: int = 0
    #: buckets whose mark is set (entries added since a streaming drain last settled them)
    marked: tuple[int, ...] = ()
    _by_bucket: dict[int, BucketStatus] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._by_bucket.update((b.bucket, b) for b in self.buckets)

    def bucket(self, bucket: int) -> BucketStatus:
        """The status of one bucket (empty when nothing waits in it)."""
        return self._by_bucket.get(bucket, BucketStatus(bucket))

    @property
    def entries(self) -> int:
        return sum(b.entries for b in self.buckets)

    @property
    def bytes(self) -> int:
        return sum(b.bytes for b in self.buckets)

    @property
    def oldest_seq(self) -> int | None:
        seqs = [b.oldest_seq for b in self.buckets if b.oldest_seq is not None]
        return min(seqs) if seqs else None

    def lag_seconds(self, now: float | None = None) -> float | None:
        """How long the oldest entry of the queue has waited (None when empty)."""
        lags = [lag for b in self.buckets if (lag := b.lag_seconds(now)) is not None]
        return max(lags) if lags else None

    @property
    def empty(self) -> bool:
        """True when no entry (well-formed or not) waits in the queue."""
        return not self.buckets and not self.malformed


def queue_status(conn: Connection, config: QueueConfig, batch_size: int = 10_000) -> QueueStatus:
    """Scan the queue once (and its dead letters once) and summarize what waits in it. Pages are decoded and
    rows parsed natively and summed with Arrow: no Python object per entry."""
    layout = config.layout
    pages: list[pa.Table] = []
    malformed = 0
    for page in conn.scan_batches(config.table, layout.queue_range(), columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)],
                                  batch_size=batch_size):
        parsed = layout.parse_rows(page.column("row"))
        ok = parsed.column("error").is_null()
        malformed += page.num_rows - pc.sum(ok.cast(pa.int64())).as_py()
        size = pc.add(pc.binary_length(page.column("row")), pc.binary_length(page.column("value")))
        pages.append(pa.table({"bucket": parsed.column("bucket"), "size": size.cast(pa.int64()),
                               "seq": parsed.column("seq"), "ts": page.column("ts")}).filter(ok))
    buckets: tuple[BucketStatus, ...] = ()
    if pages:
        per_bucket = pa.concat_tables(pages).group_by("bucket").aggregate(
            [("bucket", "count"), ("size", "sum"), ("seq", "min"), ("ts", "min")]).sort_by("bucket")
        buckets = tuple(BucketStatus(*values) for values in zip(
            *(per_bucket.column(c).to_pylist() for c in ("bucket", "bucket_count", "size_sum", "seq_min", "ts_min")),
            strict=True))
    # one reason cell per dead-letter row: counting those avoids reading the (maybe large) values
    dead = sum(1 for _ in conn.scan(config.table, layout.dead_letter_range(), columns=[(DEAD_FAMILY, DEAD_REASON)],
                                    batch_size=batch_size))
    marked = tuple(sorted(read_marks(conn, config)))
    return QueueStatus(layout.qid, layout.num_buckets, buckets, malformed, dead, marked)


def count_entries(conn: Connection, config: QueueConfig, batch_size: int = 10_000, limit: int | None = None) -> int:
    """How many entry rows wait in the queue (well-formed or not), reading keys only, page by page: cheaper
    than :func:`queue_status` for progress reports. With ``limit``, counting stops there ("at least
    ``limit``")."""
    return count_cells(conn, config.table, config.layout.queue_range(), [(ENTRY_FAMILY, ENTRY_QUALIFIER)],
                       batch_size, limit)


def count_cells(conn: Connection, table: str, rng: Any, columns: list[Any], batch_size: int = 10_000,
                limit: int | None = None) -> int:
    """How many cells of ``columns`` lie in ``rng`` of ``table`` (keys only, page by page); with ``limit``,
    counting stops there."""
    page_size = batch_size if limit is None else min(batch_size, limit + 1)
    pages = conn.scan_batches(table, rng, columns=columns, iterators=[KEYS_ONLY], batch_size=page_size)
    total = 0
    for page in pages:
        total += page.num_rows
        if limit is not None and total >= limit:
            return limit
    return total


@dataclass(frozen=True)
class QueueLag:
    """What waits in a queue and since when: ``entries`` in the bucket ranges (malformed ones too: a drain
    takes them), and per non-empty bucket the timestamp (ms since the epoch, as Accumulo stored it) of its
    oldest entry. ``scan_seconds``: what the scan that found this took."""

    entries: int
    oldest_ms: dict[int, int]
    scan_seconds: float = 0.0

    def lag_seconds(self, now: float | None = None) -> dict[int, float]:
        """bucket -> how long its oldest entry has waited (``now``: seconds since the epoch, default the
        clock; a timestamp ahead of it, from a server or producer clock running ahead, counts as 0)."""
        now = time.time() if now is None else now
        return {b: max(0.0, now - ms / 1000) for b, ms in self.oldest_ms.items()}


def bucket_ages(conn: Connection, table: str, layout: QueueLayout, columns: list[Any],
                batch_size: int = 10_000) -> QueueLag:
    """One keys-only scan of the bucket ranges of ``layout`` (``columns`` of each row): how many cells and the
    oldest timestamp per bucket. The server drops the values; the bucket of each row is sliced out and the
    minimum taken with numpy, so no Python object per cell. Rows sort by key, not by age, so the oldest entry
    of a bucket can be anywhere in it: the whole range is read, keys only."""
    started = time.monotonic()
    start = len(layout.bucket_row(0)) - layout.hex_width
    oldest: dict[int, int] = {}
    entries = 0
    for page in conn.scan_batches(table, layout.queue_range(), columns=columns, iterators=[KEYS_ONLY],
                                  batch_size=batch_size):
        if not page.num_rows:
            continue
        # "<hex>:" of each row, as dictionary indices (Arrow's group_by is erratic under load: thread pools)
        names = pc.dictionary_encode(pc.binary_slice(page.column("row"), start, start + layout.hex_width + 1))
        index = names.indices.to_numpy()
        ts = page.column("ts").to_numpy()
        mins = np.full(len(names.dictionary), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(mins, index, ts)
        counts = np.bincount(index, minlength=len(names.dictionary))
        for name, ms, count in zip(names.dictionary.to_pylist(), mins.tolist(), counts.tolist(), strict=True):
            bucket = _bucket(name, layout)  # None: a row outside every bucket's range ("<qid>:~", other data)
            if bucket is not None:
                entries += count
                oldest[bucket] = min(ms, oldest.get(bucket, ms))
    return QueueLag(entries, oldest, time.monotonic() - started)


def _bucket(name: bytes, layout: QueueLayout) -> int | None:
    hex_part = name[:-1]
    if name[-1:] != b":" or len(hex_part) != layout.hex_width or not set(hex_part) <= _HEX:
        return None
    bucket = int(hex_part, 16)
    return bucket if bucket < layout.num_buckets else None


_HEX = frozenset(b"0123456789abcdef")


def queue_lag(conn: Connection, config: QueueConfig, batch_size: int = 10_000) -> QueueLag:
    """The queue's depth and the age of the oldest entry of each bucket, from one keys-only scan (see
    :func:`bucket_ages`; about the cost of :func:`count_entries` without its limit)."""
    return bucket_ages(conn, config.table, config.layout, [(ENTRY_FAMILY, ENTRY_QUALIFIER)], batch_size)
