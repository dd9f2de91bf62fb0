"""Progress rows: a batch drain's tasks keep their running counters in the queue's table (one row per task,
under the round's run id), so the driver, and other drains, see how a round is going."""

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


def other_drains(conn: Connection, config: QueueConfig, fresh_seconds: float = 60.0) -> set[str]:
    """Run ids of batch-drain rounds whose tasks wrote progress in the last ``fresh_seconds`` (by the tablet
    server's clock): other drains of this queue when called outside a round of one's own (a round removes its
    rows when it ends; rows a crashed drain left go stale)."""
    prefix = config.layout.progress_prefix("")[:-1]  # <qid>#progress:
    now_ms = time.time() * 1000
    runs = set()
    for cell in conn.scan(config.table, Range.prefix(prefix), columns=[(PROGRESS_FAMILY, PROGRESS_QUALIFIER)]):
        if now_ms - cell.ts <= fresh_seconds * 1000:
            runs.add(cell.row[len(prefix):].split(b":", 1)[0].decode("ascii", "replace"))
    return runs


def clear_progress(conn: Connection, config: QueueConfig, run_id: str) -> None:
    """Remove the progress rows of drain run ``run_id``."""
    rows = [cell.row for cell in conn.scan(config.table, Range.prefix(config.layout.progress_prefix(run_id)))]
    if rows:
        conn.write(config.table, [Mutation(row).delete(PROGRESS_FAMILY, PROGRESS_QUALIFIER) for row in rows])
