"""Getting a SparkSession with this package's data sources registered: a classic one (``local[2]``, a
cluster's master) or a Spark Connect client's (``sc://host:port``)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


#: how a Spark Connect server's address starts (``SparkSession.builder.remote``)
CONNECT_SCHEME = "sc://"


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect client's session: it has no JVM or ``sparkContext`` in this process; its data
    sources and tasks run in the server's Python workers."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def ship_connector(spark: SparkSession, folder: str | None = None) -> Path:
    """Ship this process's copy of the connector to a Spark Connect server, for its session ``spark``, and
    register the data sources there again (:func:`register`) from it: the package, native core included, is
    zipped (into ``folder``, default a temporary one) and added as an archive artifact unpacked as
    ``connector`` in the session's folder, which the server puts first on its Python workers' path. The
    server's Python must be of the same platform and a Python the native core was built for (3.11+), and have
    the connector's dependencies installed. Batch work runs from the shipped copy; streams need the package
    installed on the server (docs/spark-connect.md: Not supported over Connect). Returns the archive."""
    if not is_connect(spark):
        raise TypeError("ship_connector is for Spark Connect sessions: a classic session's executors need the "
                        "package installed, or a packed environment "
                        "(docs/spark.md: Running the drain on a Spark cluster)")
    package = Path(__file__).resolve().parent.parent
    out = Path(folder or tempfile.mkdtemp(prefix="connector-artifact-")) / "connector.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            inside = path.relative_to(package)
            if path.is_file() and "__pycache__" not in inside.parts and inside.parts[0] != "_native":
                archive.write(path, inside.as_posix())  # the Rust crate's sources (_native/) stay behind
    spark.addArtifacts(f"{out}#connector", archive=True)
    register(spark)
    return out


def submitted() -> bool:
    """True when ``spark-submit`` started this Python process: its ``--master`` and ``--conf`` then apply."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


#: the settings a session made here starts with (a caller's ``conf`` or spark-submit's win)
SESSION_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.python.worker.reuse": "true",
    "spark.task.maxFailures": "4",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
}


@contextlib.contextmanager
def _jvm_dies_with_this_process() -> Iterator[None]:
    """A Spark JVM this block starts gets SIGTERM when this process dies, however it dies (SIGKILL, the OOM
    killer), even while the JVM is still starting: Linux's parent-death signal, which survives the exec from
    ``spark-submit``'s shell script into ``java``. Spark's own guard, the JVM reading EOF on its stdin, acts
    only once the JVM is up, and a process this one forked keeps the pipe open. Only from the main thread:
    the signal follows the thread that started the JVM, and a worker thread may end before the process."""
    libc = _libc()
    if libc is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    from pyspark import java_gateway

    original = java_gateway.Popen
    parent = os.getpid()

    def popen(command: Any, **kwargs: Any) -> Any:
        inner = kwargs.get("preexec_fn")

        def preexec() -> None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:  # this process died before the line above: nobody would send it
                os._exit(1)
            if inner is not None:
                inner()

        kwargs["preexec_fn"] = preexec
        return original(command, **kwargs)

    java_gateway.Popen = popen  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        java_gateway.Popen = original  # type: ignore[misc]


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _libc() -> Any:
    """The C library, where it has ``prctl`` (Linux); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def spark_session(master: str | None = None, app_name: str = "accumulo-export") -> SparkSession:
    """A SparkSession with the data sources registered: on ``master``, else SPARK_MASTER, else what
    ``spark-submit`` was given, else ``local[2]``. Settings given to ``spark-submit --conf`` win over this
    function's defaults. A master ``sc://host:port`` (or SPARK_REMOTE) is a Spark Connect server: the session is
    its client's, and the server's own settings apply (docs/spark-connect.md: Spark Connect)."""
    remote = master if master is not None and master.startswith(CONNECT_SCHEME) else None
    if master is None and not submitted() and os.environ.get("SPARK_REMOTE", "").startswith(CONNECT_SCHEME):
        remote = os.environ["SPARK_REMOTE"]
    if remote is not None:
        return register(SparkSession.builder.remote(remote).getOrCreate())
    # executors must run this interpreter, which has this package installed (spark-submit sets its own)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("SPARK_MASTER") or (None if submitted() else "local[2]")
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    defaults = dict(SESSION_DEFAULTS)
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
    with _jvm_dies_with_this_process():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return register(spark)
