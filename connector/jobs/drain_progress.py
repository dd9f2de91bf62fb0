"""Live progress of a batch drain's round: its tasks keep running counters in progress rows of the queue
(:func:`connector.queue.progress.read_progress`); the driver reads them while the round runs."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

from connector.accumulo import AccumuloError, TimedOutError
from connector.accumulo.options import GatewayOptions
from connector.queue import DrainStats, QueueConfig
from connector.queue.progress import clear_progress, read_progress

from .drain_report import DrainReport, ProgressFn
from .errors import DrainError

log = logging.getLogger(__name__)


@contextlib.contextmanager
def watching(source: GatewayOptions, queue: QueueConfig, run_id: str, report: DrainReport, started: float,
             progress: ProgressFn | None, every: float) -> Iterator[None]:
    """While the block runs, fold the round's progress rows (of ``queue`` on ``source``) into ``report.live``
    and call ``progress`` every ``every`` seconds; afterwards remove the rows and reset ``report.live``."""
    stop = threading.Event()

    def watch() -> None:
        with source.connect() as conn:
            while not stop.wait(every):
                try:
                    report.live = read_progress(conn, queue, run_id)
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
            with contextlib.suppress(AccumuloError), source.connect() as conn:
                clear_progress(conn, queue, run_id)
