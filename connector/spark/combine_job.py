"""The combine job with Spark: rounds of one task per group of buckets with work, the drain's batch shape.

Each task runs :class:`~connector.combine.processor.CombineProcessor` over its buckets itself and returns one
row of counters; Spark carries bucket groups in and statistics out, never updates. Batch mode runs rounds
until nothing is queued (or only failing keys are). Streaming mode is a loop of such rounds at an interval,
each over the buckets that have queued updates or outbox cells at that moment (found by one status scan).

(It lives here rather than in ``connector.spark`` only to keep this change inside ``connector.combine``; it
reuses the drain job's ``bucket_groups`` and ``task_error``.)
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from connector.accumulo import AccumuloError
from connector.combine.config import CombineConfig, CombineConfigError, check_combine_config
from connector.combine.functions import combiner_from_name, observer_from_name
from connector.combine.processor import CombineProcessor, CombineStats
from connector.combine.status import combine_status
from connector.errors import ConnectorError
from connector.queue import QueueConfig, QueueConfigError, check_config
from connector.transactions import PeriodicRelay, relay_sources
from connector.transactions.relay import DEFAULT_RELAY_SECONDS

from .drain_job import bucket_groups, task_error
from .options import GatewayOptions


class CombineError(ConnectorError, RuntimeError):
    """The combine job cannot run or finish; the message says why."""


@dataclass(frozen=True)
class CombineJob:
    """Everything a combine run needs: where the queue is, the combiner and observer (by name, so executors
    can load them), and the export queue the observer's exports go to."""

    source: GatewayOptions
    combine: CombineConfig
    combiner: str = "sum"
    observer: str | None = None
    export_queue: QueueConfig | None = None
    buckets_per_partition: int | None = None
    rows_per_batch: int = 1000


@dataclass
class CombineReport:
    totals: CombineStats = field(default_factory=CombineStats)
    rounds: int = 0
    seconds: float = 0.0
    remaining: int = 0  # updates still queued at the end (keys that failed or stayed contended)
    history: list[dict[str, Any]] = field(default_factory=list)
    #: outbox cells that crashed row-transaction producers left, relayed into the combine queue by this run
    relayed: int = 0

    @property
    def rate(self) -> float:
        return self.totals.updates / self.seconds if self.seconds else 0.0


_COUNTERS = [f.name for f in fields(CombineStats) if f.name not in ("errors", "seconds")]
STATS_SCHEMA = pa.schema([*((n, pa.int64()) for n in _COUNTERS), ("seconds", pa.float64()), ("errors", pa.string())])
STATS_DDL = ", ".join([*(f"{n} long" for n in _COUNTERS), "seconds double", "errors string"])


