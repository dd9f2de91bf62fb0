"""The sources' planning reports the user's mistakes in one line.

Spark plans a Python data source in a Python process of its own and sends an error raised there to the driver
with the whole Python traceback: an option misspelt or a table that does not exist came back as a dozen lines
of our frames, the line naming the option last. An input error (:func:`~connector.errors.is_input_error`)
raised while a source is created or plans is instead reported by that process as its one line, as Spark does
for every error when ``spark.sql.execution.pyspark.udf.hideTraceback.enabled`` is set. Any other error keeps
its traceback: that is a bug or a cluster failing, and the frames say where.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from connector.errors import is_input_error

from .worker_heap import in_spark_python_process

__all__ = ["PLANNING", "input_errors_in_one_line"]

#: the methods Spark calls while it creates a source and plans a batch read or a write, not those of a
#: running stream (whose process lives on) nor the tasks' reads
PLANNING = ("__init__", "schema", "reader", "writer", "streamReader", "streamWriter", "partitions")

C = TypeVar("C", bound=type)


def _one_line(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def planned(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            if is_input_error(exc) and in_spark_python_process():
                # read by pyspark's handle_worker_exception when it formats this error; the planning fails
                # with it, and Spark ends this process with it
                os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise

    return planned


def input_errors_in_one_line(cls: C) -> C:
    """Class decorator for a data source or a batch reader: its planning methods (:data:`PLANNING`, those it
    defines itself) report an input error in one line."""
    for name in PLANNING:
        if name in vars(cls):
            setattr(cls, name, _one_line(vars(cls)[name]))
    return cls
