"""What the running PySpark offers beyond 4.0, found once by import (the only place that asks).

The connector supports PySpark 4.0 through 4.3. Three Python data source features came later (or, for one,
come only after 4.3); each is used where present and replaced (or refused in one line) where not:

- ``DataSourceStreamArrowWriter`` (4.1): the streaming sink takes Arrow batches whole. Before: the row-based
  ``DataSourceStreamWriter``, whose rows the sink turns back into Arrow batches (:data:`STREAM_ARROW_WRITER`).
- filter pushdown that Spark keeps to one scan: the ``accumulo`` source's option ``pushdown``. Spark 4.1 hands a
  reader its filters (``Filter``, ``DataSourceReader.pushFilters``), but up to 4.3 its JVM stores what the
  pushdown planning returned (the pickled read function, reader included, and the pickled partitions) on the
  data source object, which every scan of the DataFrame shares (``PythonScanBuilder.pushFilters`` calls
  ``PythonDataSourceV2.setReadInfo``; ``PythonBatch`` takes ``getOrCreateReadInfo``): a later query of the
  DataFrame that pushes no filter runs no Python planning and reads the last query's narrowed partitions, and
  the two filtered scans of one union both read the last one planned. No Python code runs that could tell
  those scans apart, so narrowing is safe only where Spark keeps the planning to its scan, which upstream did
  together with limit pushdown (SPARK-58551, ``DataSourceReader.pushLimit``, Spark 5.0;
  ``tests/test_spark_read.py`` checks the running Spark behaves as this flag says). Before: refused when the
  source is created (:func:`require`), naming the options that narrow a read safely.
- admission control (4.2, ``pyspark.sql.streaming.datasource``): ``latestOffset(start, limit)``, Spark's read
  limits and ``SupportsTriggerAvailableNow``. Before: Spark calls ``latestOffset()`` without arguments, so the
  stream reader keeps its own last offset and applies its own read-limit options; ``availableNow`` is Spark's
  fallback there, one micro-batch, which reads every bucket's entries present when it is planned (the
  ``available_now`` option, set by :func:`connector.spark.drain_job.start_stream`). The stand-ins below have
  the names and fields of Spark's classes, so the reader's code is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyspark
import pyspark.sql.datasource as _datasource

from .options import OptionError

#: feature -> the oldest PySpark that has it (docs/spark.md: Spark versions)
NEEDS = {
    "stream_arrow_writer": "4.1",
    "filter_pushdown": "5.0",
    "admission_control": "4.2",
}

#: PySpark's ``DataSourceStreamArrowWriter`` (4.1+), else None
STREAM_ARROW_WRITER: type | None = getattr(_datasource, "DataSourceStreamArrowWriter", None)
#: Spark hands a reader its filters (4.1+: ``Filter`` and ``pushFilters``); ``table_filters`` needs these classes
FILTER_CLASSES: bool = hasattr(_datasource, "Filter")
#: ... and keeps what the pushdown planned to that one scan (see the module's documentation)
FILTER_PUSHDOWN: bool = FILTER_CLASSES and hasattr(_datasource.DataSourceReader, "pushLimit")
#: why a feature is refused on a Spark that has its parts but not their safe use
WHY = {} if FILTER_PUSHDOWN or not FILTER_CLASSES else {
    "filter_pushdown": "this Spark gives every scan of a DataFrame the partitions planned for the last query of it "
                       "that pushed filters; narrow the read with the options 'start_row', 'end_row', 'prefix' or "
                       "'columns' instead"}

if TYPE_CHECKING:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL: bool
else:
    try:  # 4.2+: Spark's admission control for Python streaming sources
        from pyspark.sql.streaming.datasource import (
            ReadAllAvailable,
            ReadLimit,
            ReadMaxBytes,
            ReadMaxRows,
            SupportsTriggerAvailableNow,
        )

        ADMISSION_CONTROL = True
    except ImportError:  # 4.0, 4.1: stand-ins with the same names and fields, which only this package builds
        ADMISSION_CONTROL = False

        class ReadLimit:
            """Stand-in for Spark 4.2's ``ReadLimit``: the reader's own read limit."""

        @dataclass
        class ReadAllAvailable(ReadLimit):
            pass

        @dataclass
        class ReadMaxRows(ReadLimit):
            max_rows: int

        @dataclass
        class ReadMaxBytes(ReadLimit):
            max_bytes: int

        class SupportsTriggerAvailableNow:
            """Stand-in for Spark 4.2's mixin: Spark before 4.2 never calls ``prepareForTriggerAvailableNow``."""

            def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
                raise NotImplementedError


def available(feature: str) -> bool:
    """Whether the running PySpark has ``feature`` (a key of :data:`NEEDS`)."""
    return {"stream_arrow_writer": STREAM_ARROW_WRITER is not None, "filter_pushdown": FILTER_PUSHDOWN,
            "admission_control": ADMISSION_CONTROL}[feature]


def require(feature: str, what: str) -> None:
    """Raise a one-line :class:`OptionError` when the running PySpark lacks ``feature``; ``what`` is what
    needs it ("option 'pushdown' (filter pushdown of Python data sources)")."""
    if not available(feature):
        why = f": {WHY[feature]}" if feature in WHY else ""
        raise OptionError(f"{what} needs Spark {NEEDS[feature]} or newer; this is PySpark {pyspark.__version__}{why}")


def summary() -> dict[str, Any]:
    """PySpark's version and which of the later features it has (for logs and ``--version``-like output)."""
    return {"pyspark": pyspark.__version__, **{f: available(f) for f in NEEDS}}


__all__ = ["ADMISSION_CONTROL", "FILTER_CLASSES", "FILTER_PUSHDOWN", "NEEDS", "STREAM_ARROW_WRITER", "WHY",
           "ReadAllAvailable", "ReadLimit", "ReadMaxBytes", "ReadMaxRows", "SupportsTriggerAvailableNow", "available",
           "require", "summary"]
