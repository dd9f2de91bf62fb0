"""The bootstrap's bulk path: what a range of A implies, as sorted RFiles bulk-loaded into the destination with
every cell's timestamp kept (``Connection.bulk_import``: the gateway writes the files and loads them with
``importDirectory(dir).to(table).tableTime(false)``).

A range's cells are sorted in Accumulo's Key order a file's worth at a time (at most ``file_cells`` each: memory
stays bounded) and cut at the destination's split points, so each file falls in one tablet of it.

**Nothing is loaded twice after a kill, and nothing counts as loaded that is not known to be.** A range's
staging directory goes through three records (:meth:`connector.snapshot.state.BootstrapState.mark_bulk`, each
conditional on the bootstrap's lease, so the ``loading`` one is also the lease check right before the load):

- ``writing``: the directory exists and its files are being written; it was never loaded.
- ``loading``: every file is closed, and the load is asked for next; it may or may not have happened.
- ``loaded``: the load returned.

Only this module removes a staging directory: a ``writing`` one when its range stops or is written again, a
``loaded`` one right after that record, and a ``loading`` one never (whatever stops the bootstrap there, its
files stay for the rerun). So a range's load is known to have happened when it is recorded ``loaded``, or when
it is recorded ``loading`` and the gateway shows its directory with no file left: the only thing that takes a
file out of a closed directory is Accumulo's bulk import, which moves the files into the table and finishes
loading them (a load begun by a gateway that died goes on in Accumulo's manager). A rerun that finds a
``loading`` directory with files left loads them. Anything else leaves the load unknown, and the bootstrap stops
with one line naming the bulk id and marks nothing done: a gateway that cannot be reached (after the
connection's retries), one that has no such directory (``BulkImportNotFoundError``: a gateway with another
``gateway.bulk.dir``, or the directory removed by hand), or one that is not ours.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import (
    UPDATE_SCHEMA,
    AccumuloError,
    BulkImport,
    BulkImportNotFoundError,
    Connection,
    ConnectionLostError,
    sort_cells,
)
from connector.export import AccumuloExporter
from connector.queue import QueueConfig

from .errors import BootstrapError
from .functions import SnapshotSource
from .implied import Bounds, SnapshotStats, implied_chunks
from .native_digest import range_indices

log = logging.getLogger(__name__)

#: cells sorted and written per file at most
FILE_CELLS = 500_000
#: how many times a step whose connection was lost is done (a file written, each time replacing the last; a
#: staging directory created)
LOST_ATTEMPTS = 3

T = TypeVar("T")

Record = Callable[[str, str], None]


def bulk_range(a: Connection, table: str, bounds: Bounds, source: SnapshotSource, queue: QueueConfig,
               exporter: AccumuloExporter, splits: Sequence[bytes], record: Record, *,
               live_below: int = 0, file_cells: int = FILE_CELLS) -> SnapshotStats:
    """Write what one range of the producer table implies as sorted RFiles and load them into the exporter's
    table; a range that implies fewer than ``live_below`` cells is written live instead (the exporter's writer:
    for small ranges a bulk load's fixed costs dominate). ``record(bulk_id, phase)`` is called with
    ``writing`` when the staging directory exists, ``loading`` once every file is closed, before the load, and
    ``loaded`` once the load returned (see the module's description)."""
    total = SnapshotStats()
    pending: list[pa.RecordBatch] = []
    size = files = 0
    bulk: BulkImport | None = None
    kept = False  # from the "loading" record on, the directory stays until the load is recorded
    try:
        for _, updates, stats, _ in implied_chunks(a, table, bounds, source, queue, exporter):
            total += stats
            if updates.num_rows:
                pending.append(updates.select(UPDATE_SCHEMA.names))
                size += updates.num_rows
            if bulk is None and size >= max(live_below, 1):
                # createBulkImport is not retried by the client; a lost answer may leave an empty directory,
                # as a kill before the "writing" record does
                bulk = _again_if_lost(f"creating a staging directory in {exporter.table}",
                                      lambda: exporter.connection.bulk_import(exporter.table))
                record(bulk.bulk_id, "writing")
            if bulk is not None and size >= file_cells:
                files = _write(bulk, pending, splits, files)
                pending, size = [], 0
        if bulk is None:  # a small range: live
            for batch in pending:
                exporter.write_updates(batch)
            return total
        files = _write(bulk, pending, splits, files)
        if files:
            kept = True  # before the record: if its outcome is unknown, the load's is too
            record(bulk.bulk_id, "loading")
            bulk.load()
            record(bulk.bulk_id, "loaded")
    except BaseException:
        if bulk is not None and not kept:
            _remove(bulk)  # never loaded
        raise
    _remove(bulk)
    return total


def _write(bulk: BulkImport, batches: list[pa.RecordBatch], splits: Sequence[bytes], files: int) -> int:
    """Sort ``batches`` and write them as one file per destination tablet they touch; returns the files so far."""
    if not batches:
        return files
    cells = sort_cells(pa.Table.from_batches(batches))
    tablets = range_indices(cells.column("row"), splits)
    boundaries = [0, *(i + 1 for i in pc.indices_nonzero(pc.not_equal(tablets[1:], tablets[:-1])).to_pylist()),
                  cells.num_rows]
    for start, stop in zip(boundaries, boundaries[1:], strict=False):
        _write_file(bulk, f"f{files:06d}", cells.slice(start, stop - start))
        files += 1
    return files


def _write_file(bulk: BulkImport, name: str, cells: pa.Table) -> None:
    """Write one file; one whose connection was lost (a gateway killed) is written again, which replaces it."""

    def write() -> None:
        with bulk.file(name) as f:
            f.add_cells(cells)

    _again_if_lost(f"bulk import {bulk.bulk_id}: file {name}", write)


def _again_if_lost(what: str, step: Callable[[], T]) -> T:
    """``step``, done again when its connection was lost (a gateway killed), up to LOST_ATTEMPTS times in all."""
    for attempt in range(1, LOST_ATTEMPTS):
        try:
            return step()
        except ConnectionLostError as exc:
            log.warning("%s: %s; again (attempt %d of %d)", what, exc, attempt + 1, LOST_ATTEMPTS)
    return step()


def finish_load(dest: Connection, table: str, bulk_id: str, phase: str, record: Record) -> bool:
    """For a range a stopped bootstrap left with staging directory ``bulk_id`` in ``phase``: True once its files
    are known to be loaded (loading them now if none was; then recorded ``loaded`` and the directory removed);
    False when the range must be written again (a ``writing`` directory, never loaded, is discarded).
    ``BootstrapError`` (one line; nothing recorded) when whether the load happened cannot be known: see the
    module's description."""
    bulk = dest.bulk_import(table, bulk_id=bulk_id)
    if phase == "writing":
        _remove(bulk)
        return False
    if phase == "loading":
        try:
            if bulk.files_left():
                bulk.load()
        except BulkImportNotFoundError as exc:
            raise BootstrapError(
                f"bulk load {bulk_id} into {table} was recorded as loading, but the gateway at {dest.address()} has "
                f"no staging directory of it ({exc}), so whether its files were loaded is unknown and its range is "
                "not marked done: rerun through a gateway with the gateway.bulk.dir it was written to, or, if the "
                "directory is really gone, start the bootstrap over (--forget)") from None
        except AccumuloError as exc:
            raise BootstrapError(
                f"could not finish bulk load {bulk_id} into {table}, recorded as loading: {exc}; its range is not "
                "marked done: rerun the bootstrap to resume") from None
        record(bulk_id, "loaded")
    elif phase != "loaded":
        raise BootstrapError(f"bulk load {bulk_id} into {table} is recorded in phase {phase!r}, which this release "
                             "does not know; finish the bootstrap with the release that started it")
    _remove(bulk)
    return True


def _remove(bulk: BulkImport) -> None:
    """Remove a staging directory that holds nothing to load; one left behind only takes space, so a failure
    is a warning."""
    try:
        bulk.delete()
    except AccumuloError as exc:
        log.warning("bulk import %s: could not remove its staging directory: %s", bulk.bulk_id, exc)
