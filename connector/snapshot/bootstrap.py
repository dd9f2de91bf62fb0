"""Building a destination from A's committed rows: the settings, and the work on one tablet range of A.

A bootstrap reads each row of the producer table whole at one version, takes its snapshot, translates it with
the queue's translator and writes the cells at timestamp = the row's version (the live path: the exporter's
writer; :class:`BootstrapSettings`). It records each range of A it finished, so a killed bootstrap resumes; the
job that runs the ranges and the final check is :mod:`connector.jobs.bootstrap`.

Why the destination ends exact while producers commit and the stream drains into it (the whole argument is
in docs/bootstrap-and-cutover.md: Why B ends exact): every destination cell derives from one row of A, and that
row's commits carry rising seqs (``max(clock, previous + 1)``, whatever the producer's clock says). The snapshot
of a row read at version v writes its cells at v; a commit after that read has a seq above v and reaches the
destination through the stream, so it wins on every cell it touches; an export older than v either changes a
cell the snapshot also writes (and loses to it) or is hidden by a later export of the same row. What is left
(an old export whose successor the destination never received, a delete a full compaction dropped before an
older snapshot cell arrived) the final check finds and repairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from connector.export import AccumuloExporter
from connector.queue import QueueConfig
from connector.queue.settings import DestinationSettings
from connector.settings import boolean, integer, seconds, setting

from .errors import RangeStopped
from .functions import SnapshotSource, check_snapshot_name
from .implied import Bounds, SnapshotStats, implied_chunks
from .verify import DEFAULT_SETTLE_SECONDS, OTHER_FEEDERS

#: with method auto, a tablet of A implying at least this many cells is bulk-loaded (bench_bootstrap.py)
BULK_CELLS = 100_000


@dataclass(frozen=True)
class BootstrapSettings(DestinationSettings):
    """Every setting of a bootstrap (``accumulo-export bootstrap`` flags derive from these); the destination's
    own (translator, delete mode, whether its table may be created) are a drain's too
    (:class:`~connector.queue.settings.DestinationSettings`): give the bootstrap the ones its drain has."""

    snapshot: str | None = setting(None, "module:callable: what one row implies (a function of (row, cells) returning "
                                  "(key, value) exports); or combine=<cid>[:observer] for a combine queue's "
                                  "table", parse=check_snapshot_name, metavar="{module:callable,combine=CID}")
    method: str = setting("auto", "how cells reach the destination: live (its writer), bulk (sorted RFiles the "
                                  "gateway writes and bulk-loads, timestamps kept) or auto (bulk for a tablet of A "
                                  "that implies at least --bulk-cells cells)", choices=["auto", "live", "bulk"])
    bulk_cells: int = setting(BULK_CELLS, "with --method auto: the fewest cells a tablet of A must imply to be "
                                          "bulk-loaded", parse=integer(1))
    final_check: bool = setting(True, "after the snapshot, wait for the queue's older entries to be drained, "
                                      "then verify the destination and repair what differs", parse=boolean,
                                flag=None)
    settle_seconds: float = setting(DEFAULT_SETTLE_SECONDS, "the final check's longest wait for the drain to "
                                    "export what the queue held", parse=seconds, metavar="SECONDS")
    ranges_per_task: int = setting(1, "tablets of A per task", parse=integer(1))
    other_feeders: str = setting("refuse", "when other queues or producer tables also feed the destination "
                                           "(recorded on it): refuse, or keep their cells and compare and repair "
                                           "only the cells this producer table implies", choices=list(OTHER_FEEDERS))


def bootstrap_range(conn: object, table: str, bounds: Bounds, source: SnapshotSource, queue: QueueConfig,
                    exporter: AccumuloExporter, stopping: Callable[[], bool] = lambda: False) -> SnapshotStats:
    """Write what one tablet range of the producer table implies into the exporter's table (live: through its
    writer, flushed: durable when this returns). ``stopping`` is asked before each chunk of rows: once it says
    yes the range is left half written (:class:`RangeStopped`), so a job stops within a chunk's time, not a
    tablet's."""
    total = SnapshotStats()
    for _, updates, stats, _ in implied_chunks(conn, table, bounds, source, queue, exporter):  # type: ignore[arg-type]
        if stopping():
            raise RangeStopped(f"stopping: range of {table!r} left after {total.rows:,} rows (written again on "
                               "resume)")
        exporter.write_updates(updates)
        total += stats
    return total
