"""The Spark engine: a round's bucket groups as the tasks of one Spark job.

The job is ``spark.range(groups).mapInArrow(...)``, one partition per group: each task runs the round's work on
its group in its Python worker and yields one row of counters, so Spark carries bucket groups in and
counters out, never entries. A task that fails with an error of ours fails the round with that error's one
line (recovered from Spark's trace), not the trace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession

from connector.accumulo import TimedOutError
from connector.errors import error_names
from connector.jobs import DrainError
from connector.jobs.rounds import Counters, Groups, GroupWork, Round, timed_out_message
from connector.jobs.stats import stats_batch, stats_ddl, stats_from_row

from .worker_heap import freeze_worker_heap

S = TypeVar("S", bound=Counters)


def _task_errors(names: set[str]) -> re.Pattern[str]:
    """An error of ours as a Spark task's trace shows it (``[connector.module.]ClassName: message`` on a line of
    its own), for the class names given: ours (``ConnectorError``s) carry the one-line message the user
    needs, not the trace."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"^(?:connector\.[\w.]+\.)?({alternatives}): (.+)$", re.MULTILINE)


def task_message(exc: BaseException) -> str | None:
    """The one-line message of the error of ours that failed a Spark job (None if it is not ours); a timeout
    says what to do. Ours are known by the names of the error classes themselves (``error_names()``)."""
    found = list(_task_errors(error_names()).finditer(str(exc)))
    if not found:
        return None
    if found[-1].group(1) == TimedOutError.__name__:
        return timed_out_message(found[-1].group(2).strip())
    return found[-1].group(2).strip()


def task_error(exc: BaseException) -> DrainError | None:
    """The error of ours that failed a Spark job, as a one-line ``DrainError`` (None if it is not ours)."""
    message = task_message(exc)
    return None if message is None else DrainError(message)


@dataclass(frozen=True)
class _GroupTasks:
    """The function of a round's tasks (pickled to the executors): for each bucket group id in its input, the
    round's work on that group, as one row of counters."""

    work: GroupWork[Any]
    groups: Groups

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        for batch in batches:
            for group_id in batch.column(0).to_pylist():
                yield stats_batch(self.work(group_id, self.groups[group_id]))


class SparkEngine:
    """Runs each round as one Spark job on ``spark``, one task per bucket group."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def run(self, round: Round[S]) -> S:
        n = len(round.groups)
        ids = self.spark.range(n, numPartitions=n)
        try:
            rows = ids.mapInArrow(_GroupTasks(round.work, round.groups), stats_ddl(round.stats)).collect()
        except Exception as exc:
            message = task_message(exc)
            if message is None:
                raise
            raise round.error(message) from exc
        return sum((stats_from_row(round.stats, row.asDict()) for row in rows), round.stats())