@dataclass(frozen=True)
class GroupCombiner:
    """The function of a round's tasks: for each bucket group id in its input, one pass over those buckets."""

    job: CombineJob
    groups: tuple[tuple[int, ...], ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = self.job
        processor = CombineProcessor(job.source.shared(), job.combine, job.combiner, job.observer,
                                     job.export_queue, rows_per_batch=job.rows_per_batch)
        for batch in batches:
            for group_id in batch.column(0).to_pylist():
                row = asdict(processor.process_buckets(self.groups[group_id]))
                row["errors"] = json.dumps(row["errors"])
                yield pa.RecordBatch.from_pylist([row], schema=STATS_SCHEMA)


def preflight(job: CombineJob) -> None:
    """Check before Spark runs: the combiner and observer load, the combine queue and the export queue are
    initialised as configured. Raises ``CombineError`` with one line."""
    try:
        combiner_from_name(job.combiner)
        if job.observer is not None:
            observer_from_name(job.observer)
            if job.export_queue is None:
                raise ValueError(f"observer {job.observer!r} needs an export queue")
        with job.source.connect() as conn:
            if not conn.table_exists(job.combine.table):
                raise ValueError(f"table {job.combine.table!r} does not exist (run 'combine init')")
            check_combine_config(conn, job.combine, required=True)
            if job.export_queue is not None:
                check_config(conn, job.export_queue, required=True)
    except (AccumuloError, CombineConfigError, QueueConfigError, ValueError) as exc:
        raise CombineError(f"{job.source.describe()}: {exc}") from None


def combine_round(spark: SparkSession, job: CombineJob, buckets: list[int]) -> CombineStats:
    """One Spark job: one task per bucket group; returns the summed counters."""
    groups = bucket_groups(buckets, job.buckets_per_partition or job.combine.tablet_buckets)
    ids = spark.range(len(groups), numPartitions=len(groups))
    try:
        rows = ids.mapInArrow(GroupCombiner(job, groups), STATS_DDL).collect()
    except Exception as exc:
        ours = task_error(exc)
        if ours is None:
            raise
        raise CombineError(str(ours)) from exc
    total = CombineStats()
    for row in rows:
        d = row.asDict()
        d["errors"] = json.loads(d["errors"])
        total += CombineStats(**d)
    return total


ProgressFn = Callable[[CombineReport], None]


def _round(spark: SparkSession, job: CombineJob, report: CombineReport, pending: list[int],
           progress: ProgressFn | None) -> CombineStats:
    began = time.monotonic()
    stats = combine_round(spark, job, pending)
    report.rounds += 1
    report.totals += stats
    report.history.append({"round": report.rounds, "buckets": len(pending), "updates": stats.updates,
                           "exports": stats.exports, "failed": stats.failed, "seconds": time.monotonic() - began})
    if progress:
        progress(report)
    return stats


def run_combine(spark: SparkSession, job: CombineJob, progress: ProgressFn | None = None,
                max_rounds: int = 100, *, check: bool = True) -> CombineReport:
    """Rounds over the buckets with work until nothing is queued, or a round makes no progress (only keys
    that fail are left: see ``report.totals.errors``)."""
    if check:
        preflight(job)
    report = CombineReport()
    started = time.monotonic()
    with job.source.connect() as conn:
        # updates that crashed row-transaction producers left in their outboxes: combined in this run
        report.relayed = relay_sources(conn, job.combine.table, job.combine.layout.config_row).relayed
        # the first round visits every bucket: cheaper than a status scan of every queued update
        pending = list(range(job.combine.num_buckets))
        for _ in range(max_rounds):
            stats = _round(spark, job, report, pending, progress)
            status = combine_status(conn, job.combine)
            report.remaining = status.updates
            if status.empty or (stats.progress == 0 and not stats.conflicts):
                break
            pending = status.pending_buckets()
    report.seconds = time.monotonic() - started
    return report


def run_stream(spark: SparkSession, job: CombineJob, interval: float = 1.0, stop: threading.Event | None = None,
               progress: ProgressFn | None = None, *, check: bool = True,
               relay_seconds: float = DEFAULT_RELAY_SECONDS) -> CombineReport:
    """Streaming: every ``interval`` seconds, a round over the buckets that have work then, until ``stop`` is
    set (or Ctrl-C). A key that keeps failing is retried each round and reported each time."""
    if check:
        preflight(job)
    stop = stop or threading.Event()
    report = CombineReport()
    started = time.monotonic()
    # relays the updates crashed row-transaction producers left, within about relay_seconds
    relay = PeriodicRelay(job.source.shared, job.combine.table, job.combine.layout.config_row, relay_seconds)
    relay.start()
    with job.source.connect() as conn, contextlib.closing(relay):
        while not stop.is_set():
            began = time.monotonic()
            status = combine_status(conn, job.combine)
            report.remaining = status.updates
            if not status.empty:
                _round(spark, job, report, status.pending_buckets(), progress)
            report.seconds = time.monotonic() - started
            stop.wait(max(0.0, interval - (time.monotonic() - began)))
        report.remaining = combine_status(conn, job.combine).updates
    report.relayed = relay.stats.relayed
    report.seconds = time.monotonic() - started
    return report
