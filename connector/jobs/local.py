"""The in-process engine: a round's bucket groups on a few threads of this process, without Spark.

For small queues and quick streams: no Spark start-up (seconds), no JVM. It imports nothing of pyspark.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from connector.accumulo import TimedOutError

from .rounds import Counters, Round, timed_out_message

S = TypeVar("S", bound=Counters)

#: threads of an in-process round; more would only contend for the GIL and the two servers
LOCAL_THREADS = 2


_running = threading.local()  # in a round's thread: the event set once the round is interrupted


def stop_requested() -> bool:
    """Whether the in-process round this thread runs a group of has been interrupted (Ctrl-C, SIGTERM): long
    work checks it to stop within seconds instead of finishing its group (False outside such a thread)."""
    stopping = getattr(_running, "stopping", None)
    return stopping is not None and stopping.is_set()


class LocalEngine:
    """Runs a round's groups on ``threads`` threads. The first group that fails fails the round: groups not
    started yet are not started (after a timeout each would wait out the bound again), and its error is
    raised (a timeout as the job's error, with what to do). Interrupted (Ctrl-C, or SIGTERM in the CLI), it
    starts no other group, and lets the running ones finish, or stop early where their work asks
    :func:`stop_requested`, before the interrupt goes on."""

    def __init__(self, threads: int = LOCAL_THREADS) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads!r}")
        self.threads = threads

    def __repr__(self) -> str:
        return f"LocalEngine(threads={self.threads})"

    def run(self, round: Round[S]) -> S:
        failing = threading.Event()
        interrupted = threading.Event()
        empty = round.stats()

        def run_group(group_id: int) -> S:
            if failing.is_set():  # another group failed: this round fails, so do not start more work
                return empty
            _running.stopping = interrupted
            try:
                return round.work(group_id, round.groups[group_id])
            except BaseException:
                failing.set()
                raise
            finally:
                _running.stopping = None

        with ThreadPoolExecutor(self.threads, thread_name_prefix="round") as pool:
            futures: list[Future[S]] = []
            try:
                futures += (pool.submit(run_group, g) for g in range(len(round.groups)))
                wait(futures, return_when=FIRST_EXCEPTION)
            except BaseException:  # Ctrl-C or SIGTERM: no other group starts; running ones finish or stop early
                failing.set()
                interrupted.set()
                for f in futures:
                    f.cancel()
                raise
            failed = next((f for f in futures if f.done() and not f.cancelled() and f.exception()), None)
            if failed is not None:
                for f in futures:
                    f.cancel()
                exc = failed.exception()
                assert exc is not None
                if isinstance(exc, TimedOutError):
                    raise round.error(timed_out_message(str(exc))) from exc
                raise exc
            return sum((f.result() for f in futures), empty)
