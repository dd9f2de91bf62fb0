"""Jobs: the drain and the combine as rounds over bucket groups, in batch or as a stream, on an engine.

Modules: ``rounds`` (the one runner: rounds, engines' contract, batch and stream loops), ``local`` (the
in-process engine: threads, no Spark), ``stats`` (counters as Arrow rows, for engines that run tasks
elsewhere), ``drain`` (the drain job; its report in ``drain_report``, live progress in ``drain_progress``),
``combine`` (the combine job), ``bootstrap`` (a destination built from A's rows, then checked), ``errors``. The
Spark engine and Spark's streaming drain are in ``connector.spark``; importing this package loads no pyspark::

    report = run_drain(LocalEngine(), DrainJob(source=a, dest=b, queue=config, dest_table="index"))
"""

from .bootstrap import BootstrapJob, BootstrapReport, run_bootstrap
from .combine import LOCAL_COMBINE_MAX_UPDATES, CombineJob, CombineReport, run_combine, stream_combine
from .drain import LOCAL_DRAIN_MAX_ENTRIES, DrainJob, run_drain, stream_drain
from .drain_report import DrainReport
from .errors import CombineError, CombineInputError, DrainError, DrainInputError
from .local import LOCAL_THREADS, LocalEngine
from .rounds import Engine, Round, bucket_groups

__all__ = [
    "BootstrapJob", "BootstrapReport", "CombineError", "CombineInputError", "CombineJob", "CombineReport",
    "DrainError", "DrainInputError", "DrainJob", "DrainReport", "Engine", "LOCAL_COMBINE_MAX_UPDATES",
    "LOCAL_DRAIN_MAX_ENTRIES", "LOCAL_THREADS", "LocalEngine", "Round", "bucket_groups", "run_bootstrap",
    "run_combine", "run_drain", "stream_combine", "stream_drain",
]
