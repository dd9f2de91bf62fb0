"""The drain job: export-queue (cluster A) → Exporter → destination table (cluster B), with Spark.

Batch mode runs rounds until the queue is empty. A round is one Spark job with one task per group of
non-empty buckets; each task drains its buckets itself, in Python (read, export, delete: see
:mod:`connector.queue.drain`), and returns one row of counters. Spark carries bucket groups in and
statistics out, never entries, so the JVM does no per-entry work. Streaming mode runs a structured
streaming query at a trigger interval (or AvailableNow) over the ``export-queue-drain`` source, whose tasks
likewise drain the buckets each micro-batch planned and yield counters (:mod:`connector.spark.drain_source`).
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from connector.accumulo import AccumuloError, TimedOutError
from connector.errors import ConnectorError, error_names
from connector.export import translator_from_name
from connector.queue import (
    DrainStats,
    QueueConfig,
    QueueConfigError,
    check_config,
    clear_progress,
    drain_buckets,
    queue_status,
    read_progress,
    settle_marks,
)
from connector.queue.marks import read_marks
from connector.queue.planner import DEFAULT_SWEEP_SECONDS, StreamPlanner
from connector.transactions import PeriodicRelay, relay_sources
from connector.transactions.relay import DEFAULT_RELAY_SECONDS

from .export_sink import shared_exporter, write_report
from .options import GatewayOptions, queue_options

log = logging.getLogger(__name__)


class DrainError(ConnectorError, RuntimeError):
    """The drain cannot finish; the message says why (nothing was deleted that was not exported)."""


#: default bound (seconds) on waiting for a tablet server of A or B during a drain (``DrainJob.server_wait``)
DEFAULT_SERVER_WAIT = 300.0


def timed_out(message: str) -> DrainError:
    """The drain's error when a cluster had no tablet server within ``server_wait``: one line, what to do."""
    return DrainError(f"{message}; the drain stopped (--server-wait / server_wait sets the bound); queue entries "
                      f"are deleted only after their export was flushed, so a rerun once the tablet server serves "
                      f"again finishes the job")


@dataclass(frozen=True)
class DrainJob:
    """Everything a drain needs, in one place."""

    source: GatewayOptions
    dest: GatewayOptions
    queue: QueueConfig
    dest_table: str
    translator: str = "difference"
    delete_mode: str = "delete"
    buffer_bytes: int = 1 << 20
    fail_fast: bool = False
    buckets_per_partition: int | None = None
    #: seconds a scan or flush on A or B may wait for a tablet server (a crashed one coming back) before the
    #: drain fails with ``DrainError``; None leaves each ``GatewayOptions.server_wait`` as it is
    server_wait: float | None = DEFAULT_SERVER_WAIT
    #: a stream relays what crashed producers left in the outboxes feeding the queue within about this long
    #: (seconds); a batch drain relays them once before it starts
    relay_seconds: float = DEFAULT_RELAY_SECONDS

    def __post_init__(self) -> None:
        if not (0 < self.relay_seconds < float("inf")):
            raise ValueError(f"relay_seconds must be a number of seconds > 0, got {self.relay_seconds!r}")
        if self.server_wait is not None:
            if not (0 < self.server_wait < float("inf")):
                raise ValueError(f"server_wait must be a number of seconds > 0, got {self.server_wait!r}")
            for role in ("source", "dest"):
                gateway: GatewayOptions = getattr(self, role)
                if gateway.server_wait != self.server_wait:
                    object.__setattr__(self, role, replace(gateway, server_wait=self.server_wait))

    def source_options(self) -> dict[str, str]:
        opts = {**self.source.to_options("source."), **queue_options(self.queue)}
        if self.buckets_per_partition:
            opts["buckets_per_partition"] = str(self.buckets_per_partition)
        return opts

    def sink_options(self, report_dir: str) -> dict[str, str]:
        return {**self.source_options(), **self.dest.to_options("dest."), "table": self.dest_table,
                "translator": self.translator, "delete_mode": self.delete_mode,
                "buffer_bytes": str(self.buffer_bytes), "fail_fast": str(self.fail_fast).lower(),
                "report_dir": report_dir, "relay_seconds": str(self.relay_seconds)}


