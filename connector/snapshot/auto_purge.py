"""Purging a stream's tombstones on its own: :class:`BackgroundPurge`, a thread that runs
:func:`~connector.snapshot.purge.purge_destination` every ``period`` seconds for each destination the stream
writes in tombstone mode (its own table and the queue's registered ones), one at a time, with the purge's full
proof and grace. Stopping it (the stream stopped) makes a purge in its grace give up without deleting anything.
A failing purge is logged and counted; it never stops the stream."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass

from connector.accumulo.options import GatewayOptions
from connector.export.tombstones import DeleteMode, checked_mode
from connector.queue import QueueConfig
from connector.queue.destinations import registered_destinations
from connector.queue.settings import DEFAULT_PURGE_EVERY_SECONDS

from .purge import DEFAULT_GRACE_SECONDS, PurgeReport, purge_destination

log = logging.getLogger(__name__)

#: the outcomes a purge run is counted under
OUTCOMES = ("purged", "nothing", "gave_way", "stopped", "failed")


@dataclass(frozen=True)
class PurgeTarget:
    """A destination table a purge may run on: its cluster and table."""

    gateway: GatewayOptions
    table: str


class BackgroundPurge:
    """Every ``period`` seconds (the first after one period), purge each tombstone-mode destination of ``queue``
    (``dest``'s ``dest_table`` and the queue's registered destinations); :meth:`stop` ends it promptly.
    ``outcomes`` counts the runs per destination and outcome; ``reports`` keeps each destination's last report."""

    def __init__(self, source: GatewayOptions, queue: QueueConfig, dest: GatewayOptions, dest_table: str, *,
                 period: float = DEFAULT_PURGE_EVERY_SECONDS, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        self.source, self.queue, self.period, self.grace = source, queue, period, grace
        self.own = PurgeTarget(dest, dest_table)
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.reports: dict[str, PurgeReport] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="background-purge", daemon=True)

    def start(self) -> BackgroundPurge:
        if self.period > 0:
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop it: a purge in its grace gives up without deleting; wait up to ``timeout`` for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.run_once()

    def targets(self) -> list[PurgeTarget]:
        """The stream's destinations: its own table, then the queue's registered ones."""
        with self.source.connect() as a:
            registered = registered_destinations(a, self.queue)
        return [self.own] + [PurgeTarget(d.gateway, d.table) for d in registered]

    def run_once(self) -> None:
        """One round: purge each tombstone-mode destination in turn, counting each outcome."""
        try:
            targets = self.targets()
        except Exception:  # noqa: BLE001 - a purge must never stop the stream
            log.exception("background purge: could not read the queue's destinations")
            self.outcomes[(self.own.gateway.label + "/" + self.own.table, "failed")] += 1
            return
        for target in targets:
            if self._stop.is_set():
                return
            self._purge(target)

    def _purge(self, target: PurgeTarget) -> None:
        name = f"{target.gateway.label}/{target.table}"
        try:
            with self.source.connect() as a, target.gateway.connect() as b:
                if not b.table_exists(target.table) or checked_mode(b, target.table) is not DeleteMode.TOMBSTONE:
                    return  # delete mode writes no tombstones
                report = purge_destination(a, self.queue, b, target.table, target.gateway.label, grace=self.grace,
                                           stop=self._stop, progress=lambda line: log.info("purge %s: %s", name, line))
        except Exception as exc:  # noqa: BLE001 - counted and logged; the stream goes on
            log.warning("background purge of %s failed: %s", name, exc)
            self.outcomes[(name, "failed")] += 1
            return
        self.reports[name] = report
        outcome = ("gave_way" if report.gave_way else "stopped" if report.stopped
                   else "purged" if report.deleted else "nothing")
        self.outcomes[(name, outcome)] += 1
        log.info("background purge: %s", report.describe())
