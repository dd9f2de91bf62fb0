"""The combine job on any engine: rounds of one task per group of buckets with work, the drain's shape.

Each task runs :class:`~connector.combine.processor.CombineProcessor` over its buckets itself and returns one
``CombineStats``; an engine carries bucket groups in and counters out, never updates. A batch runs rounds
until nothing is queued (or only failing keys are). A stream runs a round every interval over the buckets
that have queued updates or outbox cells at that moment (found by one status scan).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from connector.accumulo import AccumuloError, Connection
from connector.accumulo.options import GatewayOptions
from connector.combine import (
    CombineConfig,
    CombineConfigError,
    CombineProcessor,
    CombineStats,
    check_combine_config,
    combine_status,
    combiner_from_name,
    observer_from_name,
)
from connector.queue import QueueConfig, QueueConfigError
from connector.queue.stored_config import check_config
from connector.transactions.relay import DEFAULT_RELAY_SECONDS

from .errors import CombineError, CombineInputError, checked_error
from .rounds import Engine, Round, bucket_groups, plain_round, run_batch_rounds, run_stream_rounds

#: a batch combine of at most this many queued updates runs in-process when the CLI chooses (Spark's start-up
#: would take longer than the combine)
LOCAL_COMBINE_MAX_UPDATES = 20_000


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

    def relay_target(self) -> tuple[str, bytes]:
        return self.combine.table, self.combine.layout.config_row

    def round(self, buckets: list[int]) -> Round[CombineStats]:
        """The round combining ``buckets``: one task per bucket group."""
        groups = bucket_groups(buckets, self.buckets_per_partition or self.combine.tablet_buckets)
        return Round(GroupCombiner(self), groups, CombineStats, CombineError)


@dataclass
class CombineReport:
    """A combine run: the summed counters of its rounds. Progress callbacks receive it after each round."""

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

    def count_relayed(self, stats: Any) -> None:
        """Count a relay pass (a ``RelayStats``) of this run, as it happens."""
        self.relayed += stats.relayed


ProgressFn = Callable[[CombineReport], None]


@dataclass(frozen=True)
class GroupCombiner:
    """The work of a combine round's tasks (pickled to Spark's executors): one pass over a group's buckets."""

    job: CombineJob

    def __call__(self, group_id: int, buckets: tuple[int, ...]) -> CombineStats:
        job = self.job
        processor = CombineProcessor(job.source.shared(), job.combine, job.combiner, job.observer,
                                     job.export_queue, rows_per_batch=job.rows_per_batch)
        return processor.process_buckets(buckets)


def preflight(job: CombineJob) -> None:
    """Check before any task runs: the combiner and observer load, the combine queue and the export queue
    are initialised as configured. Raises ``CombineInputError`` with one line for what was given wrong,
    ``CombineError`` for a cluster that failed."""
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
        raise checked_error(exc, f"{job.source.describe()}: {exc}", CombineError, CombineInputError) from None


class _Combine:
    """A combine between its rounds, in batch or as a stream: what has work, what it reports."""

    def __init__(self, job: CombineJob, conn: Connection, report: CombineReport,
                 progress: ProgressFn | None) -> None:
        self.job, self.conn, self.report, self.progress = job, conn, report, progress
        self.started = self.round_began = time.monotonic()
        # the first batch round visits every bucket: cheaper than a status scan of every queued update
        self.next: list[int] = list(range(job.combine.num_buckets))

    def next_round(self) -> list[int] | None:
        return self.next

    def pending(self) -> list[int]:
        status = combine_status(self.conn, self.job.combine)
        self.report.remaining = status.updates
        return status.pending_buckets()

    def round(self, buckets: list[int]) -> AbstractContextManager[Round[CombineStats]]:
        self.round_began = time.monotonic()
        return plain_round(self.job.round(buckets))

    def _fold(self, buckets: list[int], stats: CombineStats) -> None:
        report = self.report
        report.rounds += 1
        report.totals += stats
        report.history.append({"round": report.rounds, "buckets": len(buckets), "updates": stats.updates,
                               "exports": stats.exports, "failed": stats.failed,
                               "seconds": time.monotonic() - self.round_began})
        if self.progress:
            self.progress(report)

    def after_round(self, buckets: list[int], stats: CombineStats) -> bool:
        self._fold(buckets, stats)
        status = combine_status(self.conn, self.job.combine)
        self.report.remaining = status.updates
        self.next = status.pending_buckets()
        return status.empty or (stats.progress == 0 and not stats.conflicts)

    def out_of_rounds(self, max_rounds: int) -> None:
        pass  # what is left is reported in ``remaining``


class _StreamCombine(_Combine):
    def after_round(self, buckets: list[int], stats: CombineStats) -> None:  # type: ignore[override]
        self._fold(buckets, stats)

    def idle(self) -> None:
        self.report.seconds = time.monotonic() - self.started


def run_combine(engine: Engine, job: CombineJob, progress: ProgressFn | None = None, max_rounds: int = 100, *,
                check: bool = True) -> CombineReport:
    """Rounds on ``engine`` over the buckets with work until nothing is queued, or a round makes no progress
    (only keys that fail are left: see ``report.totals.errors``)."""
    if check:
        preflight(job)
    report = CombineReport()
    with job.source.connect() as conn:
        plan = _Combine(job, conn, report, progress)
        run_batch_rounds(engine, job, plan, max_rounds, on_relay=report.count_relayed)
    report.seconds = time.monotonic() - plan.started
    return report


def stream_combine(engine: Engine, job: CombineJob, interval: float = 1.0, stop: threading.Event | None = None,
                   progress: ProgressFn | None = None, *, check: bool = True,
                   relay_seconds: float = DEFAULT_RELAY_SECONDS) -> CombineReport:
    """Streaming: every ``interval`` seconds, a round on ``engine`` over the buckets that have work then, until
    ``stop`` is set (or Ctrl-C). A key that keeps failing is retried each round and reported each time."""
    if check:
        preflight(job)
    report = CombineReport()
    with job.source.connect() as conn:
        plan = _StreamCombine(job, conn, report, progress)
        run_stream_rounds(engine, job, plan, interval, stop or threading.Event(), relay_seconds,
                          on_relay=report.count_relayed)
        report.remaining = combine_status(conn, job.combine).updates
    report.seconds = time.monotonic() - plan.started
    return report
