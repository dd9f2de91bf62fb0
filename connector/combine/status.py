"""What waits in a combine queue: queued updates (and the keys they are for) and outbox cells, per bucket."""

from __future__ import annotations

from dataclasses import dataclass

from connector.accumulo import Connection
from connector.queue.status import QueueLag, bucket_ages, count_cells

from .config import CombineConfig
from .layout import OUTBOX_FAMILY, UPDATE_FAMILY


@dataclass(frozen=True)
class CombineBucketStatus:
    bucket: int
    updates: int = 0
    keys: int = 0
    outbox: int = 0


@dataclass(frozen=True)
class CombineStatus:
    """A snapshot: ``buckets`` lists the buckets with queued updates or outbox cells, in order."""

    cid: str
    num_buckets: int
    buckets: tuple[CombineBucketStatus, ...] = ()

    @property
    def updates(self) -> int:
        return sum(b.updates for b in self.buckets)

    @property
    def keys(self) -> int:
        return sum(b.keys for b in self.buckets)

    @property
    def outbox(self) -> int:
        return sum(b.outbox for b in self.buckets)

    @property
    def empty(self) -> bool:
        return not self.buckets

    def pending_buckets(self) -> list[int]:
        """The buckets a pass has work in: queued updates or outbox cells to relay."""
        return [b.bucket for b in self.buckets]


def combine_status(conn: Connection, config: CombineConfig, batch_size: int = 10_000) -> CombineStatus:
    """One scan of the queue's update and outbox cells (values and versions are not read)."""
    layout = config.layout
    counts: dict[int, list[int]] = {}  # bucket -> [updates, keys, outbox]
    last_row = b""
    for cell in conn.scan(config.table, layout.queue_range(), columns=[OUTBOX_FAMILY, UPDATE_FAMILY],
                          batch_size=batch_size):
        bucket = layout.buckets.bucket_range_of(cell.row)
        if bucket is None:
            continue
        c = counts.setdefault(bucket, [0, 0, 0])
        if cell.cf == UPDATE_FAMILY:
            c[0] += 1
            if cell.row != last_row:
                c[1] += 1
                last_row = cell.row
        else:
            c[2] += 1
    return CombineStatus(config.cid, config.num_buckets,
                         tuple(CombineBucketStatus(b, u, k, o) for b, (u, k, o) in sorted(counts.items())))


def combine_lag(conn: Connection, config: CombineConfig, batch_size: int = 10_000) -> QueueLag:
    """Queued updates and the age of the oldest one per bucket (an update's timestamp is its producer's
    clock), from one keys-only scan of the update cells."""
    return bucket_ages(conn, config.table, config.layout.buckets, [UPDATE_FAMILY], batch_size)


def count_updates(conn: Connection, config: CombineConfig, limit: int | None = None) -> int:
    """How many updates wait in the combine queue, reading keys only; with ``limit``, counting stops there."""
    return count_cells(conn, config.table, config.layout.queue_range(), [UPDATE_FAMILY], limit=limit)