@dataclass
class DrainReport:
    """A drain run: the summed counters of its tasks, plus what only the driver knows."""

    totals: DrainStats = field(default_factory=DrainStats)
    rounds: int = 0
    seconds: float = 0.0  # wall time of the run (``totals.seconds`` sums the tasks' times)
    remaining: int = 0
    #: malformed rows outside every bucket range (left in place; see ``queue status``)
    unreachable: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    #: the counters of the round still running, as its tasks last reported them
    live: DrainStats = field(default_factory=DrainStats)
    #: entries in the queue when the running (or last) round started
    depth_before_round: int = 0
    #: outbox cells that crashed producers left, relayed into the queue by this run
    relayed: int = 0
    #: wall seconds of the latest rounds or micro-batches, newest last (one per ``rounds``; bounded, a stream
    #: runs for weeks)
    batch_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=1024))

    @property
    def entries(self) -> int:
        return self.totals.entries + self.live.entries

    @property
    def exported(self) -> int:
        return self.totals.exported + self.live.exported

    @property
    def deleted(self) -> int:
        return self.totals.deleted + self.live.deleted

    @property
    def dead_lettered(self) -> int:
        return self.totals.dead_lettered + self.live.dead_lettered

    @property
    def queue_depth(self) -> int:
        """Entries left: the depth when the round started, less what the round deleted so far (entries added
        meanwhile show up at the next round)."""
        return max(0, self.depth_before_round - self.live.deleted)

    @property
    def rate(self) -> float:
        return self.exported / self.seconds if self.seconds else 0.0


ProgressFn = Callable[[DrainReport], None]


