"""The drain job: export-queue (cluster A) → Exporter → destination table (cluster B), on any engine.

A batch drain drains a cut of the queue, what was queued when it started, in one round (what producers queue
meanwhile is left for the next run, like Spark's ``availableNow``). A round gives each group of the buckets that
hold entries to a task, which drains its buckets itself (read, export, delete: :mod:`connector.queue.drain`) and
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
from connector.export import (
    DestinationTableMissingError,
    prepare_destination,
    prepare_destination_table,
    translator_from_name,
)
from connector.queue import DrainStats, QueueConfig, QueueConfigError, drain_buckets, queue_status
from connector.queue.compaction import QueueCompactor
from connector.queue.config import queue_options
from connector.queue.destinations import Destination, RegisteredExporter, drain_exporter, registered_destinations
from connector.queue.marks import read_marks, settle_marks
from connector.queue.planner import StreamPlanner
from connector.queue.settings import DEFAULT_SERVER_WAIT, DRAIN, EXPORT, PLAN, DrainSettings
from connector.queue.stored_config import check_config, read_translator

from .drain_progress import watching
from .drain_report import DrainReport, ProgressFn
from .errors import DrainError, DrainInputError, checked_error
from .rounds import Engine, Round, bucket_groups, plain_round, run_batch_rounds, run_stream_rounds, timed_out_message

#: a batch drain of at most this many entries runs in-process by default: Spark's start-up would dominate
LOCAL_DRAIN_MAX_ENTRIES = 20_000


def timed_out(message: str) -> DrainError:
    """The drain's error when a cluster had no tablet server within ``server_wait``: one line, what to do."""
    return DrainError(timed_out_message(message))


@dataclass(frozen=True)
class DrainJob:
    """Everything a drain needs, in one place: where the queue is, where it goes, and how
    (:class:`~connector.queue.DrainSettings`, passed whole to every task). A gateway that names no
    ``server_wait`` (its cluster's key, the ``--server-wait`` flag) gets the drain's bound,
    ``DEFAULT_SERVER_WAIT``, on waiting for a tablet server."""

    source: GatewayOptions
    dest: GatewayOptions
    queue: QueueConfig
    dest_table: str
    settings: DrainSettings = field(default_factory=DrainSettings)

    def __post_init__(self) -> None:
        for role in ("source", "dest"):
            gateway: GatewayOptions = getattr(self, role)
            if gateway.server_wait is None:
                object.__setattr__(self, role, replace(gateway, server_wait=DEFAULT_SERVER_WAIT))

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
        (shared by the tasks that run here). The translator is the one :func:`preflight` settled on; a job that
        skipped it takes the queue's stored one here."""
        s = self.settings
        translator = s.translator or s.translator_or(read_translator(self.source.shared(), self.queue))
        return drain_exporter(self.source, self.queue, self.dest, self.dest_table, translator, s.delete_mode,
                              s.create_dest_table)

    def round(self, buckets: list[int], run_id: str | None) -> Round[DrainStats]:
        """The round draining ``buckets``, its tasks keeping progress rows under ``run_id`` (None: none)."""
        groups = bucket_groups(buckets, self.settings.buckets_per_partition or self.queue.tablet_buckets)
        return Round(GroupDrainer(self, run_id), groups, DrainStats, DrainError)


def preflight(job: DrainJob) -> DrainJob:
    """Check, before any task runs, what would otherwise fail inside one: the queue table and the queue's stored
    configuration, the translator (the one given, else the queue's stored one, else the default), both
    clusters' secrets, the destination table (which must exist unless ``create_dest_table``: it is created
    then; its delete mode and shape: :func:`~connector.export.tombstones.prepare_destination`) and every
    destination registered with the queue. Returns the job with its translator and delete mode settled. Raises
    ``DrainInputError`` (one line naming the cluster and the problem) for what was given wrong, ``DrainError``
    for a cluster that failed."""
    role, gateway = "source", job.source
    try:
        with gateway.connect() as conn:
            if not conn.table_exists(job.queue.table):
                raise DrainInputError(f"source {gateway.describe()}: queue table {job.queue.table!r} does not "
                                      "exist" + _did_you_mean(conn, job.queue.table))
            check_config(conn, job.queue)
            translator = job.settings.translator_or(read_translator(conn, job.queue))
            registered = registered_destinations(conn, job.queue)
        translator_from_name(translator)
        role, gateway = "destination", job.dest
        with gateway.connect() as conn:
            prepare_destination_table(conn, job.dest_table, job.settings.create_dest_table)
            # the table's mode (recorded by its first writer), its shape checked: before any task writes
            mode = prepare_destination(conn, job.dest_table, job.settings.delete_mode)
    except DrainError:
        raise
    except (AccumuloError, QueueConfigError, DestinationTableMissingError, ValueError) as exc:
        raise checked_error(exc, f"{role} {gateway.describe()}: {exc}", DrainError, DrainInputError) from None
    for destination in registered:
        _check_destination(destination)
    return replace(job, settings=replace(job.settings, translator=translator, delete_mode=mode.value))


