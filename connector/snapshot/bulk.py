"""The bootstrap's bulk path: what a range of A implies, as sorted RFiles bulk-loaded into the destination with
every cell's timestamp kept (``Connection.bulk_import``: the gateway writes the files and loads them with
``importDirectory(dir).to(table).tableTime(false)``).

A range's cells are sorted in Accumulo's Key order a file's worth at a time (at most ``file_cells`` each: memory
stays bounded) and cut at the destination's split points, so each file falls in one tablet of it. Nothing is
loaded twice after a kill: the bootstrap records the staging directory as ``loading`` only once every file is
closed (:mod:`connector.snapshot.state`), and a rerun that finds it asks the gateway whether the load happened
(no file left) before loading it again; a directory recorded as ``writing`` was never loaded, and is discarded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import UPDATE_SCHEMA, Connection, sort_cells
from connector.export import AccumuloExporter
from connector.queue import QueueConfig

from .functions import SnapshotSource
from .implied import Bounds, SnapshotStats, implied_chunks
from .native_digest import range_indices

#: cells sorted and written per file at most
FILE_CELLS = 500_000

Record = Callable[[str, str], None]


def bulk_range(a: Connection, table: str, bounds: Bounds, source: SnapshotSource, queue: QueueConfig,
               exporter: AccumuloExporter, splits: Sequence[bytes], record: Record, *,
               live_below: int = 0, file_cells: int = FILE_CELLS) -> SnapshotStats:
    """Write what one range of the producer table implies as sorted RFiles and load them into the exporter's
    table; a range that implies fewer than ``live_below`` cells is written live instead (the exporter's writer:
    for small ranges a bulk load's fixed costs dominate). ``record(bulk_id, phase)`` is called with
    ``writing`` when the staging directory exists and ``loading`` once every file is closed, before the load."""
    total = SnapshotStats()
    pending: list[pa.RecordBatch] = []
    size = files = 0
    bulk = None
    with contextlib.ExitStack() as stack:
        for _, updates, stats, _ in implied_chunks(a, table, bounds, source, queue, exporter):
            total += stats
            if updates.num_rows:
                pending.append(updates.select(UPDATE_SCHEMA.names))
                size += updates.num_rows
            if bulk is None and size >= max(live_below, 1):
                bulk = stack.enter_context(exporter.connection.bulk_import(exporter.table))
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
            record(bulk.bulk_id, "loading")
            bulk.load()
    return total


def _write(bulk: object, batches: list[pa.RecordBatch], splits: Sequence[bytes], files: int) -> int:
    """Sort ``batches`` and write them as one file per destination tablet they touch; returns the files so far."""
    if not batches:
        return files
    cells = sort_cells(pa.Table.from_batches(batches))
    tablets = range_indices(cells.column("row"), splits)
    boundaries = [0, *(i + 1 for i in pc.indices_nonzero(pc.not_equal(tablets[1:], tablets[:-1])).to_pylist()),
                  cells.num_rows]
    for start, stop in zip(boundaries, boundaries[1:], strict=False):
        with bulk.file(f"f{files:06d}") as f:  # type: ignore[attr-defined]
            f.add_cells(cells.slice(start, stop - start))
        files += 1
    return files


def finish_load(dest: Connection, table: str, bulk_id: str, phase: str) -> bool:
    """For a range a killed bootstrap left in ``phase``: True once its files are loaded (loading them now if
    they were not); False when it must be written again (its directory, never loaded, is discarded)."""
    from connector.accumulo import AccumuloError

    try:
        bulk = dest.bulk_import(table, bulk_id=bulk_id)
        left = bulk.files_left()
    except AccumuloError:
        return phase == "loading"  # the directory is gone: removed after its load
    if phase == "writing":
        bulk.delete()
        return False
    if left:
        bulk.load()
    bulk.delete()
    return True