def _read_reports(report_dir: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(glob.glob(os.path.join(report_dir, "*.json"))):
        with open(path) as f:
            out.append(json.load(f))
        os.remove(path)
    return out


def _stats(report: dict[str, Any]) -> DrainStats:
    names = {f.name for f in fields(DrainStats)}
    return DrainStats(**{k: v for k, v in report.items() if k in names})


def preflight(job: DrainJob) -> None:
    """Check, before Spark runs anything, what would otherwise fail inside a task: the translator, both
    clusters' secrets, the queue table and the queue's stored configuration. Raises ``DrainError`` with one
    line naming the cluster and the problem."""
    try:
        translator_from_name(job.translator)
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
        except (AccumuloError, QueueConfigError) as exc:
            raise DrainError(f"{role} {gateway.describe()}: {exc}") from None


#: an error a Spark task raised, as its trace shows it; ours (a ``ConnectorError``) carry the one-line message
#: the user needs, not the trace
_TASK_ERROR = re.compile(r"^(?:connector\.[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def task_error(exc: BaseException) -> DrainError | None:
    """The error of ours that failed a Spark job, as a one-line ``DrainError`` (None if it is not ours)."""
    ours = error_names()
    found = [m for m in _TASK_ERROR.finditer(str(exc)) if m.group(1) in ours]
    if not found:
        return None
    if found[-1].group(1) == "TimedOutError":
        return timed_out(found[-1].group(2).strip())
    return DrainError(found[-1].group(2).strip())


#: threads of an in-process round; more would only contend for the GIL and the two servers
LOCAL_THREADS = 2
#: a batch drain of at most this many entries runs in-process by default: Spark's start-up would dominate
LOCAL_DRAIN_MAX_ENTRIES = 20_000
STATS_SCHEMA = pa.schema([(f.name, pa.float64() if f.name == "seconds" else pa.int64()) for f in fields(DrainStats)])
STATS_DDL = ", ".join(f"{f.name} {'double' if f.type == pa.float64() else 'long'}" for f in STATS_SCHEMA)


@dataclass(frozen=True)
class GroupDrainer:
    """The function of a batch round's tasks (pickled to the executors): for each bucket group id in its
    input, drain those buckets and yield one row of ``DrainStats``."""

    job: DrainJob
    groups: tuple[tuple[int, ...], ...]
    run_id: str | None  # None: keep no progress rows

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for group_id in batch.column(0).to_pylist():
                yield pa.RecordBatch.from_pylist([asdict(self.drain_group(group_id))], schema=STATS_SCHEMA)

    def drain_group(self, group_id: int) -> DrainStats:
        """Drain the buckets of one group (in this process) and return what was done."""
        job = self.job
        exporter = shared_exporter(job.dest, job.dest_table, job.translator, job.delete_mode, True)
        progress_row = None if self.run_id is None else job.queue.layout.progress_row(self.run_id, group_id)
        return drain_buckets(job.source.shared(), job.queue, self.groups[group_id], exporter,
                             buffer_bytes=job.buffer_bytes, fail_fast=job.fail_fast, progress_row=progress_row)


def bucket_groups(buckets: list[int], per_group: int) -> tuple[tuple[int, ...], ...]:
    """Consecutive buckets in groups of ``per_group`` (neighbours share tablets, so a task reads few)."""
    return tuple(tuple(buckets[i:i + per_group]) for i in range(0, len(buckets), per_group))


def drain_round(spark: SparkSession | None, job: DrainJob, buckets: list[int], run_id: str | None) -> DrainStats:
    """One Spark job draining ``buckets``: one task per bucket group; returns the summed counters. The tasks
    keep their running counters in the progress rows of ``run_id`` (see :func:`read_progress`), if given. A task's
    failure raises ``DrainError`` with its message when the error is one of ours. Without ``spark`` the
    groups are drained in this process, on ``LOCAL_THREADS`` threads (for small queues: no Spark start-up)."""
    groups = bucket_groups(buckets, job.buckets_per_partition or job.queue.tablet_buckets)
    drainer = GroupDrainer(job, groups, run_id)
    if spark is None:
        failing = threading.Event()

        def drain_group(group_id: int) -> DrainStats:
            if failing.is_set():  # another group failed: this round fails, so do not start more work
                return DrainStats()
            try:
                return drainer.drain_group(group_id)
            except BaseException:
                failing.set()
                raise

        with ThreadPoolExecutor(LOCAL_THREADS, thread_name_prefix="drain") as pool:
            futures = [pool.submit(drain_group, g) for g in range(len(groups))]
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f.done() and not f.cancelled() and f.exception()), None)
            if failed is not None:
                # groups not started yet are not: after a timeout each would wait out the bound again
                for f in futures:
                    f.cancel()
                exc = failed.exception()
                assert exc is not None
                if isinstance(exc, TimedOutError):
                    raise timed_out(str(exc)) from exc
                raise exc
            return sum((f.result() for f in futures), DrainStats())
    ids = spark.range(len(groups), numPartitions=len(groups))
    try:
        rows = ids.mapInArrow(drainer, STATS_DDL).collect()
    except Exception as exc:
        ours = task_error(exc)
        if ours is None:
            raise
        raise ours from exc
    return sum((DrainStats(**row.asDict()) for row in rows), DrainStats())


