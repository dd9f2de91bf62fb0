"""What the commands show while they run: the drain's live progress and the combine's rounds.

The seam: a drain calls its progress callback with each ``DrainReport`` (after each round and, while a batch
round runs, every ``PROGRESS_SECONDS`` with the round's live counters; a stream after its micro-batches, with
the queue's depth); a combine with each ``CombineReport`` after each round. The views here only print them;
anything else that wants them (metrics, say) takes the same reports.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich loads only when a drain runs: queue commands start faster without it
    from rich.console import Console

    from connector.jobs import CombineReport, DrainReport

PROGRESS_SECONDS = 2  # seconds between progress reports
PROGRESS_COUNT_LIMIT = 100_000  # a stream's progress report counts the queue up to here (keys only), then "+"


class DrainProgressView:
    """Live drain progress: a rich bar on a terminal, plain unwrapped lines otherwise. Two rates, named: that
    of the last interval ("lately") and the average since the view started ("over the run"; the summary's
    ``entries_per_s`` is the same average over the whole run, start-up included). Called with every
    ``DrainReport`` the drain hands out (and, for a stream, the queue's depth counted up to
    ``PROGRESS_COUNT_LIMIT``)."""

    def __init__(self, console: Console, stream: bool,
                 observer: Callable[[DrainReport], None] | None = None) -> None:
        self.console, self.stream, self.observer = console, stream, observer
        self._last = self._start = (time.monotonic(), 0)
        self._bar: Any = None
        self._waiting_said = False
        if console.is_terminal and not stream:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            from rich.table import Column

            # on a narrow terminal the bar shrinks and the tail of the info is cut, never the count
            self._bar = Progress(
                TextColumn("draining"), BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=5)),
                TextColumn("{task.fields[count]}", table_column=Column(no_wrap=True)),
                TextColumn("{task.fields[info]}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=3)),
                TimeElapsedColumn(table_column=Column(no_wrap=True)), console=console, expand=True)
            self._task = self._bar.add_task("drain", total=None, count="", info="")
            self._bar.start()

    def __call__(self, report: DrainReport, depth: int | None = None) -> None:
        if self.observer is not None:  # --metrics-port
            self.observer(report)
        now, exported = time.monotonic(), report.exported
        then, before = self._last
        rate = (exported - before) / (now - then) if now > then else 0.0
        self._last = (now, exported)
        average = exported / (now - self._start[0]) if now > self._start[0] else 0.0
        depth = report.queue_depth if depth is None else depth
        what = "micro-batches" if self.stream else "rounds"
        shown = f"{depth:,}+" if self.stream and depth >= PROGRESS_COUNT_LIMIT else f"{depth:,}"
        info = (f"{rate:,.0f}/s lately ({average:,.0f}/s over the run), queue depth {shown}, "
                f"dead-lettered {report.dead_lettered:,}, {what} {report.rounds}")
        if self._bar is not None:
            total = report.deleted + depth
            self._bar.update(self._task, completed=report.deleted, total=total,
                             count=f"{report.deleted:,}/{total:,}", info=info)
        elif not self.stream and not report.rounds and not report.deleted:
            # the first round's tasks have not reported anything: Spark is still starting them
            if not self._waiting_said:
                self._waiting_said = True
                print("waiting for the first round's tasks to start ...", file=sys.stderr, flush=True)
        else:  # print, not console.print: a log file must get whole lines, not text wrapped at 80 columns
            print(f"drained {exported:,} entries, {info}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def print_combine_round(report: CombineReport) -> None:
    """One line per combine round, on stderr."""
    h = report.history[-1]
    print(f"round {report.rounds}: {h['updates']} updates combined over {h['buckets']} buckets, "
          f"{h['exports']} exports, {h['failed']} failed keys", file=sys.stderr, flush=True)
