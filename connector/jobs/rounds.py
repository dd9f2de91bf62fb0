"""The runner of the drain and the combine: rounds over bucket groups, in batch or as a stream, on any engine.

Both jobs do their work bucket group by bucket group. A *round* hands each group of the buckets that hold work
to an :class:`Engine` (threads in this process: :class:`~connector.jobs.local.LocalEngine`; Spark tasks:
``connector.spark.engine.SparkEngine``); each task does the group's work where it runs and returns one
counters object, and the round returns their sum. Between rounds the driver decides alone: a batch asks its
:class:`BatchPlan` which buckets come next and whether it is done; a stream asks its :class:`StreamPlan` every
interval until stopped. Either way the runner relays what crashed row-transaction producers left in the
outboxes feeding the job's table (once before a batch; within about ``relay_seconds`` during a stream).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from connector.accumulo.options import GatewayOptions
from connector.transactions.relay import PeriodicRelay, RelayStats, relay_sources

Groups = tuple[tuple[int, ...], ...]


class Counters(Protocol):
    """What a task returns: counters that add up (``DrainStats``, ``CombineStats``)."""

    def __add__(self: C, other: C, /) -> C: ...


C = TypeVar("C", bound=Counters)
S = TypeVar("S", bound=Counters)
S_co = TypeVar("S_co", bound=Counters, covariant=True)


class GroupWork(Protocol[S_co]):
    """What a round's task does with one bucket group, where the task runs (pickled to Spark executors):
    the group's work, returning its counters."""

    def __call__(self, group_id: int, buckets: tuple[int, ...]) -> S_co: ...


@dataclass(frozen=True)
class Round(Generic[S]):
    """One round: ``work`` for each of ``groups``; ``stats`` the counters' type (``work`` returns one,
    the round their sum); ``error`` makes the job's own error from the one-line message of an error of ours
    that failed a task."""

    work: GroupWork[S]
    groups: Groups
    stats: type[S]
    error: Callable[[str], Exception]


class Engine(Protocol):
    """Runs the tasks of a round, one per bucket group, and returns their summed counters. A task that fails
    with an error of ours fails the round with ``round.error(message)``; anything else propagates."""

    def run(self, round: Round[S]) -> S: ...


def bucket_groups(buckets: list[int], per_group: int) -> Groups:
    """Consecutive buckets in groups of ``per_group`` (neighbours share tablets, so a task reads few)."""
    return tuple(tuple(buckets[i:i + per_group]) for i in range(0, len(buckets), per_group))


def timed_out_message(message: str) -> str:
    """The one line for a round that found no tablet server within ``server_wait``: what happened, what to do."""
    return (f"{message}; the drain stopped (--server-wait / server_wait sets the bound); queue entries are "
            "deleted only after their export was flushed, so a rerun once the tablet server serves again "
            "finishes the job")


class RelaySource(Protocol):
    """Where a job's outbox relays look: the cluster, the table its producers feed and its config row."""

    @property
    def source(self) -> GatewayOptions: ...

    def relay_target(self) -> tuple[str, bytes]: ...


class BatchPlan(Protocol[S]):
    """The driver's side of a batch job, between its rounds."""

    def next_round(self) -> list[int] | None:
        """The buckets the next round visits; None: the job is done."""

    def round(self, buckets: list[int]) -> AbstractContextManager[Round[S]]:
        """The round over ``buckets``, and what surrounds it while it runs (live progress, say)."""

    def after_round(self, buckets: list[int], stats: S) -> bool:
        """Fold a round's counters into the report; True: the job is done."""

    def out_of_rounds(self, max_rounds: int) -> None:
        """``max_rounds`` rounds ran and the job is not done: raise, or accept it."""


class StreamPlan(Protocol[S]):
    """The driver's side of a stream, between its rounds."""

    def pending(self) -> list[int]:
        """The buckets with work now (empty: nothing to do this interval)."""

    def round(self, buckets: list[int]) -> AbstractContextManager[Round[S]]: ...

    def after_round(self, buckets: list[int], stats: S) -> None:
        """Settle what the round finished and fold its counters into the report."""

    def idle(self) -> None:
        """Called once per interval, whether a round ran or not."""


#: told of the outbox cells a job's relay moved, as it happens (the job's report counts them)
OnRelay = Callable[[RelayStats], None]


def run_batch_rounds(engine: Engine, job: RelaySource, plan: BatchPlan[S], max_rounds: int,
                     on_relay: OnRelay | None = None) -> int:
    """Relay the job's leftover outboxes once (every cell found, whatever its seq; ``on_relay`` is told what
    it relayed before the first round), then rounds until the plan is done (or ``max_rounds`` ran: then
    ``plan.out_of_rounds``). Returns the outbox cells relayed."""
    table, config_row = job.relay_target()
    with job.source.connect() as conn:
        relay = relay_sources(conn, table, config_row)
    relayed = relay.relayed
    if relayed and on_relay is not None:
        on_relay(relay)
    for _ in range(max_rounds):
        buckets = plan.next_round()
        if buckets is None:
            return relayed
        with plan.round(buckets) as this:
            stats = engine.run(this)
        if plan.after_round(buckets, stats):
            return relayed
    plan.out_of_rounds(max_rounds)
    return relayed


def run_stream_rounds(engine: Engine, job: RelaySource, plan: StreamPlan[S], interval: float,
                      stop: threading.Event, relay_seconds: float, on_relay: OnRelay | None = None) -> int:
    """Every ``interval`` seconds a round over the plan's pending buckets, until ``stop`` is set (or Ctrl-C),
    with a relay of leftover outboxes running beside it (on a thread of its own, which tells ``on_relay`` of
    each pass that relayed something). Returns the outbox cells relayed."""
    table, config_row = job.relay_target()
    relay = PeriodicRelay(job.source.shared, table, config_row, relay_seconds, on_relay=on_relay)
    relay.start()
    with contextlib.closing(relay):
        while not stop.is_set():
            began = time.monotonic()
            buckets = plan.pending()
            if buckets:
                with plan.round(buckets) as this:
                    stats = engine.run(this)
                plan.after_round(buckets, stats)
            plan.idle()
            stop.wait(max(0.0, interval - (time.monotonic() - began)))
    return relay.stats.relayed


@contextlib.contextmanager
def plain_round(this: Round[Any]) -> Iterator[Round[Any]]:
    """A round with nothing around it."""
    yield this