def run_batch(spark: SparkSession | None, job: DrainJob, progress: ProgressFn | None = None,
              max_rounds: int = 1000, *, check: bool = True, progress_seconds: float = 2.0) -> DrainReport:
    """Drain until the queue is empty: rounds of :func:`drain_round` over the buckets that hold entries
    (with ``spark`` None, in this process: see :func:`drain_round`).

    ``progress(report)`` is called after each round and, while a round runs, every ``progress_seconds``
    with the counters its tasks reported so far (``report.live``). ``check=False`` skips :func:`preflight`
    for a caller that ran it already."""
    if check:
        preflight(job)
    report = DrainReport()
    started = time.monotonic()
    empty_rounds = 0
    with job.source.connect() as src:
        # outboxes that crashed producers left: their entries are drained in this run
        report.relayed = relay_sources(src, job.queue.table, job.queue.layout.config_row).relayed
        while report.rounds < max_rounds:
            marks = read_marks(src, job.queue)  # before the status: see _settle_after_batch
            status = queue_status(src, job.queue)
            report.remaining = report.depth_before_round = status.entries
            if status.empty:
                _settle_after_batch(src, job, marks)
                break
            # a malformed row inside a bucket's range is that bucket's to dead-letter, but status does not say
            # which bucket holds it: then every bucket is visited
            everything = status.malformed or not status.buckets
            pending = list(range(job.queue.num_buckets)) if everything else [b.bucket for b in status.buckets]
            run_id, round_started = uuid.uuid4().hex, time.monotonic()
            with _watching(job, run_id, report, started, progress, progress_seconds):
                round_total = drain_round(spark, job, pending, run_id)
            report.rounds += 1
            report.batch_seconds.append(time.monotonic() - round_started)
            report.totals += round_total
            report.seconds = time.monotonic() - started
            # what is left, as far as this drain knows (the progress line after a round shows it)
            report.depth_before_round = max(0, status.entries - round_total.deleted)
            report.history.append({"round": report.rounds, "exported": round_total.exported,
                                   "queue_before": status.entries})
            if progress:
                progress(report)
            if round_total.entries == 0:
                # another drain may have taken the entries meanwhile: look again before giving up
                marks = read_marks(src, job.queue)
                status = queue_status(src, job.queue)
                if status.entries == 0:
                    _settle_after_batch(src, job, marks)
                    # done; only rows outside every bucket range may be left, which no drain reaches
                    report.unreachable = status.malformed
                    report.remaining = 0
                    break
                empty_rounds += 1
                if empty_rounds >= 3:
                    raise DrainError(f"{empty_rounds} rounds read nothing although the queue holds "
                                     f"{status.entries} entries")
            else:
                empty_rounds = 0
        else:
            raise DrainError(f"queue not empty after {max_rounds} rounds")
    report.seconds = time.monotonic() - started
    return report


def _settle_after_batch(conn: Any, job: DrainJob, marks: dict[int, bytes]) -> None:
    """Clear the bucket marks a batch drain left behind (else ``queue status`` shows marked buckets on an empty
    queue, and a stream visits them once more). ``marks`` were read before a status scan found the queue empty,
    so each token's entries are gone; a mark a producer set since holds a new token, which the condition keeps."""
    if marks:
        settle_marks(conn, job.queue, marks, drained_whole=marks)


def run_local_stream(job: DrainJob, trigger_seconds: float = 1.0, progress: ProgressFn | None = None, *,
                     stop: threading.Event | None = None, sweep_seconds: float = DEFAULT_SWEEP_SECONDS,
                     check: bool = True) -> DrainReport:
    """A streaming drain in this process, without Spark, until ``stop`` is set (or Ctrl-C): every
    ``trigger_seconds`` a micro-batch drains the buckets the marks (and, every ``sweep_seconds``, a sweep)
    name, whole, on ``LOCAL_THREADS`` threads, then settles their marks. It keeps no checkpoint: the queue
    and its marks are its whole state, so a restarted stream resumes where the last one stopped.
    ``progress(report)`` is called after each micro-batch that found entries."""
    if check:
        preflight(job)
    stop = stop or threading.Event()
    report = DrainReport()
    started = time.monotonic()
    planner = StreamPlanner(job.source.shared, job.queue, sweep_seconds)
    relay = PeriodicRelay(job.source.shared, job.queue.table, job.queue.layout.config_row, job.relay_seconds)
    relay.start()
    try:
        _local_stream(job, trigger_seconds, progress, stop, planner, report, started)
    finally:
        relay.stop()
        report.relayed = relay.stats.relayed
    report.seconds = time.monotonic() - started
    return report


def _local_stream(job: DrainJob, trigger_seconds: float, progress: ProgressFn | None, stop: threading.Event,
                  planner: StreamPlanner, report: DrainReport, started: float) -> None:
    planned: dict[str, str] = {}
    while not stop.is_set():
        tick = time.monotonic()
        pending = planner.pending(planned)
        if pending:
            stats = drain_round(None, job, sorted(int(h, 16) for h in pending), None)
            tokens = {int(h, 16): t.encode() for h, t in pending.items() if t}
            settle_marks(job.source.shared(), job.queue, tokens, drained_whole=tokens)
            report.rounds += 1
            report.batch_seconds.append(time.monotonic() - tick)
            report.totals += stats
            report.seconds = time.monotonic() - started
            if progress and stats.entries:
                progress(report)
        planned = pending
        stop.wait(max(0.0, trigger_seconds - (time.monotonic() - tick)))


