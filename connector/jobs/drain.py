"""The drain job: export-queue (cluster A) → Exporter → destination table (cluster B), on any engine.

A batch drain runs rounds until the queue is empty. A round gives each group of the buckets that hold
entries to a task, which drains its buckets itself (read, export, delete: :mod:`connector.queue.drain`) and
returns one ``DrainStats``; an engine carries bucket groups in and counters out, never entries. A stream in
rounds drains, every trigger, the buckets the marks (and a periodic sweep) name, whole, and settles their marks;
it keeps no checkpoint: the queue and its marks are its whole state. (Spark's own streaming drain, a structured
streaming query, is ``connector.spark.drain_job.start_stream``.)
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from connector.accumulo import AccumuloError, Connection
from connector.accumulo.options import GatewayOptions
from connector.export import translator_from_name
from connector.queue import DrainStats, QueueConfig, QueueConfigError, drain_buckets, queue_status
from connector.queue.compaction import QueueCompactor
from connector.queue.config import queue_options
from connector.queue.destinations import Destination, RegisteredExporter, drain_exporter, registered_destinations
from connector.queue.marks import read_marks, settle_marks
from connector.queue.planner import StreamPlanner
from connector.queue.settings import DRAIN, EXPORT, PLAN, DrainSettings
from connector.queue.stored_config import check_config

from .drain_progress import watching
from .drain_report import DrainReport, ProgressFn
from .errors import DrainError
from .rounds import Engine, Round, bucket_groups, plain_round, run_batch_rounds, run_stream_rounds, timed_out_message

#: a batch drain of at most this many entries runs in-process by default: Spark's start-up would dominate
LOCAL_DRAIN_MAX_ENTRIES = 20_000


def timed_out(message: str) -> DrainError:
    """The drain's error when a cluster had no tablet server within ``server_wait``: one line, what to do."""
    return DrainError(timed_out_message(message))


@dataclass(frozen=True)
class DrainJob:
    """Everything a drain needs, in one place: where the queue is, where it goes, and how
    (:class:`~connector.queue.DrainSettings`, passed whole to every task). The settings' ``server_wait``
    becomes both gateways' bound on waiting for a tablet server."""

    source: GatewayOptions
    dest: GatewayOptions
    queue: QueueConfig
    dest_table: str
    settings: DrainSettings = field(default_factory=DrainSettings)

    def __post_init__(self) -> None:
        wait = self.settings.server_wait
        for role in ("source", "dest"):
            gateway: GatewayOptions = getattr(self, role)
            if gateway.server_wait != wait:
                object.__setattr__(self, role, replace(gateway, server_wait=wait))

    def relay_target(self) -> tuple[str, bytes]:
        return self.queue.table, self.queue.layout.config_row

    @property
    def relay_seconds(self) -> float:
        return self.settings.relay_seconds

    def source_options(self) -> dict[str, str]:
        """The ``export-queue`` data source's options for this queue."""
        return {**self.source.to_options("source."), **queue_options(self.queue),
                **self.settings.to_options(tags={PLAN})}

    def sink_options(self, report_dir: str) -> dict[str, str]:
        """The ``export-queue-drain`` source's options for this drain."""
        return {**self.source_options(), **self.export_options(report_dir),
                **self.settings.to_options(tags={DRAIN})}

    def export_options(self, report_dir: str) -> dict[str, str]:
        """The ``accumulo-export`` sink's options for this drain (fed by an ``export-queue`` stream: it
        deletes what it exported from this queue), and no others: the sink refuses a name it does not take."""
        opts = {**self.source.to_options("source."), **queue_options(self.queue),
                **self.dest.to_options("dest."), "table": self.dest_table, **self.settings.to_options(tags={EXPORT})}
        if report_dir:
            opts["report_dir"] = report_dir
        return opts

    def exporter(self) -> RegisteredExporter:
        """This process's exporter into the destination, and into every destination registered with the queue
        (shared by the tasks that run here)."""
        s = self.settings
        return drain_exporter(self.source, self.queue, self.dest, self.dest_table, s.translator, s.delete_mode)

    def round(self, buckets: list[int], run_id: str | None) -> Round[DrainStats]:
        """The round draining ``buckets``, its tasks keeping progress rows under ``run_id`` (None: none)."""
        groups = bucket_groups(buckets, self.settings.buckets_per_partition or self.queue.tablet_buckets)
        return Round(GroupDrainer(self, run_id), groups, DrainStats, DrainError)


