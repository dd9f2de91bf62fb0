"""``--metrics-port``: a drain's or a combine's counters, queue depth and lag in the Prometheus text format.

The metrics read what the command already has: the progress reports (a ``DrainReport`` or
``CombineReport``, whose counters the tasks sent the way progress always travels: progress rows, batch
reports, task results), and a lag scan of the queue on a thread of its own. Nothing else runs on the
executors. The server (``prometheus_client``, a thread) serves ``/metrics`` until :meth:`Metrics.close`,
which the command calls when it ends, batch or stream. Labels carry bucket numbers and the names of the
queue and tables, never a host or a secret.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from connector.accumulo import AccumuloSecurityError, Connection
from connector.queue.compaction import QueueFiles, compactions_requested
from connector.queue.status import QueueLag
from connector.transactions.watermark import WAITING_KINDS

from .common import UsageError

if TYPE_CHECKING:
    from connector.jobs import CombineJob, CombineReport, DrainJob, DrainReport
    from connector.jobs.bootstrap import BootstrapJob
    from connector.transactions import Watermark

log = logging.getLogger(__name__)

PREFIX = "accumulo_export"
#: buckets with their own lag series: the N that lag most (the rest are in the max and the count)
TOP_BUCKETS = 10
#: a lag scan runs at most this often, and takes at most LAG_SHARE of the time (a big backlog: less often)
LAG_SECONDS = 2.0
LAG_SHARE = 0.1
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

#: counter name -> help; what each command publishes (listed in docs/operations.md: Metrics)
DRAIN_COUNTERS = {
    "entries_read": "queue entries read by the drain",
    "entries_exported": "queue entries exported to the destination table",
    "entries_deleted": "queue entries deleted after their export (or dead letter) was durable",
    "dead_letters": "queue entries moved to the dead-letter range",
    "cells_written": "cells written on the destination (puts, deletes, tombstones)",
    "bytes_read": "bytes (row + value) of the queue entries read",
    "batches": "rounds (batch) or micro-batches (stream) finished",
    "outbox_cells_relayed": "outbox cells crashed row-transaction producers left, relayed into the queue",
    "queue_compactions": "compactions of the queue's tablets this process asked Accumulo for (to drop the delete "
                         "markers drained entries leave)",
}
COMBINE_COUNTERS = {
    "updates_combined": "queued updates combined (each exactly once)",
    "entries_exported": "exports relayed into the export queue",
    "keys_changed": "keys whose value changed",
    "keys_deleted": "keys whose value was removed",
    "keys_failed": "keys left queued because of an error (retried next round)",
    "conflicts": "lost conditions, re-read and retried",
    "batches": "rounds finished",
    "outbox_cells_relayed": "outbox cells crashed row-transaction producers left, relayed into the combine queue",
}


#: counters read again from the last report at every scrape: a thread of the job (the outbox relay) adds to
#: them between progress reports, and each is one number that only grows
LIVE_COUNTERS = ("outbox_cells_relayed", "queue_compactions")
BOOTSTRAP_COUNTERS = {
    "ranges_written": "tablets of A whose implied cells are written on the destination (this run and earlier ones)",
    "rows_read": "rows of A read whole and snapshotted",
    "cells_written": "cells written on the destination",
    "batches": "tablets of A finished",
}


class Metrics:
    """The metrics of one command: :meth:`observe` takes each progress report, a thread refreshes the lag.
    A ``Metrics`` made without a port is off: observing costs nothing and nothing is served. The ``live``
    counters are read again from the last report observed at every scrape."""

    def __init__(self, command: str, labels: Mapping[str, str], counters: Mapping[str, str],
                 read: Callable[[Any], Mapping[str, float]], lag: Callable[[Connection], QueueLag] | None = None,
                 connect: Callable[[], Connection] | None = None, top: int = TOP_BUCKETS,
                 live: Sequence[str] = (), watermarks: Watermarks | None = None,
                 files: Callable[[Connection], QueueFiles] | None = None) -> None:
        self.command, self.labels, self.counter_help, self._read = command, dict(labels), counters, read
        self._lag_fn, self._connect, self.top = lag, connect, top
        self._files_fn = files  # the queue's files (dead keys), read after each lag scan
        self._dead_keys: int | None = None
        self._live = tuple(name for name in live if name in counters)
        self._report: Any = None  # the last report observed (the live counters are read from it)
        self._lock = threading.Lock()
        self._counts: dict[str, float] = dict.fromkeys(counters, 0.0)
        self._seen_batches = 0
        self._lag: QueueLag | None = None
        self._lag_at = 0.0  # when the last lag scan ended (seconds since the epoch)
        self._shown: dict[int, float] = {}  # bucket -> lag, the bounded set of per-bucket series
        self._watermarks_fn = watermarks
        self._marks: dict[str, Watermark | None] = {}  # destination -> what waits for it (None: not built)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: Any = None
        self.registry = CollectorRegistry()
        self.durations = Histogram(f"{PREFIX}_batch_duration_seconds", "wall seconds of a round or micro-batch",
                                   buckets=DURATION_BUCKETS, registry=self.registry)
        self.registry.register(self)

    # --- serving -------------------------------------------------------------------------------------

    def serve(self, port: int, addr: str = "0.0.0.0") -> Metrics:
        """Listen on ``port`` (all interfaces) and start the lag scans. A port in use is a ``UsageError``
        naming it."""
        self._server, thread = serve_registry(port, self.registry, addr)
        self._threads.append(thread)
        if self._lag_fn is not None and self._connect is not None:
            lagger = threading.Thread(target=self._scan_lag, name="metrics-lag", daemon=True)
            lagger.start()
            self._threads.append(lagger)
        return self

    @property
    def port(self) -> int | None:
        """The port served on (None when off)."""
        return None if self._server is None else int(self._server.server_port)

    def close(self) -> None:
        """Stop serving and scanning (the command is ending)."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for thread in self._threads:  # a lag scan in progress is not waited for long: it only reads
            thread.join(timeout=2)
        self._threads.clear()

    # --- what the command reports --------------------------------------------------------------------

    def observe(self, report: Any) -> None:
        """Take a progress report (``DrainReport`` or ``CombineReport``): counters and new batch durations."""
        if self._server is None:
            return
        values = self._read(report)
        batches = int(values["batches"])
        durations = _new_durations(report, batches - self._seen_batches)
        with self._lock:
            for name, value in values.items():  # a report is cumulative; never let a counter go back
                self._counts[name] = max(self._counts[name], float(value))
            self._seen_batches = max(self._seen_batches, batches)
            self._report = report
        for seconds in durations:
            self.durations.observe(seconds)

    def _scan_lag(self) -> None:
        assert self._lag_fn is not None and self._connect is not None
        conn: Connection | None = None
        while not self._stop.is_set():
            wait = LAG_SECONDS
            try:
                conn = conn or self._connect()
                started = time.monotonic()
                lag = self._lag_fn(conn)
                self._apply_lag(lag)
                self._scan_files(conn, lag)
                if self._watermarks_fn is not None:
                    marks = self._watermarks_fn(conn)
                    with self._lock:
                        self._marks = marks
                spent = time.monotonic() - started
                wait = max(LAG_SECONDS, spent * (1 - LAG_SHARE) / LAG_SHARE)
            except Exception as exc:  # noqa: BLE001 - metrics are best effort; the command reports failures
                log.warning("metrics: lag scan failed: %s", exc)
                if conn is not None:
                    conn.close()
                conn = None
            self._stop.wait(wait)
        if conn is not None:
            conn.close()

    def _scan_files(self, conn: Connection, lag: QueueLag) -> None:
        """The dead keys in the queue's files (a short scan of Accumulo's metadata); a gateway user who may not
        read it loses the gauge, with one warning."""
        if self._files_fn is None:
            return
        try:
            dead = self._files_fn(conn).dead_keys(lag.entries)
        except AccumuloSecurityError as exc:
            log.warning("metrics: no queue_dead_keys: the gateway's user may not read accumulo.metadata (%s)", exc)
            self._files_fn = None
            return
        with self._lock:
            self._dead_keys = dead

    def _apply_lag(self, lag: QueueLag) -> None:
        lags = lag.lag_seconds()
        shown = dict(sorted(lags.items(), key=lambda kv: (-kv[1], kv[0]))[:self.top])
        for bucket in self._shown:  # a bucket that emptied shows 0 until displaced: its graph falls to 0
            if len(shown) >= self.top:
                break
            if bucket not in lags:
                shown[bucket] = 0.0
        with self._lock:
            self._lag, self._lag_at, self._shown = lag, time.time(), shown

    # --- the Prometheus collector --------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if self._report is not None and self._live:
                values = self._read(self._report)
                for name in self._live:
                    self._counts[name] = max(self._counts[name], float(values[name]))
            counts, lag, lag_at, shown = dict(self._counts), self._lag, self._lag_at, dict(self._shown)
            dead_keys = self._dead_keys
            marks = dict(self._marks)
        yield from self._watermark_metrics(marks)
        yield InfoMetricFamily(f"{PREFIX}_command", "what this process runs (no hosts, no secrets)",
                               value={"command": self.command, **self.labels})
        for name, value in counts.items():
            yield CounterMetricFamily(f"{PREFIX}_{name}", self.counter_help[name], value=value)
        if lag is None:
            return  # no scan yet: absent rather than a misleading 0
        per_bucket = GaugeMetricFamily(f"{PREFIX}_bucket_lag_seconds", f"age of the oldest waiting entry of the "
                                       f"{self.top} buckets that lag most", labels=["bucket"])
        for bucket, seconds in sorted(shown.items()):
            per_bucket.add_metric([str(bucket)], seconds)
        yield per_bucket
        lags = lag.lag_seconds(lag_at)
        yield GaugeMetricFamily(f"{PREFIX}_lag_seconds_max", "age of the oldest waiting entry (0: none waits)",
                                value=max(lags.values(), default=0.0))
        yield GaugeMetricFamily(f"{PREFIX}_lagging_buckets", "buckets with waiting entries", value=len(lags))
        yield GaugeMetricFamily(f"{PREFIX}_queue_depth", "entries (drain) or updates (combine) waiting",
                                value=lag.entries)
        yield GaugeMetricFamily(f"{PREFIX}_lag_scan_seconds", "wall seconds the last lag scan took",
                                value=lag.scan_seconds)
        yield GaugeMetricFamily(f"{PREFIX}_lag_scan_timestamp_seconds", "when the last lag scan ended",
                                value=lag_at)
        if dead_keys is not None:
            yield GaugeMetricFamily(f"{PREFIX}_queue_dead_keys", "keys in the files of the queue's tablets that "
                                    "are not waiting entries (delete markers until a compaction drops them)",
                                    value=dead_keys)

    def _watermark_metrics(self, marks: Mapping[str, Watermark | None]) -> Iterator[Metric]:
        """Per destination: the watermark (every commit up to it is there), how far it is behind the clock, and
        whether a bootstrap is building it (then it has no watermark yet)."""
        if not marks:
            return
        queue = self.labels.get("queue", "")
        seq = GaugeMetricFamily(f"{PREFIX}_destination_watermark_seq", "every commit with a seq up to this one "
                                "is on the destination, as the last computation found (when nothing waited: this "
                                "host's clock in µs when it began)", labels=["queue", "destination"])
        age = GaugeMetricFamily(f"{PREFIX}_destination_watermark_age_seconds", "this host's clock minus the "
                                "watermark's seq (µs of the producers' clocks); 0 when nothing waits",
                                labels=["queue", "destination"])
        building = GaugeMetricFamily(f"{PREFIX}_destination_bootstrapping", "1 while the destination is not built: "
                                     "registered and no bootstrap finished since, or a bootstrap builds it (no "
                                     "watermark then)", labels=["queue", "destination"])
        now_us = time.time() * 1e6
        for name, mark in sorted(marks.items()):
            building.add_metric([queue, name], 0 if mark is not None else 1)
            if mark is None:
                continue
            seq.add_metric([queue, name], gauge_seq(mark))
            age.add_metric([queue, name], 0.0 if mark.seq is None else max(0.0, now_us - mark.seq) / 1e6)
        yield seq
        yield age
        yield building


