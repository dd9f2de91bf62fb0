"""Spark: the ``export-queue`` source, the ``accumulo-export`` sink, the Spark engine of the drain and combine
jobs (:mod:`connector.jobs`), and the streaming drain."""

from connector.jobs import DrainError, DrainJob, DrainReport

from .drain_job import run_batch, start_stream
from .engine import SparkEngine
from .options import GatewayOptions, OptionError
from .session import register, ship_connector, spark_session

__all__ = ["DrainError", "DrainJob", "DrainReport", "GatewayOptions", "OptionError", "SparkEngine", "register",
           "run_batch", "ship_connector", "spark_session", "start_stream"]
