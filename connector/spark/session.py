"""Getting a SparkSession with this package's data sources registered."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def register(spark: SparkSession) -> SparkSession:
    """Register the ``export-queue`` source, the ``accumulo-export`` sink and the streaming drain's
    ``export-queue-drain`` source on ``spark``."""
    from .drain_source import QueueDrainDataSource, WarmUpDataSource
    from .export_sink import AccumuloExportDataSource
    from .queue_source import ExportQueueDataSource

    spark.dataSource.register(ExportQueueDataSource)
    spark.dataSource.register(AccumuloExportDataSource)
    spark.dataSource.register(QueueDrainDataSource)
    spark.dataSource.register(WarmUpDataSource)
    return spark


def spark_session(master: str | None = None, app_name: str = "accumulo-export") -> SparkSession:
    """A SparkSession (``local[2]`` unless ``master`` or SPARK_MASTER say otherwise) with the data sources."""
    # executors must run this interpreter, which has this package installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("SPARK_MASTER", "local[2]")
    builder = SparkSession.builder.master(master)
    if master.startswith("local"):
        # a local session talks only to itself: keep every socket on the loopback interface
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    builder = (
        builder
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.python.worker.reuse", "true")
        .config("spark.task.maxFailures", "4")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return register(spark)