#: destination name -> what waits for it (None: a bootstrap is building it), scanned by the metrics' thread
Watermarks = Callable[[Connection], dict[str, "Watermark | None"]]


def gauge_seq(mark: Watermark) -> int:
    """What the watermark gauge serves for a computation: its watermark, or when nothing waited the time it began
    (µs, this host's clock, as the producers' seqs): every commit visible then was on the destinations."""
    return mark.started_us if mark.seq is None else mark.seq


def drain_watermarks(job: DrainJob) -> Watermarks:
    """What waits for each destination of a drain: its own and every registered one (one computation for all; a
    destination not built yet, :attr:`Watermark.unbuilt`, has none)."""
    from connector.queue.destinations import registered_destinations
    from connector.snapshot.state import destination_id
    from connector.transactions import queue_watermark

    # the bootstrap state names a destination by its cluster's name or its gateway; a label never names a host
    primary = destination_id(job.dest.label, job.dest_table)
    label = destination_id(job.dest.name, job.dest_table) if job.dest.name else job.dest_table

    def scan(conn: Connection) -> dict[str, Watermark | None]:
        mark = queue_watermark(conn, job.queue)
        unbuilt = {u.destination for u in mark.unbuilt}
        names = {primary: label, **{d.name: d.name for d in registered_destinations(conn, job.queue)}}
        return {shown: (None if name in unbuilt else mark) for name, shown in names.items()}

    return scan