def preflight(job: DrainJob) -> None:
    """Check, before any task runs, what would otherwise fail inside one: the translator, both clusters'
    secrets, the queue table and the queue's stored configuration. Raises ``DrainError`` with one line
    naming the cluster and the problem."""
    try:
        translator_from_name(job.settings.translator)
    except ValueError as exc:
        raise DrainError(str(exc)) from None
    for role, gateway in (("source", job.source), ("destination", job.dest)):
        try:
            with gateway.connect() as conn:
                if role == "destination":
                    conn.list_tables()  # authenticates
                elif not conn.table_exists(job.queue.table):
                    raise DrainError(f"queue table {job.queue.table!r} does not exist on the source "
                                     f"{gateway.describe()}")
                else:
                    check_config(conn, job.queue)
                    for registered in registered_destinations(conn, job.queue):
                        _check_destination(registered)
        except (AccumuloError, QueueConfigError) as exc:
            raise DrainError(f"{role} {gateway.describe()}: {exc}") from None


def _check_destination(destination: Destination) -> None:
    """A destination registered with the queue: its translator loads and its cluster answers."""
    try:
        translator_from_name(destination.translator)
        with destination.gateway.connect() as conn:
            conn.list_tables()
    except (AccumuloError, ValueError) as exc:
        raise DrainError(f"registered destination {destination.name!r} ({destination.gateway.describe()}): "
                         f"{exc}") from None


@dataclass(frozen=True)
class GroupDrainer:
    """The work of a drain round's tasks (pickled to Spark's executors): drain one group's buckets."""

    job: DrainJob
    run_id: str | None  # None: keep no progress rows

    def __call__(self, group_id: int, buckets: tuple[int, ...]) -> DrainStats:
        job = self.job
        progress_row = None if self.run_id is None else job.queue.layout.progress_row(self.run_id, group_id)
        return drain_buckets(job.source.shared(), job.queue, buckets, job.exporter(), job.settings,
                             progress_row=progress_row)


def run_drain(engine: Engine, job: DrainJob, progress: ProgressFn | None = None, max_rounds: int = 1000, *,
              check: bool = True, progress_seconds: float = 2.0) -> DrainReport:
    """Drain until the queue is empty: rounds on ``engine`` over the buckets that hold entries.

    ``progress(report)`` is called after each round and, while a round runs, every ``progress_seconds``
    with the counters its tasks reported so far (``report.live``). ``check=False`` skips :func:`preflight`
    for a caller that ran it already."""
    if check:
        preflight(job)
    report = DrainReport()
    started = time.monotonic()
    with job.source.connect() as src:
        plan = _BatchDrain(job, src, report, started, progress, progress_seconds)
        run_batch_rounds(engine, job, plan, max_rounds, on_relay=report.count_relayed)
    report.seconds = time.monotonic() - started
    return report


