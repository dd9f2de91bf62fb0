"""Progress rows: a drain's tasks keep their running counters in the queue's table (one row per task, under
the run id of a batch round, or of a Spark stream's micro-batch: ``<stream id>.<micro-batch>``), so the driver,
and other drains, see how a round or micro-batch is going."""

from __future__ import annotations

import json
import time
from dataclasses import fields

from connector.accumulo import Connection, Mutation, Range

from .config import QueueConfig
from .drain import DrainStats
from .layout import PROGRESS_FAMILY, PROGRESS_QUALIFIER


def read_progress(conn: Connection, config: QueueConfig, run_id: str) -> DrainStats:
    """The running totals the tasks of drain run ``run_id`` have kept so far (summed over its tasks)."""
    total = DrainStats()
    names = {f.name for f in fields(DrainStats)}
    for cell in conn.scan(config.table, Range.prefix(config.layout.progress_prefix(run_id))):
        total += DrainStats(**{k: v for k, v in json.loads(cell.value).items() if k in names})
    return total


def read_progress_runs(conn: Connection, config: QueueConfig, run_prefix: str) -> dict[str, DrainStats]:
    """The running totals (summed over their tasks) of every drain run whose id starts with ``run_prefix``
    (a Spark stream's micro-batches: ``<stream id>.``), by run id."""
    base = _progress_base(config)
    names = {f.name for f in fields(DrainStats)}
    totals: dict[str, DrainStats] = {}
    for cell in conn.scan(config.table, Range.prefix(base + run_prefix.encode("ascii")),
                          columns=[(PROGRESS_FAMILY, PROGRESS_QUALIFIER)]):
        run = cell.row[len(base):].split(b":", 1)[0].decode("ascii", "replace")
        stats = DrainStats(**{k: v for k, v in json.loads(cell.value).items() if k in names})
        totals[run] = totals.get(run, DrainStats()) + stats
    return totals


def other_drains(conn: Connection, config: QueueConfig, fresh_seconds: float = 60.0) -> set[str]:
    """Drains of this queue whose tasks wrote progress in the last ``fresh_seconds`` (by the tablet server's
    clock): the run ids of batch-drain rounds, the stream ids of Spark streams (whose micro-batches' rows are
    ``<stream id>.<micro-batch>``). Other drains of this queue when called outside a round of one's own (a round
    removes its rows when it ends; rows a crashed drain left go stale)."""
    prefix = _progress_base(config)
    now_ms = time.time() * 1000
    runs = set()
    for cell in conn.scan(config.table, Range.prefix(prefix), columns=[(PROGRESS_FAMILY, PROGRESS_QUALIFIER)]):
        if now_ms - cell.ts <= fresh_seconds * 1000:
            run = cell.row[len(prefix):].split(b":", 1)[0].decode("ascii", "replace")
            runs.add(run.split(".", 1)[0])
    return runs


def clear_progress(conn: Connection, config: QueueConfig, run_id: str, *, prefix: bool = False) -> None:
    """Remove the progress rows of drain run ``run_id`` (``prefix``: of every run whose id starts with it)."""
    start = _progress_base(config) + run_id.encode("ascii") if prefix else config.layout.progress_prefix(run_id)
    rows = [cell.row for cell in conn.scan(config.table, Range.prefix(start),
                                           columns=[(PROGRESS_FAMILY, PROGRESS_QUALIFIER)])]
    if rows:
        conn.write(config.table, [Mutation(row).delete(PROGRESS_FAMILY, PROGRESS_QUALIFIER) for row in rows])


def _progress_base(config: QueueConfig) -> bytes:
    """``<qid>#progress:``, the prefix of every progress row of the queue."""
    return config.layout.progress_prefix("")[:-1]
