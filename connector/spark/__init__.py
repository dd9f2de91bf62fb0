"""Spark: the ``export-queue`` source, the ``accumulo-export`` sink, and the drain job."""

from .drain_job import DrainError, DrainJob, DrainReport, run_batch, start_stream
from .options import GatewayOptions, OptionError
from .session import register, spark_session

__all__ = ["DrainError", "DrainJob", "DrainReport", "GatewayOptions", "OptionError", "register", "run_batch",
           "spark_session", "start_stream"]