def serve_registry(port: int, registry: CollectorRegistry, addr: str = "0.0.0.0") -> tuple[Any, threading.Thread]:
    """Serve ``registry`` on ``/metrics`` at ``port`` from a thread; the server and its thread. A port in use
    is a ``UsageError`` naming it."""
    try:
        return start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        why = ("is in use (another drain's or combine's metrics?): choose another port"
               if exc.errno == errno.EADDRINUSE else f"cannot be opened: {exc.strerror or exc}")
        raise UsageError(f"--metrics-port {port}: the port {why}; nothing was run") from None


def _new_durations(report: Any, new: int) -> list[float]:
    if new <= 0:
        return []
    recent = getattr(report, "batch_seconds", None)
    if recent is not None:  # a DrainReport
        return list(recent)[-new:]
    return [h["seconds"] for h in report.history[-new:] if "seconds" in h]  # a CombineReport


def _drain_counts(r: DrainReport) -> dict[str, float]:
    return {"entries_read": r.entries, "entries_exported": r.exported, "entries_deleted": r.deleted,
            "dead_letters": r.dead_lettered, "cells_written": r.totals.cells + r.live.cells,
            "bytes_read": r.totals.bytes + r.live.bytes, "batches": r.rounds, "outbox_cells_relayed": r.relayed,
            "queue_compactions": compactions_requested()}