def _did_you_mean(conn: Connection, table: str) -> str:
    near = conn.closest_table(table)
    return f" (did you mean {near!r}?)" if near else ""


def _check_destination(destination: Destination) -> None:
    """A destination registered with the queue: its translator loads, its cluster answers, its table exists
    (registering it made sure of that; a table dropped since is refused, never created again)."""
    try:
        translator_from_name(destination.translator)
        with destination.gateway.connect() as conn:
            prepare_destination_table(conn, destination.table, create=False)
    except (AccumuloError, DestinationTableMissingError, ValueError) as exc:
        raise checked_error(exc, f"registered destination {destination.name!r} ({destination.gateway.describe()}): "
                            f"{exc}", DrainError, DrainInputError) from None


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
    """Drain a cut of the queue: every entry queued when the drain started (after it relayed what crashed
    producers left in their outboxes), then stop, like Spark's ``availableNow``. Entries queued while it runs
    may be drained too; those left are counted in ``report.remaining`` for the next run. A quiet queue ends
    empty. See :class:`_BatchDrain` for how it knows the cut is drained.

    ``progress(report)`` is called after each round and, while a round runs, every ``progress_seconds``
    with the counters its tasks reported so far (``report.live``). ``check=False`` skips :func:`preflight`
    for a caller that ran it already (and passes the job it returned). ``max_rounds`` bounds the rounds (one
    drains the cut)."""
    if check:
        job = preflight(job)
    report = DrainReport()
    started = time.monotonic()
    with job.source.connect() as src:
        plan = _BatchDrain(job, src, report, started, progress, progress_seconds)
        run_batch_rounds(engine, job, plan, max_rounds, on_relay=report.count_relayed)
    report.seconds = time.monotonic() - started
    return report


class _BatchDrain:
    """A batch drain between its rounds: what it drains, when it is done, what it reports.

    It drains a cut: the entries present when its first status scan began (which follows the relay of
    outboxes). That scan lists every bucket holding one of them, and the one round over those buckets drains
    the cut: each task scans each of its buckets once, from its start, after the status scan, so it reads every
    entry still there (an entry gone meanwhile was deleted by another drain after its export) and exports or
    dead-letters it, or fails the drain. Nothing compares timestamps, so no two machines' clocks need agree.
    What producers queue meanwhile is left for the next run, except what the round happens to read."""

    def __init__(self, job: DrainJob, src: Connection, report: DrainReport, started: float,
                 progress: ProgressFn | None, progress_seconds: float) -> None:
        self.job, self.src, self.report, self.started = job, src, report, started
        self.progress, self.progress_seconds = progress, progress_seconds
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
        """The round drained the cut: count it, and what it left for the next run (settling the marks and
        compacting when the queue is empty). Always done."""
        job, report = self.job, self.report
        report.rounds += 1
        report.batch_seconds.append(time.monotonic() - self.round_began)
        report.totals += round_total
        report.seconds = time.monotonic() - self.started
        self.compactor.deleted(job.source.shared(), round_total.deleted)
        report.history.append({"round": report.rounds, "exported": round_total.exported,
                               "queue_before": self.entries_before})
        marks = read_marks(self.src, job.queue)  # before the status: see settle()
        status = queue_status(self.src, job.queue)
        report.remaining = report.depth_before_round = status.entries
        if status.entries == 0:
            self.settle(marks)
            # only rows outside every bucket range may be left, which no drain reaches
            report.unreachable = status.malformed
        if self.progress:
            self.progress(report)
        return True

    def out_of_rounds(self, max_rounds: int) -> None:
        if max_rounds < 1:
            raise DrainError(f"max_rounds must be >= 1 (one round drains the cut), got {max_rounds}")

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
        job = preflight(job)
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
