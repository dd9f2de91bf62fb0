"""Draining: export queue entries in bounded batches, then delete exactly what was exported.

Entries move as Arrow batches (columns ``row``, ``ts``, ``value``: the entry row, its Accumulo timestamp and
its serialized value), never one Python object per entry: rows are parsed natively, the exporter translates
and writes a whole batch (``export_batch``), and the deletes are one batch of cells.

The order per batch is what makes a crash harmless (invariant 2): parse; export what parses (the exporter
writes every export it can translate and names those it cannot); dead-letter what could not be parsed,
decoded or translated (flushed before its original is deleted); only after the export returned, delete each
entry at its own timestamp. A crash anywhere leaves entries that
are exported again later (at least once), never entries deleted but not exported. A delete at the entry's
timestamp hides only the version that was read, so an entry re-added meanwhile (newer timestamp) survives.
(A re-add within the same server millisecond gets the same timestamp and is hidden too; the same row means the
same key and seq, i.e. the export that was just exported, so nothing is lost.)

Reading overlaps exporting: the next pages of the scan are fetched by a reader thread while the current batch
is translated and flushed on B (a bounded queue, so memory stays within a few batches). The deletes of a
batch are sent only after its export returned, so a batch's entries are never deleted before their export
returned, which is the only ordering the invariant needs. The deletes need not be durable before the
next export starts, so the drain waits for them at most once a second (``DELETE_FLUSH_SECONDS``) and at the
end of the run: a delete lost in a crash only means that entry is exported again. For the same reason the
deletes may skip the tablet server's write-ahead log (``writer_options={"durability": "none"}``); dead letters
never do. The default keeps the table's durability: without the log, every delete since the last minor
compaction can come back in a tablet server crash, and in delete mode a late re-export widens the compaction
hazard (docs/design.md: The compaction hazard); under tombstones it can undo what the tombstone purge proved
(DESIGN.md: "The drain's deletes keep A's write-ahead log"), so never skip the log where tombstones are purged.

Reading (:func:`read_bucket_batches`, read ahead by :func:`~connector.queue.batches.prefetched`) and processing
(:class:`EntryProcessor`) are separate so that the Spark sink can feed the processor with batches read by its
data source. A batch drain's tasks keep their running counters in progress rows (:mod:`connector.queue.progress`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import BatchWriter, Connection, Mutation
from connector.accumulo.errors import SendDeadlinePassedError
from connector.accumulo.writer import EXPORT_HOLD_SECONDS, send_deadline
from connector.counters import FieldCounters
from connector.export.adapter import batch_exporter
from connector.export.core import CountsCells, EntryFailure, Exporter

from .batches import cut_by_bytes, data_bytes, prefetched
from .codec import EntryCodec
from .config import QueueConfig
from .errors import EntryTranslationError, MalformedEntryError
from .layout import (
    DEAD_FAMILY,
    DEAD_REASON,
    DEAD_TS,
    DEAD_VALUE,
    PROGRESS_FAMILY,
    PROGRESS_QUALIFIER,
)
from .native_rows import entry_deletes
from .reader import QueueEntry, entries_to_batches, read_bucket_batches, read_bucket_head
from .settings import DrainSettings

__all__ = ["DrainStats", "EntryProcessor", "QueueEntry", "drain_bucket", "drain_buckets", "drain_queue"]

log = logging.getLogger(__name__)

#: the settings of a drain given none
DEFAULTS = DrainSettings()
#: how long the deletes of exported batches may stay unflushed while the next batches are exported
DELETE_FLUSH_SECONDS = 1.0


@dataclass
class DrainStats(FieldCounters):
    """What a drain did. ``entries``/``bytes``: read (their data bytes, which ``buffer_bytes`` bounds: an entry's
    row and value, a written cell's fields); ``exported``: handed to the
    exporter; ``deleted``: removed from the queue; ``dead_lettered``: moved to the dead-letter range;
    ``batches``: calls to the exporter; ``cells``: cells the exporter wrote on the destination (when it says:
    :class:`~connector.export.AccumuloExporter` does); ``abandoned``: entries left in the queue, to be read again,
    because their batch was held longer than ``EXPORT_HOLD_SECONDS`` (before its export, before one of its writes was
    sent, or by the time the export returned); ``seconds``: wall time. Add them up with
    ``+`` or ``sum()``."""

    entries: int = 0
    exported: int = 0
    deleted: int = 0
    dead_lettered: int = 0
    batches: int = 0
    bytes: int = 0
    seconds: float = 0.0
    cells: int = 0  # last: positional construction keeps its meaning
    abandoned: int = 0


class EntryProcessor:
    """Exports queue entries through ``exporter`` and deletes them from the source table afterwards.

    Entries are grouped into batches of at most ``settings.buffer_bytes`` (their row and value bytes, see
    :func:`~connector.queue.batches.data_bytes`; an entry larger than that goes alone). Malformed entries, and
    entries whose exports cannot be decoded or translated, are moved to the queue's dead-letter range with the
    reason and counted; the rest of their batch is exported as usual. With ``settings.fail_fast`` the first one
    raises ``MalformedEntryError`` or ``EntryTranslationError`` instead, and nothing of its batch is deleted. Any
    other exception from the exporter propagates, and nothing of that batch is deleted. ``writer_options`` go to
    the BatchWriter used for deletes and progress rows (a ``durability`` of ``"none"`` there skips A's
    write-ahead log: see the module's description) and, without that durability, to the one for dead letters;
    with ``progress_row`` the running counters are kept there after each batch.

    The exporter gets whole Arrow batches (``Exporter.export_batch``); one written with ``export`` only is
    adapted (:func:`connector.export.adapter.batch_exporter`: ``SequencedExport`` lists, the slow path).
    """

    def __init__(self, source_conn: Connection, config: QueueConfig, exporter: Exporter,
                 settings: DrainSettings = DEFAULTS, *, writer_options: Mapping[str, Any] | None = None,
                 progress_row: bytes | None = None) -> None:
        self.connection = source_conn
        self.config = config
        self.exporter = batch_exporter(exporter)  # raises TypeError for an object without export()
        self.buffer_bytes = settings.buffer_bytes
        self.fail_fast = settings.fail_fast
        self._codec = EntryCodec(config)
        # deletes and progress rows: as given (no durability given: the table's)
        self._writer_options = dict(writer_options or {})
        # dead letters: always the table's durability, durable before their original's delete
        self._durable_options = {k: v for k, v in self._writer_options.items() if k != "durability"}
        self.progress_row = progress_row
        self._deletes_flushed = time.monotonic()
        self._read_times = _ReadTimes()

    def stamped(self, pages: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``pages`` as read from the queue, each stamped with the moment it was read (wrap the scan itself, before
        any read-ahead), so a batch's hold counts from its read (see :meth:`process_batches`)."""
        return self._read_times.stamp(pages)

    def process(self, entries: Iterable[QueueEntry]) -> DrainStats:
        """Export and then delete ``entries`` (consumed lazily, batch by batch); returns what was done."""
        return self.process_batches(entries_to_batches(entries))

    def process_batches(self, batches: Iterable[pa.RecordBatch]) -> DrainStats:
        """Export and then delete the entries of ``batches`` (columns ``row``, ``ts``, ``value``, as
        :func:`read_bucket_batches` gives them), re-cut into batches of at most ``buffer_bytes``. A batch held
        longer than ``EXPORT_HOLD_SECONDS`` since it was read (pages from :meth:`stamped`; else since it got here)
        is not exported, the export's writers send none of it after that (``send_deadline``: the export fails with
        ``SendDeadlinePassedError``), and one whose export returned later than that is not deleted: its entries stay
        in the queue, to be read again (the bound a tombstone purge relies on: :mod:`connector.snapshot.purge`)."""
        started = time.monotonic()
        stats = DrainStats()
        writer: BatchWriter | None = None
        try:
            for batch in cut_by_bytes(batches, self.buffer_bytes):
                read_at = self._read_times.take(batch.num_rows) or time.monotonic()
                if writer is None:
                    writer = self.connection.batch_writer(self.config.table, **self._writer_options)
                self._process_batch(batch, writer, stats, read_at)
        except BaseException:
            if writer is not None:
                # what the writer holds are deletes of batches whose exports returned: worth keeping
                with contextlib.suppress(Exception):
                    writer.flush()
                writer.abort()
            raise
        else:
            if writer is not None:
                writer.close()
        finally:
            stats.seconds = time.monotonic() - started
        return stats

    def _process_batch(self, batch: pa.RecordBatch, writer: BatchWriter, stats: DrainStats, read_at: float) -> None:
        if self._held_too_long(batch, stats, read_at, "before its export"):
            stats.entries += batch.num_rows  # read all the same
            stats.bytes += data_bytes(batch)
            return
        rows = batch.column("row")
        parsed = self.config.layout.parse_rows(rows)
        malformed = parsed.column("error").is_valid()
        if self.fail_fast and pc.any(malformed).as_py():
            first = pc.index(malformed, True).as_py()
            raise MalformedEntryError(rows[first].as_py(), parsed.column("error")[first].as_py())
        stats.entries += batch.num_rows
        stats.bytes += data_bytes(batch)

        good = np.flatnonzero(~np.asarray(malformed.to_numpy(zero_copy_only=False), dtype=bool))
        exports = pa.record_batch([parsed.column("key").take(good), batch.column("value").take(good),
                                   parsed.column("seq").take(good)], names=["key", "value", "seq"])
        try:
            # no writer of the export sends (or replays after a reconnect) any of it after the hold
            with send_deadline(read_at + EXPORT_HOLD_SECONDS):
                failures = self._export(exports) if exports.num_rows else []
        except SendDeadlinePassedError as exc:
            self._abandon(batch, stats, read_at, f"before its export was sent ({exc})")
            return
        if failures and self.fail_fast:
            self._stop_at(failures[0], good, batch, exports)
        exported = exports.num_rows - len(failures)
        if exports.num_rows:
            stats.exported += exported
            stats.batches += 1
            if isinstance(self.exporter, CountsCells):
                stats.cells += self.exporter.cells_written_by_last_call()

        rejected = [(int(i), parsed.column("error")[int(i)].as_py()) for i in np.flatnonzero(~np.isin(
            np.arange(batch.num_rows), good))]
        rejected += [(int(good[f.entry]), _dead_reason(f)) for f in failures]
        if rejected:
            # A dead letter is a write of a read export: held to the same bound as its export (one written later
            # could bring back an entry another drain exported and deleted meanwhile, after a purge's grace).
            if self._held_too_long(batch, stats, read_at, "before its dead letters"):
                return
            try:
                # its own writer, with the table's durability: the dead letter is durable before its original's
                # delete
                with send_deadline(read_at + EXPORT_HOLD_SECONDS), \
                        self.connection.batch_writer(self.config.table, **self._durable_options) as dead:
                    for i, reason in rejected:
                        row, ts = rows[i].as_py(), batch.column("ts")[i].as_py()
                        dead.add_mutation(self._dead_letter(row, ts, batch.column("value")[i].as_py() or b"", reason))
                        log.warning("queue %s: dead-lettering %r: %s", self.config.qid, row, reason)
            except SendDeadlinePassedError as exc:
                self._abandon(batch, stats, read_at, f"before its dead letters were sent ({exc})")
                return
            stats.dead_lettered += len(rejected)

        if self._held_too_long(batch, stats, read_at, "when its export returned"):
            return
        # every entry of the batch is now exported or dead-lettered: delete each at its own timestamp
        writer.add_cells(entry_deletes(rows, batch.column("ts")))
        stats.deleted += batch.num_rows
        if self.progress_row is not None:  # rides with the deletes: live progress costs no round trip
            writer.add_mutation(Mutation(self.progress_row).put(PROGRESS_FAMILY, PROGRESS_QUALIFIER,
                                                                json.dumps(asdict(stats)).encode()))
        # The deletes are on their way (the writer sends full chunks at once); waiting for them to be durable
        # need not hold up the next export: a delete lost in a crash only means that entry is exported again.
        # So wait at most every DELETE_FLUSH_SECONDS, and when the run ends.
        now = time.monotonic()
        if now - self._deletes_flushed >= DELETE_FLUSH_SECONDS:
            writer.flush()
            self._deletes_flushed = now

    def _held_too_long(self, batch: pa.RecordBatch, stats: DrainStats, read_at: float, when: str) -> bool:
        """True, having counted and logged it, when ``batch`` was read more than ``EXPORT_HOLD_SECONDS`` ago:
        then nothing more is done with it and its entries stay, to be read again."""
        if time.monotonic() - read_at <= EXPORT_HOLD_SECONDS:
            return False
        self._abandon(batch, stats, read_at, when)
        return True

    def _abandon(self, batch: pa.RecordBatch, stats: DrainStats, read_at: float, when: str) -> None:
        """Count and log ``batch`` as held too long: its entries stay in the queue, to be read again."""
        stats.abandoned += batch.num_rows
        log.warning("queue %s: a batch of %d entries was held %.0f s %s, over the bound of %.0f s: left in the "
                    "queue to be read again", self.config.qid, batch.num_rows, time.monotonic() - read_at, when,
                    EXPORT_HOLD_SECONDS)

    def _export(self, exports: pa.RecordBatch) -> list[EntryFailure]:
        return list(self.exporter.export_batch(exports, key_serializer=self.config.key_serializer,
                                               value_serializer=self.config.value_serializer))

    def _stop_at(self, failure: EntryFailure, good: np.ndarray, batch: pa.RecordBatch,
                 exports: pa.RecordBatch) -> None:
        """Fail-fast: raise for the first entry that could not be exported (nothing of the batch is deleted)."""
        row = batch.column("row")[int(good[failure.entry])].as_py()
        if failure.kind == "undecodable":
            raise MalformedEntryError(row, failure.reason)
        key_bytes, seq = exports.column("key")[failure.entry].as_py(), exports.column("seq")[failure.entry].as_py()
        try:
            key: Any = self._codec.key_serializer.loads(key_bytes)
        except Exception:  # noqa: BLE001 - the message shows the raw bytes then
            key = key_bytes
        raise EntryTranslationError(row, key, seq, failure.reason)

    def _dead_letter(self, row: bytes, ts: int, value: bytes, reason: str) -> Mutation:
        return (Mutation(self.config.layout.dead_letter_row(row))
                .put(DEAD_FAMILY, DEAD_REASON, reason.encode("utf-8"))
                .put(DEAD_FAMILY, DEAD_VALUE, value)
                .put(DEAD_FAMILY, DEAD_TS, str(ts).encode("ascii")))


class _ReadTimes:
    """When the pages of a scan were read, so that a batch cut from them knows its oldest read: the pages' row
    counts and read moments, in order, consumed row by row as batches are cut (stamped by the reader thread,
    consumed by the processor: a deque's appends and pops are thread-safe)."""

    def __init__(self) -> None:
        self._pages: deque[list[float]] = deque()  # [rows not yet consumed, monotonic read time]

    def stamp(self, pages: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for page in pages:
            self._pages.append([page.num_rows, time.monotonic()])
            yield page

    def take(self, rows: int) -> float | None:
        """The read moment of the oldest of the next ``rows`` rows (None: they were not stamped)."""
        oldest: float | None = None
        while self._pages and (rows > 0 or self._pages[0][0] == 0):
            page = self._pages[0]
            used = min(rows, int(page[0]))
            if used:
                oldest = page[1] if oldest is None else min(oldest, page[1])
            page[0] -= used
            rows -= used
            if page[0] == 0:
                self._pages.popleft()
        return oldest


def _dead_reason(failure: EntryFailure) -> str:
    return failure.reason if failure.kind == "undecodable" else f"untranslatable: {failure.reason}"


def drain_bucket(source_conn: Connection, config: QueueConfig, bucket: int, exporter: Exporter,
                 settings: DrainSettings = DEFAULTS, *, batch_size: int = 1000,
                 writer_options: Mapping[str, Any] | None = None) -> DrainStats:
    """Export and delete what one bucket holds now (one scan of it); returns what was done."""
    processor = EntryProcessor(source_conn, config, exporter, settings, writer_options=writer_options)
    return processor.process_batches(prefetched(processor.stamped(read_bucket_batches(source_conn, config, bucket,
                                                                                      batch_size))))


def drain_buckets(source_conn: Connection, config: QueueConfig, buckets: Iterable[int], exporter: Exporter,
                  settings: DrainSettings = DEFAULTS, *, batch_size: int = 1000,
                  writer_options: Mapping[str, Any] | None = None, progress_row: bytes | None = None,
                  limits: Mapping[int, tuple[int | None, int | None]] | None = None) -> DrainStats:
    """Export and delete what a group of buckets holds now (one scan of each, in turn); returns the totals.
    With ``progress_row``, the running totals are kept there after each batch (see :func:`read_progress`).
    ``limits`` (bucket -> (max entries, max bytes)) drains only that much of a bucket's head."""
    processor = EntryProcessor(source_conn, config, exporter, settings, writer_options=writer_options,
                               progress_row=progress_row)
    limits = limits or {}
    pages = (page for b in buckets
             for page in read_bucket_head(source_conn, config, b, *limits.get(b, (None, None)), batch_size))
    return processor.process_batches(prefetched(processor.stamped(pages)))


def drain_queue(source_conn: Connection, config: QueueConfig, exporter: Exporter,
                settings: DrainSettings = DEFAULTS, *, batch_size: int = 1000,
                writer_options: Mapping[str, Any] | None = None,
                progress: Callable[[int, DrainStats], None] | None = None,
                max_passes: int | None = None) -> DrainStats:
    """Drain every bucket in turn, pass after pass, until a pass finds nothing (entries added meanwhile are
    picked up by the next pass), or after ``max_passes`` passes. ``progress(bucket, stats)`` is called after
    each bucket. Returns the totals."""
    processor = EntryProcessor(source_conn, config, exporter, settings, writer_options=writer_options)
    total = DrainStats()
    passes = 0
    while True:
        found = 0
        for bucket in range(config.num_buckets):
            stats = processor.process_batches(prefetched(processor.stamped(read_bucket_batches(
                source_conn, config, bucket, batch_size))))
            total += stats
            found += stats.entries
            if progress is not None:
                progress(bucket, stats)
        passes += 1
        if found == 0 or (max_passes is not None and passes >= max_passes):
            return total
