"""Where a command's rounds run, chosen the same way by every command that runs them (``drain``, ``combine run``,
``bootstrap``): ``--engine``, ``--master`` and ``--metrics-port`` are declared once, here (:class:`EngineChoice`),
and so is the ``auto`` rule and how a Spark session is started, kept quiet and stopped."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from connector.errors import ConnectorError
from connector.jobs import Engine, LocalEngine
from connector.settings import Settings, port, setting

from .common import UsageError, spark_output

if TYPE_CHECKING:  # Spark loads only when a command runs with it: local runs start faster without it
    from pyspark.sql import SparkSession

ENGINES = ("auto", "spark", "local")


@dataclass(frozen=True)
class EngineChoice(Settings):
    """How a command runs its rounds: on threads of its own process or as Spark tasks, and whether it serves
    metrics meanwhile."""

    engine: str = setting("auto", "where the tasks run: local (threads of this process, no Spark: it starts in "
                                  "about a second), spark (Spark tasks), auto (local for a batch run of a small "
                                  "amount of work when no Spark master is given by --master, SPARK_MASTER or "
                                  "spark-submit, since Spark's start-up would dominate; else Spark)",
                          choices=ENGINES, option=None)
    master: str | None = setting(None, "Spark master (default: SPARK_MASTER, else what spark-submit was given, else "
                                       "local[2]); with --engine auto it means Spark", option=None, metavar="URL")
    metrics_port: int | None = setting(None, "serve Prometheus metrics of the run (its counters, and the lag of "
                                             "the queue it drains or combines) on this port while the command runs "
                                             "(docs/operations.md: Metrics)", parse=port, option=None, metavar="PORT")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.engine == "local" and self.master:
            raise UsageError("--master applies to Spark, not to --engine local")

    def local(self, *, stream: bool = False, small: Callable[[], bool] | None = None) -> bool:
        """Whether the command runs in its own process: ``--engine local``; with ``auto``, a batch run (not a
        ``stream``) when no Spark master is given and ``small()`` (the size of the work, looked up only then)
        says Spark's start-up would dominate."""
        if self.engine != "auto":
            return self.engine == "local"
        from connector.spark.session import submitted

        if stream or self.master or os.environ.get("SPARK_MASTER") or submitted():
            return False
        return small is None or small()

    @contextlib.contextmanager
    def running(self, local: bool, app: str, verbose: bool) -> Iterator[tuple[Engine, SparkSession | None]]:
        """The engine to run on, and the Spark session behind it (None when ``local``). A Spark session prints
        into a log file, not the terminal (``verbose``: everything shows), and is stopped when the block ends;
        an error of ours raised in the block names that log, which is then kept."""
        if local:
            yield LocalEngine(), None
            return
        from connector.spark import spark_session
        from connector.spark.engine import SparkEngine

        with spark_output(verbose=verbose) as spark_log:
            master = self.master or os.environ.get("SPARK_MASTER") or "local[2]"
            print(f"starting Spark ({master}) ...", file=sys.stderr, flush=True)
            spark = spark_session(self.master, app)
            interrupted = False
            try:
                yield SparkEngine(spark), spark
            except ConnectorError as exc:
                if spark_log:
                    spark_log.keep = True
                    exc.add_note(f"Spark's log: {spark_log.path}")
                raise
            except KeyboardInterrupt:
                interrupted = True
                raise
            finally:
                try:
                    spark.stop()
                except Exception:
                    # Ctrl-C or SIGTERM cut a py4j call short, which breaks Spark's gateway connection: the stop
                    # then fails, and must not hide that the command was stopped
                    if not interrupted:
                        raise