@contextlib.contextmanager
def _watching(job: DrainJob, run_id: str, report: DrainReport, started: float, progress: ProgressFn | None,
              every: float) -> Iterator[None]:
    """While the block runs, fold the round's progress rows into ``report.live`` and call ``progress`` every
    ``every`` seconds; afterwards remove the rows and reset ``report.live``."""
    stop = threading.Event()

    def watch() -> None:
        with job.source.connect() as conn:
            while not stop.wait(every):
                try:
                    report.live = read_progress(conn, job.queue, run_id)
                except AccumuloError as exc:  # progress is best effort: the drain itself reports failures
                    log.debug("progress of run %s unreadable: %s", run_id, exc)
                    continue
                report.seconds = time.monotonic() - started
                if progress and not stop.is_set():
                    progress(report)

    watcher = threading.Thread(target=watch, name=f"drain-progress-{run_id[:8]}", daemon=True)
    if progress:
        watcher.start()
    server_down = False
    try:
        yield
    except (TimedOutError, DrainError) as exc:
        server_down = isinstance(exc, TimedOutError) or isinstance(exc.__cause__, TimedOutError) or (
            "no tablet server" in str(exc))
        raise
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        report.live = DrainStats()
        if not server_down:  # else it would wait out the bound once more; the rows only hold counters
            with contextlib.suppress(AccumuloError), job.source.connect() as conn:
                clear_progress(conn, job.queue, run_id)


def start_stream(spark: SparkSession, job: DrainJob, checkpoint: str, report_dir: str,
                 trigger_seconds: float = 1.0, available_now: bool = False,
                 max_entries_per_trigger: int | None = None, *, max_bytes_per_trigger: int | None = None,
                 sweep_seconds: float | None = None, check: bool = True) -> StreamingQuery:
    """Start the streaming drain; the caller awaits or stops the returned query. A read limit (entries or
    bytes of row + value per micro-batch, not both) makes a backlog drain in bounded micro-batches."""
    if check:
        preflight(job)
    warm_python_workers(spark, job)
    reader = spark.readStream.format("export-queue-drain").options(**job.sink_options(report_dir))
    if max_entries_per_trigger:
        reader = reader.option("max_entries_per_trigger", str(max_entries_per_trigger))
    if max_bytes_per_trigger:
        reader = reader.option("max_bytes_per_trigger", str(max_bytes_per_trigger))
    if sweep_seconds is not None:
        reader = reader.option("sweep_seconds", str(sweep_seconds))
    writer = (reader.load().writeStream.foreachBatch(_BatchReporter(report_dir))
              .option("checkpointLocation", checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    return writer.start()


@dataclass(frozen=True)
class _BatchReporter:
    """The streaming drain's ``foreachBatch``: runs the micro-batch (its tasks drain their buckets: see
    :mod:`connector.spark.drain_source`) and writes the summed counters as the batch's report."""

    report_dir: str

    def __call__(self, counters: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        total = sum((DrainStats(**row.asDict()) for row in counters.collect()), DrainStats())
        write_report(self.report_dir, total, batch_id, wall_seconds=time.monotonic() - started)


def warm_python_workers(spark: SparkSession, job: DrainJob) -> None:
    """Start the Python workers a streaming drain's tasks will run in, load the connector there and open the
    drain's connections (workers, and what they opened, are reused), so that the first micro-batches of a
    stream do not pay for it: that start-up was the latency tail of a fresh stream. The warm-up is a read of
    a data source (``export-queue-warm-up``), not a ``mapInArrow``: Spark keeps the workers of data-source
    reads apart from those of other Python steps."""
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    (spark.read.format("export-queue-warm-up").options(**job.sink_options(""))
     .option("partitions", str(parallelism)).load().collect())


def collect_stream_reports(report_dir: str, report: DrainReport) -> None:
    """Fold the per-batch reports the stream's commits wrote into ``report``."""
    for r in _read_reports(report_dir):
        report.totals += _stats(r)
        report.rounds += 1
        report.batch_seconds.append(r.get("wall_seconds") or 0.0)
