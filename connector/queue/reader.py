"""Reading queue entries as they are stored, without decoding them (decoding is the processor's job)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

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
