"""Draining: export queue entries in bounded batches, then delete exactly what was exported.

The order per batch is what makes a crash harmless (invariant 2): decode; ``exporter.export(batch)`` (if the
exporter names exports it cannot translate, set their entries aside and export the rest); dead-letter what
could not be decoded or translated (flushed before its original is deleted); only after that, delete each
entry at its own timestamp and flush, before the next batch is exported. A crash anywhere leaves entries that
are exported again later (at least once), never entries deleted but not exported. A delete at the entry's
timestamp hides only the version that was read, so an entry re-added meanwhile (newer timestamp) survives.
(A re-add within the same server millisecond gets the same timestamp and is hidden too; the same row means the
same key and seq, i.e. the export that was just exported, so nothing is lost.)

Reading (:func:`read_bucket`) and processing (:class:`EntryProcessor`) are separate so that the Spark sink
can feed the processor with entries read by its data source.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from connector.accumulo import BatchWriter, Connection, Mutation, Range
from connector.export.core import BatchTranslationError, Exporter, SequencedExport

from .codec import EntryCodec
from .config import QueueConfig
from .errors import EntryTranslationError, MalformedEntryError
from .layout import (
    DEAD_FAMILY,
    DEAD_REASON,
    DEAD_TS,
    DEAD_VALUE,
    ENTRY_FAMILY,
    ENTRY_QUALIFIER,
    PROGRESS_FAMILY,
    PROGRESS_QUALIFIER,
)
from .reader import QueueEntry, read_bucket

__all__ = ["DEFAULT_BUFFER_BYTES", "DrainStats", "EntryProcessor", "QueueEntry", "drain_bucket", "drain_buckets",
           "drain_queue", "read_bucket", "read_progress", "clear_progress"]

log = logging.getLogger(__name__)

DEFAULT_BUFFER_BYTES = 1 << 20


@dataclass
class DrainStats:
    """What a drain did. ``entries``/``bytes``: read (row + value bytes); ``exported``: handed to the
    exporter; ``deleted``: removed from the queue; ``dead_lettered``: moved to the dead-letter range;
    ``batches``: calls to ``exporter.export``; ``seconds``: wall time. Add them up with ``+`` or ``sum()``."""

    entries: int = 0
    exported: int = 0
    deleted: int = 0
    dead_lettered: int = 0
    batches: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def __add__(self, other: DrainStats) -> DrainStats:
        if not isinstance(other, DrainStats):
            return NotImplemented
        return DrainStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __radd__(self, other: object) -> DrainStats:
        if other == 0:  # lets sum() start from its default 0
            return self
        return NotImplemented


class EntryProcessor:
    """Exports queue entries through ``exporter`` and deletes them from the source table afterwards.

    Entries are grouped into batches of at most ``buffer_bytes`` (row + value bytes; an entry larger than
    that goes alone). Malformed entries, and entries whose exports the exporter cannot translate
    (``BatchTranslationError``), are moved to the queue's dead-letter range with the reason and counted; the
    rest of their batch is exported as usual. With ``fail_fast=True`` the first one raises
    ``MalformedEntryError`` or ``EntryTranslationError`` instead, and nothing of its batch is exported or
    deleted. Any other exception from the exporter propagates, and nothing of that batch is deleted.
    ``writer_options`` go to the BatchWriter used for deletes and dead letters.
    """

    def __init__(self, source_conn: Connection, config: QueueConfig, exporter: Exporter, *,
                 buffer_bytes: int = DEFAULT_BUFFER_BYTES, fail_fast: bool = False,
                 writer_options: Mapping[str, Any] | None = None, progress_row: bytes | None = None) -> None:
        if not isinstance(buffer_bytes, int) or buffer_bytes < 1:
            raise ValueError(f"buffer_bytes must be an int >= 1, got {buffer_bytes!r}")
        if not callable(getattr(exporter, "export", None)):
            raise TypeError(f"exporter must have an export(batch) method, got {type(exporter).__name__}")
        self.connection = source_conn
        self.config = config
        self.exporter = exporter
        self.buffer_bytes = buffer_bytes
        self.fail_fast = fail_fast
        self._codec = EntryCodec(config)
        self._writer_options = dict(writer_options or {})
        self.progress_row = progress_row

    def process(self, entries: Iterable[QueueEntry]) -> DrainStats:
        """Export and then delete ``entries`` (consumed lazily, batch by batch); returns what was done."""
        started = time.monotonic()
        stats = DrainStats()
        writer: BatchWriter | None = None
        try:
            for batch in self._batches(entries):
                if writer is None:
                    writer = self.connection.batch_writer(self.config.table, **self._writer_options)
                self._process_batch(batch, writer, stats)
        except BaseException as exc:
            if writer is not None:
                writer.__exit__(type(exc), exc, exc.__traceback__)  # keeps this exception, drops unsent
            raise
        else:
            if writer is not None:
                writer.close()
        finally:
            stats.seconds = time.monotonic() - started
        return stats

    def _batches(self, entries: Iterable[QueueEntry]) -> Iterator[list[QueueEntry]]:
        batch: list[QueueEntry] = []
        size = 0
        for entry in entries:
            if batch and size + entry.size > self.buffer_bytes:
                yield batch
                batch, size = [], 0
            batch.append(entry)
            size += entry.size
        if batch:
            yield batch

    def _process_batch(self, batch: list[QueueEntry], writer: BatchWriter, stats: DrainStats) -> None:
        exports: list[SequencedExport] = []
        exported_entries: list[QueueEntry] = []
        rejected: list[tuple[QueueEntry, str]] = []  # to dead-letter, with the reason
        for entry in batch:
            try:
                exports.append(self._codec.decode(entry.row, entry.value))
                exported_entries.append(entry)
            except MalformedEntryError as exc:
                if self.fail_fast:
                    raise
                rejected.append((entry, exc.reason))
        stats.entries += len(batch)
        stats.bytes += sum(e.size for e in batch)

        if exports:
            try:
                self.exporter.export(exports)
            except BatchTranslationError as exc:
                # the entries the translator rejects are theirs to blame, not the batch's: set them aside
                failed = self._untranslatable(exc, exports, exported_entries)
                rejected += failed
                keep = [i for i in range(len(exports)) if i not in exc.failures]
                exports = [exports[i] for i in keep]
                exported_entries = [exported_entries[i] for i in keep]
                if exports:
                    self.exporter.export(exports)
            if exports:
                stats.exported += len(exports)
                stats.batches += 1

        if rejected:
            for entry, reason in rejected:
                writer.add_mutation(self._dead_letter(entry, reason))
                log.warning("queue %s: dead-lettering %r: %s", self.config.qid, entry.row, reason)
            writer.flush()  # the dead letter must be durable before its original is deleted
            stats.dead_lettered += len(rejected)

        done = exported_entries + [entry for entry, _ in rejected]
        for entry in done:
            # at the entry's own timestamp: hides the version we read, not a newer re-add of the same row
            writer.add_mutation(Mutation(entry.row).delete(ENTRY_FAMILY, ENTRY_QUALIFIER, timestamp=entry.ts))
        stats.deleted += len(done)
        if self.progress_row is not None:  # rides on the flush below: live progress costs no round trip
            writer.add_mutation(Mutation(self.progress_row).put(PROGRESS_FAMILY, PROGRESS_QUALIFIER,
                                                                json.dumps(asdict(stats)).encode()))
        writer.flush()  # before the next batch is exported

    def _untranslatable(self, exc: BatchTranslationError, exports: list[SequencedExport],
                        entries: list[QueueEntry]) -> list[tuple[QueueEntry, str]]:
        """The entries whose exports ``exc`` names, with their reasons; with fail-fast, stop at the first."""
        if self.fail_fast:
            first = min(exc.failures)
            export = exports[first]
            raise EntryTranslationError(entries[first].row, export.key, export.seq, exc.failures[first]) from None
        return [(entries[i], f"untranslatable: {reason}") for i, reason in sorted(exc.failures.items())]

    def _dead_letter(self, entry: QueueEntry, reason: str) -> Mutation:
        return (Mutation(self.config.layout.dead_letter_row(entry.row))
                .put(DEAD_FAMILY, DEAD_REASON, reason.encode("utf-8"))
                .put(DEAD_FAMILY, DEAD_VALUE, entry.value)
                .put(DEAD_FAMILY, DEAD_TS, str(entry.ts).encode("ascii")))


def drain_bucket(source_conn: Connection, config: QueueConfig, bucket: int, exporter: Exporter, *,
                 buffer_bytes: int = DEFAULT_BUFFER_BYTES, fail_fast: bool = False, batch_size: int = 1000,
                 writer_options: Mapping[str, Any] | None = None) -> DrainStats:
    """Export and delete what one bucket holds now (one scan of it); returns what was done."""
    processor = EntryProcessor(source_conn, config, exporter, buffer_bytes=buffer_bytes, fail_fast=fail_fast,
                               writer_options=writer_options)
    return processor.process(read_bucket(source_conn, config, bucket, batch_size))


def drain_buckets(source_conn: Connection, config: QueueConfig, buckets: Iterable[int], exporter: Exporter, *,
                  buffer_bytes: int = DEFAULT_BUFFER_BYTES, fail_fast: bool = False, batch_size: int = 1000,
                  writer_options: Mapping[str, Any] | None = None, progress_row: bytes | None = None) -> DrainStats:
    """Export and delete what a group of buckets holds now (one scan of each, in turn); returns the totals.
    With ``progress_row``, the running totals are kept there after each batch (see :func:`read_progress`)."""
    processor = EntryProcessor(source_conn, config, exporter, buffer_bytes=buffer_bytes, fail_fast=fail_fast,
                               writer_options=writer_options, progress_row=progress_row)
    return processor.process(entry for b in buckets for entry in read_bucket(source_conn, config, b, batch_size))


def read_progress(conn: Connection, config: QueueConfig, run_id: str) -> DrainStats:
    """The running totals the tasks of drain run ``run_id`` have kept so far (summed over its tasks)."""
    total = DrainStats()
    names = {f.name for f in fields(DrainStats)}
    for cell in conn.scan(config.table, Range.prefix(config.layout.progress_prefix(run_id))):
        total += DrainStats(**{k: v for k, v in json.loads(cell.value).items() if k in names})
    return total


def clear_progress(conn: Connection, config: QueueConfig, run_id: str) -> None:
    """Remove the progress rows of drain run ``run_id``."""
    rows = [cell.row for cell in conn.scan(config.table, Range.prefix(config.layout.progress_prefix(run_id)))]
    if rows:
        conn.write(config.table, [Mutation(row).delete(PROGRESS_FAMILY, PROGRESS_QUALIFIER) for row in rows])


def drain_queue(source_conn: Connection, config: QueueConfig, exporter: Exporter, *,
                buffer_bytes: int = DEFAULT_BUFFER_BYTES, fail_fast: bool = False, batch_size: int = 1000,
                writer_options: Mapping[str, Any] | None = None,
                progress: Callable[[int, DrainStats], None] | None = None,
                max_passes: int | None = None) -> DrainStats:
    """Drain every bucket in turn, pass after pass, until a pass finds nothing (entries added meanwhile are
    picked up by the next pass), or after ``max_passes`` passes. ``progress(bucket, stats)`` is called after
    each bucket. Returns the totals."""
    processor = EntryProcessor(source_conn, config, exporter, buffer_bytes=buffer_bytes, fail_fast=fail_fast,
                               writer_options=writer_options)
    total = DrainStats()
    passes = 0
    while True:
        found = 0
        for bucket in range(config.num_buckets):
            stats = processor.process(read_bucket(source_conn, config, bucket, batch_size))
            total += stats
            found += stats.entries
            if progress is not None:
                progress(bucket, stats)
        passes += 1
        if found == 0 or (max_passes is not None and passes >= max_passes):
            return total