def _combine_counts(r: CombineReport) -> dict[str, float]:
    t = r.totals
    return {"updates_combined": t.updates, "entries_exported": t.exports + t.leftovers, "keys_changed": t.changed,
            "keys_deleted": t.deleted, "keys_failed": t.failed, "conflicts": t.conflicts, "batches": r.rounds,
            "outbox_cells_relayed": r.relayed}


def drain_metrics(port: int | None, job: DrainJob) -> Metrics:
    """The metrics of a drain, served on ``port`` from now on (off when ``port`` is None)."""
    from connector.queue.compaction import queue_files
    from connector.queue.status import queue_lag

    metrics = Metrics("drain", {"table": job.queue.table, "queue": job.queue.qid, "dest_table": job.dest_table},
                      DRAIN_COUNTERS, _drain_counts, lambda conn: queue_lag(conn, job.queue), job.source.connect,
                      live=LIVE_COUNTERS, watermarks=drain_watermarks(job),
                      files=lambda conn: queue_files(conn, job.queue))
    return metrics if port is None else metrics.serve(port)


def combine_metrics(port: int | None, job: CombineJob) -> Metrics:
    """The metrics of a combine run, served on ``port`` from now on (off when ``port`` is None)."""
    from connector.combine.status import combine_lag

    metrics = Metrics("combine", {"table": job.combine.table, "queue": job.combine.cid}, COMBINE_COUNTERS,
                      _combine_counts, lambda conn: combine_lag(conn, job.combine), job.source.connect,
                      live=LIVE_COUNTERS)
    return metrics if port is None else metrics.serve(port)


