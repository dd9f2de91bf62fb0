"""The combine job with Spark: :mod:`connector.jobs.combine` on the Spark engine (a round is one Spark job,
one task per group of buckets with work)."""

from __future__ import annotations

import threading

from pyspark.sql import SparkSession

from connector.jobs import combine as jobs
from connector.jobs.combine import CombineJob, CombineReport, ProgressFn, preflight
from connector.jobs.errors import CombineError
from connector.transactions.relay import DEFAULT_RELAY_SECONDS

from .engine import SparkEngine

__all__ = ["CombineError", "CombineJob", "CombineReport", "preflight", "run_combine", "run_stream"]


def run_combine(spark: SparkSession, job: CombineJob, progress: ProgressFn | None = None,
                max_rounds: int = 100, *, check: bool = True) -> CombineReport:
    """Rounds of Spark jobs until nothing is queued (see :func:`connector.jobs.run_combine`)."""
    return jobs.run_combine(SparkEngine(spark), job, progress, max_rounds, check=check)


def run_stream(spark: SparkSession, job: CombineJob, interval: float = 1.0, stop: threading.Event | None = None,
               progress: ProgressFn | None = None, *, check: bool = True,
               relay_seconds: float = DEFAULT_RELAY_SECONDS) -> CombineReport:
    """A Spark job every ``interval`` seconds over the buckets with work (see :func:`connector.jobs.stream_combine`)."""
    return jobs.stream_combine(SparkEngine(spark), job, interval, stop, progress, check=check,
                               relay_seconds=relay_seconds)
