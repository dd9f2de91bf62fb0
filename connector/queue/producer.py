"""Adding to an export queue: create its table, and write entries (one per export) to it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from connector.accumulo import BatchWriter, Connection, Mutation
from connector.export.core import SequencedExport

from .codec import EntryCodec
from .config import QueueConfig
from .layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from .marks import mark_mutations
from .status import QueueStatus, queue_status
from .stored_config import check_config, store_config

ExportItem = SequencedExport | tuple[Any, Any, int]


class ExportQueue:
    """The producer side of one export queue.

    ``add``/``add_all`` write through a BatchWriter the queue owns (opened on first use); entries are
    durable after ``flush()`` or ``close()``. Callers that must commit entries together with their own writes
    take ``mutation()`` and send it themselves. Entries carry the server's timestamp, which the drain uses to
    delete exactly the version it exported. Use it as a context manager to flush and close on exit.
    """

    def __init__(self, connection: Connection, config: QueueConfig,
                 writer_options: Mapping[str, Any] | None = None) -> None:
        self.connection = connection
        self.config = config
        self._codec = EntryCodec(config)
        self._writer_options = dict(writer_options or {})
        self._writer: BatchWriter | None = None
        self._checked = False  # against the stored configuration, before the first write
        self._unmarked: set[int] = set()  # buckets written to since their last mark

    def __repr__(self) -> str:
        return f"ExportQueue(table={self.config.table!r}, qid={self.config.qid!r})"

    def init(self) -> bool:
        """Create the table (versioning on) if it does not exist, store the queue's configuration (buckets,
        serializers) in its own rows, and add its split points. Safe to run again with the same configuration,
        and on a table that already holds other data; refused (``QueueConfigError``, nothing changed) when the
        queue was initialised with a different one. Returns True if this call stored the configuration."""
        self.connection.create_table(self.config.table, versioning=True, exist_ok=True)
        stored = store_config(self.connection, self.config)
        self.connection.add_splits(self.config.table, self.config.split_points())
        self._checked = True
        return stored

    def mutation(self, key: Any, value: Any, seq: int) -> Mutation:
        """The mutation adding one entry, for callers that send it with their own writes."""
        row, value_bytes = self._codec.encode(key, value, seq)
        # no timestamp: the server's time lets the drain delete this version and no later re-add
        return Mutation(row).put(ENTRY_FAMILY, ENTRY_QUALIFIER, value_bytes)

    def add(self, key: Any, value: Any, seq: int) -> None:
        """Queue one export (durable after ``flush()``)."""
        m = self.mutation(key, value, seq)
        self._writer_for().add_mutation(m)
        self._touched(m.row)

    def add_all(self, items: Iterable[ExportItem]) -> int:
        """Queue several exports, each a ``SequencedExport`` or a ``(key, value, seq)`` tuple; returns how many
        (durable after ``flush()``)."""
        writer = self._writer_for()
        count = 0
        for item in items:
            if isinstance(item, SequencedExport):
                m = self.mutation(item.key, item.value, item.seq)
            else:
                key, value, seq = item
                m = self.mutation(key, value, seq)
            writer.add_mutation(m)
            self._touched(m.row)
            count += 1
        return count

    def add_mutations(self, mutations: Iterable[Mutation]) -> None:
        """Queue entries made by ``mutation()`` (durable after ``flush()``): serialize everything first, then
        send, so that a value the serializer refuses stops the caller before anything was written."""
        writer = self._writer_for()
        for m in mutations:
            writer.add_mutation(m)
            self._touched(m.row)

    def mark(self, rows: Iterable[bytes]) -> None:
        """For callers that send ``mutation()``s with their own writes: after those are durable, mark the
        buckets of their entry ``rows`` so a streaming drain finds them without waiting for its sweep."""
        for row in rows:
            self._touched(row)
        self._write_marks()

    def flush(self) -> None:
        """Make everything added so far durable, then mark the buckets it went to (see
        :mod:`connector.queue.marks`): marks follow durable entries, so a drain that sees a mark finds them."""
        if self._writer is not None:
            self._writer.flush()
            self._write_marks()

    def close(self) -> None:
        """Flush and release the writer. The queue can be used again afterwards (a new writer is opened)."""
        self.flush()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def _touched(self, row: bytes) -> None:
        bucket = self.config.layout.bucket_range_of(row)
        if bucket is not None:
            self._unmarked.add(bucket)

    def _write_marks(self) -> None:
        if self._unmarked:
            self.connection.write(self.config.table, mark_mutations(self.config.layout, self._unmarked))
            self._unmarked.clear()

    def status(self) -> QueueStatus:
        """What waits in the queue now: entries, bytes and oldest seq per bucket, and the dead-letter count."""
        return queue_status(self.connection, self.config)

    def __enter__(self) -> ExportQueue:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
            return
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.abort()  # on error: drop what was not flushed; the block's exception propagates

    def _writer_for(self) -> BatchWriter:
        if not self._checked:
            # rows written with the wrong bucket count would land where no drain of this queue looks
            check_config(self.connection, self.config)
            self._checked = True
        if self._writer is None:
            self._writer = self.connection.batch_writer(self.config.table, **self._writer_options)
        return self._writer
