"""Getting a SparkSession with this package's data sources registered."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def register(spark: SparkSession) -> SparkSession:
    """Register the ``export-queue`` source, the ``accumulo-export`` sink, the streaming drain's
    ``export-queue-drain`` source and the ``accumulo`` table source on ``spark``."""
    from .drain_source import QueueDrainDataSource, WarmUpDataSource
    from .export_sink import AccumuloExportDataSource
    from .queue_source import ExportQueueDataSource
    from .table_source import AccumuloTableDataSource

    spark.dataSource.register(ExportQueueDataSource)
    spark.dataSource.register(AccumuloExportDataSource)
    spark.dataSource.register(QueueDrainDataSource)
    spark.dataSource.register(WarmUpDataSource)
    spark.dataSource.register(AccumuloTableDataSource)
    return spark


def submitted() -> bool:
    """True when ``spark-submit`` started this Python process: its ``--master`` and ``--conf`` then apply."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(master: str | None = None, app_name: str = "accumulo-export") -> SparkSession:
    """A SparkSession with the data sources registered: on ``master``, else SPARK_MASTER, else what
    ``spark-submit`` was given, else ``local[2]``. Settings given to ``spark-submit --conf`` win over this
    function's defaults."""
    # executors must run this interpreter, which has this package installed (spark-submit sets its own)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("SPARK_MASTER") or (None if submitted() else "local[2]")
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.python.worker.reuse": "true",
        "spark.task.maxFailures": "4",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    }
    if master is not None and master.startswith("local"):
        # a local session talks only to itself: keep every socket on the loopback interface
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        defaults.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    if submitted():
        from pyspark import SparkConf

        given = {key for key, _ in SparkConf().getAll()}
        defaults = {key: value for key, value in defaults.items() if key not in given}
    if not submitted():  # spark-submit names the application (--name) itself
        builder = builder.appName(app_name)
    for key, value in defaults.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return register(spark)
