"""What ``verify`` publishes for a standing check (``--metrics-port``, ``--metrics-file``): the differences the
last complete verify confirmed, by kind, what it repaired and could not, how long it took, when it ended, and
how many runs ended which way.

A run that failed (a cluster did not answer, the destination was refused) changes only the runs counter: the
gauges keep describing the last *complete* verify, and ``..._last_complete_timestamp_seconds`` is when that
ended, so an alert on its age fires whether verify stopped running or kept failing. The gauges are absent
until a verify completed (no misleading 0). Every series carries the labels ``queue`` and ``dest_table``,
never a host or a secret.

A file (``--metrics-file``, for node_exporter's textfile collector, or for a push to a Pushgateway) is read
back when the command starts, so a verify run by cron carries the last complete verify and the counters over
from the run before it; it is replaced whole (atomically) after every run.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from connector.snapshot import VerifyReport

from .common import UsageError
from .metrics import PREFIX, serve_registry

log = logging.getLogger(__name__)

#: the kinds of difference verify confirms (``VerifyReport.count``)
KINDS = ("missing", "unexpected", "different")
#: how a run ended: the label of ``accumulo_export_verify_runs_total``
OUTCOMES = ("clean", "differences", "failed")
#: gauge name (after ``accumulo_export_verify_``) -> help: what the last complete verify found
GAUGES = {
    "in_flight_cells": "differences seen in the first pass only (exported meanwhile): not errors",
    "failed_rows": "rows of A whose snapshot failed (what they imply is unknown)",
    "unrepairable_ranges": "ranges of the destination left untouched because rows of A failed",
    "repaired_cells": "cells the repair wrote (0 without --repair)",
    "unrepaired_cells": "repaired cells that do not show their fix (a newer export got there first)",
    "clean": "1 when the destination held exactly what A's rows imply (exit status 0), else 0",
    "duration_seconds": "wall seconds the last complete verify took",
    "last_complete_timestamp_seconds": "when the last complete verify ended (Unix time): alert on its age",
}


def _name(short: str) -> str:
    return f"{PREFIX}_verify_{short}"


@dataclass
class _Last:
    """What the last complete verify found (the gauges)."""

    differences: dict[str, float]
    gauges: dict[str, float]


def report_values(report: VerifyReport, ended: float) -> _Last:
    """The gauges a complete verify's report gives (``ended``: Unix time it ended)."""
    return _Last({kind: float(report.count(kind)) for kind in KINDS},
                  {"in_flight_cells": report.in_flight, "failed_rows": report.failed_rows,
                   "unrepairable_ranges": report.unrepairable, "repaired_cells": report.repaired,
                   "unrepaired_cells": report.unrepaired, "clean": 1.0 if report.clean else 0.0,
                   "duration_seconds": report.seconds, "last_complete_timestamp_seconds": ended})


class VerifyMetrics:
    """The metrics of the verify runs of one command (one queue and destination table): :meth:`completed` and
    :meth:`failed` after each run, then :meth:`publish` writes the file if there is one. Thread-safe: the
    server's thread collects while the command runs."""

    def __init__(self, table: str, queue: str, dest_table: str, path: str | None = None) -> None:
        self.labels = {"queue": queue, "dest_table": dest_table}
        self.info = {"command": "verify", "table": table, **self.labels}
        self.path = path
        self._lock = threading.Lock()
        self._last: _Last | None = None
        self._runs = dict.fromkeys(OUTCOMES, 0.0)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.registry = CollectorRegistry()
        self.registry.register(self)
        if path is not None:
            self._load(path)

    def serve(self, port: int, addr: str = "0.0.0.0") -> VerifyMetrics:
        """Serve ``/metrics`` on ``port`` until :meth:`close` (a port in use is a ``UsageError`` naming it)."""
        self._server, self._thread = serve_registry(port, self.registry, addr)
        return self

    @property
    def port(self) -> int | None:
        return None if self._server is None else int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    # --- the runs --------------------------------------------------------------------------------------

    def completed(self, report: VerifyReport, ended: float | None = None) -> None:
        """A verify ran to its end: its findings replace the last ones."""
        last = report_values(report, time.time() if ended is None else ended)
        with self._lock:
            self._last = last
            self._runs["clean" if report.clean else "differences"] += 1

    def failed(self) -> None:
        """A verify raised before it ended: counted; the gauges keep the last complete one's."""
        with self._lock:
            self._runs["failed"] += 1

    def publish(self) -> None:
        """Replace the metrics file (if any) with the current values, atomically. A file that cannot be
        written is one warning: the verify's result and exit status do not depend on it."""
        if self.path is None:
            return
        try:
            write_to_textfile(self.path, self.registry)
        except OSError as exc:
            log.warning("verify: could not write the metrics file %s: %s", self.path, exc)

    def _load(self, path: str) -> None:
        """Take the last complete verify and the counters from a file an earlier run wrote (ours only: same
        queue and destination table). A missing file is a first run; an unreadable one starts afresh."""
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            families = list(text_string_to_metric_families(text))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("verify: ignoring the metrics file %s (%s); counting afresh", path, exc)
            return
        differences: dict[str, float] = {}
        gauges: dict[str, float] = {}
        for family in families:
            for s in family.samples:
                labels = dict(s.labels)
                if {k: labels.pop(k, None) for k in self.labels} != self.labels:
                    continue
                if s.name == _name("runs_total") and labels.get("outcome") in self._runs:
                    self._runs[labels["outcome"]] = s.value
                elif s.name == _name("differences") and labels.get("kind") in KINDS:
                    differences[labels["kind"]] = s.value
                elif s.name.startswith(_name("")) and s.name[len(_name("")):] in GAUGES:
                    gauges[s.name[len(_name("")):]] = s.value
        if set(differences) == set(KINDS) and set(gauges) == set(GAUGES):
            self._last = _Last(differences, gauges)

    # --- the Prometheus collector ------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            last, runs = self._last, dict(self._runs)
        names, values = list(self.labels), list(self.labels.values())
        yield InfoMetricFamily(f"{PREFIX}_command", "what this process runs (no hosts, no secrets)", value=self.info)
        counter = CounterMetricFamily(_name("runs"), "verify runs, by how they ended (failed: raised before its "
                                      "end, e.g. a cluster did not answer)", labels=[*names, "outcome"])
        for outcome, n in runs.items():
            counter.add_metric([*values, outcome], n)
        yield counter
        if last is None:
            return  # no complete verify yet: absent rather than a misleading 0
        diffs = GaugeMetricFamily(_name("differences"), "differences the last complete verify confirmed (twice), "
                                  "by kind", labels=[*names, "kind"])
        for kind in KINDS:
            diffs.add_metric([*values, kind], last.differences[kind])
        yield diffs
        for short, help_text in GAUGES.items():
            gauge = GaugeMetricFamily(_name(short), help_text, labels=names)
            gauge.add_metric(values, last.gauges[short])
            yield gauge


def metrics_file_path(path: str) -> str:
    """The absolute path of ``--metrics-file`` (its folder must exist)."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise UsageError(f"--metrics-file {path}: the folder {folder} does not exist")
    return os.path.abspath(path)