@dataclass
class BootstrapProgress:
    """What a bootstrap has done so far, as its state rows say (read by :func:`bootstrap_metrics`' caller)."""

    ranges_written: int = 0
    rows_read: int = 0
    cells_written: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


def _bootstrap_counts(p: BootstrapProgress) -> dict[str, float]:
    return {"ranges_written": p.ranges_written, "rows_read": p.rows_read, "cells_written": p.cells_written,
            "batches": p.ranges_written}


def bootstrap_metrics(port: int | None, job: BootstrapJob) -> Metrics:
    """The metrics of a bootstrap, served on ``port`` from now on (off when ``port`` is None); the caller feeds
    it :class:`BootstrapProgress` reports."""
    metrics = Metrics("bootstrap", {"table": job.table, "queue": job.queue.qid, "dest_table": job.dest_table},
                      BOOTSTRAP_COUNTERS, _bootstrap_counts)
    return metrics if port is None else metrics.serve(port)


class PurgeMetrics:
    """A Prometheus collector of a background purger (:class:`~connector.snapshot.auto_purge.BackgroundPurge`):
    its runs by outcome, and what each destination's last purge found: its tombstones, the oldest one's age, how
    long the purge horizon (the lowest seq still waiting for the queue's destinations) has been pinned there, and
    per kind of what waits (an outbox cell, a queue entry, a dead letter) the age of its lowest seq.
    Ages are this host's clock minus a seq: the seqs are µs of the producers' clocks."""

    def __init__(self, purger: Any) -> None:
        self.purger = purger

    def collect(self) -> Iterator[Metric]:
        runs = CounterMetricFamily(f"{PREFIX}_purge_runs", "background purges of a destination's tombstones, by "
                                   "outcome (purged, nothing, gave_way, stopped, failed)",
                                   labels=["destination", "outcome"])
        for (name, outcome), count in sorted(dict(self.purger.outcomes).items()):
            runs.add_metric([name, outcome], count)
        yield runs
        tombstones = GaugeMetricFamily(f"{PREFIX}_destination_tombstones", "tombstones the destination's last purge "
                                       "listed", labels=["destination"])
        oldest = GaugeMetricFamily(f"{PREFIX}_destination_oldest_tombstone_age_seconds", "this host's clock minus "
                                   "the lowest tombstone timestamp the last purge listed (a tombstone's timestamp is "
                                   "its commit's seq: µs of the producer's clock)", labels=["destination"])
        pinned = GaugeMetricFamily(f"{PREFIX}_purge_horizon_age_seconds", "this host's clock minus the lowest seq "
                                   "still waiting (outbox cell, queue entry or dead letter) when the last purge read "
                                   "it: tombstones above it cannot be purged; 0 when nothing waited",
                                   labels=["destination"])
        pin_age = GaugeMetricFamily(f"{PREFIX}_purge_horizon_pin_age_seconds", "what pins the purge horizon, per "
                                    "kind (outbox: an outbox cell not relayed, queue_entry: a queue entry not "
                                    "drained, dead_letter): this host's clock minus the lowest seq of that kind "
                                    "still waiting when the last purge read it; 0 when nothing of it waited",
                                    labels=["destination", "kind"])
        now_us = time.time() * 1e6
        for name, report in sorted(dict(self.purger.reports).items()):
            tombstones.add_metric([name], report.tombstones)
            if report.oldest_tombstone is not None:
                oldest.add_metric([name], max(0.0, now_us - report.oldest_tombstone) / 1e6)
            lowest = report.horizon
            pinned.add_metric([name], 0.0 if lowest is None else max(0.0, now_us - lowest) / 1e6)
            pins = report.pins
            for kind in WAITING_KINDS:
                pin_age.add_metric([name, kind], max(0.0, now_us - pins[kind]) / 1e6 if kind in pins else 0.0)
        yield tombstones
        yield oldest
        yield pinned
        yield pin_age