class _BatchDrain:
    """A batch drain between its rounds: what is left, when it is done, what it reports."""

    def __init__(self, job: DrainJob, src: Connection, report: DrainReport, started: float,
                 progress: ProgressFn | None, progress_seconds: float) -> None:
        self.job, self.src, self.report, self.started = job, src, report, started
        self.progress, self.progress_seconds = progress, progress_seconds
        self.empty_rounds = 0
        self.entries_before = 0
        self.round_began = 0.0
        self.compactor = QueueCompactor(job.queue, job.settings.compact_dead_keys)

    def next_round(self) -> list[int] | None:
        job, report = self.job, self.report
        marks = read_marks(self.src, job.queue)  # before the status: see settle()
        status = queue_status(self.src, job.queue)
        report.remaining = report.depth_before_round = self.entries_before = status.entries
        if status.empty:
            self.settle(marks)
            return None
        # a malformed row inside a bucket's range is that bucket's to dead-letter, but status does not say
        # which bucket holds it: then every bucket is visited
        if status.malformed or not status.buckets:
            return list(range(job.queue.num_buckets))
        return [b.bucket for b in status.buckets]

    @contextlib.contextmanager
    def round(self, buckets: list[int]) -> Iterator[Round[DrainStats]]:
        run_id, self.round_began = uuid.uuid4().hex, time.monotonic()
        job = self.job
        with watching(job.source, job.queue, run_id, self.report, self.started, self.progress,
                      self.progress_seconds):
            yield self.job.round(buckets, run_id)

    def after_round(self, buckets: list[int], round_total: DrainStats) -> bool:
        job, report = self.job, self.report
        report.rounds += 1
        report.batch_seconds.append(time.monotonic() - self.round_began)
        report.totals += round_total
        report.seconds = time.monotonic() - self.started
        self.compactor.deleted(job.source.shared(), round_total.deleted)
        # what is left, as far as this drain knows (the progress line after a round shows it)
        report.depth_before_round = max(0, self.entries_before - round_total.deleted)
        report.history.append({"round": report.rounds, "exported": round_total.exported,
                               "queue_before": self.entries_before})
        if self.progress:
            self.progress(report)
        if round_total.entries:
            self.empty_rounds = 0
            return False
        # another drain may have taken the entries meanwhile: look again before giving up
        marks = read_marks(self.src, job.queue)
        status = queue_status(self.src, job.queue)
        if status.entries == 0:
            self.settle(marks)
            # done; only rows outside every bucket range may be left, which no drain reaches
            report.unreachable = status.malformed
            report.remaining = 0
            return True
        self.empty_rounds += 1
        if self.empty_rounds >= 3:
            raise DrainError(f"{self.empty_rounds} rounds read nothing although the queue holds "
                             f"{status.entries} entries")
        return False

    def out_of_rounds(self, max_rounds: int) -> None:
        raise DrainError(f"queue not empty after {max_rounds} rounds")

    def settle(self, marks: dict[int, bytes]) -> None:
        """The queue was found empty. Clear the bucket marks the drain left behind (else ``queue status`` shows
        marked buckets on an empty queue, and a stream visits them once more): ``marks`` were read before the
        status scan, so each token's entries are gone; a mark a producer set since holds a new token, which the
        condition keeps. Then compact the queue's tablets if the files hold enough delete markers (those of
        earlier drains too)."""
        if marks:
            settle_marks(self.src, self.job.queue, marks, drained_whole=marks)
        self.compactor.check(self.job.source.shared(), 0)


def stream_drain(engine: Engine, job: DrainJob, progress: ProgressFn | None = None, *,
                 stop: threading.Event | None = None, check: bool = True) -> DrainReport:
    """A streaming drain in rounds on ``engine`` until ``stop`` is set (or Ctrl-C): every
    ``settings.trigger_seconds`` a round drains the buckets the marks (and, every ``settings.sweep_seconds``,
    a sweep) name, whole, then settles their marks. It keeps no checkpoint: the queue and its marks are its
    whole state, so a restarted stream resumes where the last one stopped. ``progress(report)`` is called
    after each round that found entries."""
    if check:
        preflight(job)
    report = DrainReport()
    planner = StreamPlanner(job.source.shared, job.queue, job.settings.sweep_seconds,
                            compact_dead_keys=job.settings.compact_dead_keys)
    plan = _StreamDrain(job, planner, report, progress)
    try:  # the relay's thread counts into the report as it relays: progress and metrics see it at once
        run_stream_rounds(engine, job, plan, job.settings.trigger_seconds, stop or threading.Event(),
                          job.settings.relay_seconds, on_relay=report.count_relayed)
    finally:
        report.seconds = time.monotonic() - plan.started
    return report


class _StreamDrain:
    """A streaming drain between its rounds: the planner's buckets in, their marks settled after."""

    def __init__(self, job: DrainJob, planner: StreamPlanner, report: DrainReport,
                 progress: ProgressFn | None) -> None:
        self.job, self.planner, self.report, self.progress = job, planner, report, progress
        self.started = time.monotonic()
        self.round_began = 0.0
        self.planned: dict[str, str] = {}  # bucketHex -> token the last round was planned with
        self.tokens: dict[int, bytes] = {}

    def pending(self) -> list[int]:
        pending = self.planner.pending(self.planned)
        self.planned = pending
        self.tokens = {int(h, 16): t.encode() for h, t in pending.items() if t}
        return sorted(int(h, 16) for h in pending)

    def round(self, buckets: list[int]) -> contextlib.AbstractContextManager[Round[DrainStats]]:
        self.round_began = time.monotonic()
        return plain_round(self.job.round(buckets, None))

    def after_round(self, buckets: list[int], stats: DrainStats) -> None:
        conn = self.job.source.shared()
        settle_marks(conn, self.job.queue, self.tokens, drained_whole=self.tokens)
        self.planner.compactor.deleted(conn, stats.deleted)
        report = self.report
        report.rounds += 1
        report.batch_seconds.append(time.monotonic() - self.round_began)
        report.totals += stats
        report.seconds = time.monotonic() - self.started
        if self.progress and stats.entries:
            self.progress(report)

    def idle(self) -> None:
        pass
