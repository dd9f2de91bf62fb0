"""A Spark Connect server from the installed pyspark (``SparkConnectServer`` through ``spark-submit``, as
``sbin/start-connect-server.sh`` starts it), for the tests of the connector used from a Spark Connect client.

The server is a process of its own, as on a real deployment: the client (the test) holds only a
``sc://host:port`` session. The server's Python workers (data sources, ``mapInArrow``, ``foreachBatch``) run
``python`` with ``pythonpath`` on their path: that is where the connector must be importable ("the package on
the server"; docs/spark-connect.md: Where the code runs).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from connector.spark.session import SESSION_DEFAULTS
from integration.harness import stop_process
from integration.spark_cluster import spark_home

ROOT = Path(__file__).resolve().parents[1]
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: what a Spark Connect client's session sets in its process's environment
CLIENT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@dataclass
class ConnectServer:
    url: str  # sc://127.0.0.1:PORT
    log: Path
    work_dir: Path

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def connect_server(master: str = "local[2]", python: str = sys.executable, pythonpath: str | None = str(ROOT),
                   conf: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
                   timeout: float = 120.0, home: Path | None = None) -> Iterator[ConnectServer]:
    """Start a Spark Connect server on a free loopback port (``master``; its Python workers run ``python``
    with ``pythonpath`` first on their path, None: nothing added), wait until it accepts connections, and stop
    it (and the Python workers it started) on exit. ``home``: the Spark to run (default: this process's
    pyspark; the wheel's smoke runs another virtualenv's)."""
    home = home or spark_home()
    work = Path(tempfile.mkdtemp(prefix="spark-connect-"))
    port = _free_port()
    server = ConnectServer(f"sc://127.0.0.1:{port}", work / "server.log", work)
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        **SESSION_DEFAULTS,
        "spark.local.dir": str(work / "local"),
        **(conf or {}),
    }
    process_env = dict(os.environ if env is None else env, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
                       PYSPARK_PYTHON=python)
    # what a classic driver or a Connect client in this process set for itself is not the server's
    for key in ("PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT", "PYTHONPATH", *CLIENT_ENV):
        process_env.pop(key, None)
    if pythonpath:
        process_env["PYTHONPATH"] = pythonpath
    command = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "Spark Connect server",
               "--master", master]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    proc: subprocess.Popen | None = None
    try:
        with open(server.log, "wb") as log:
            proc = subprocess.Popen(command, env=process_env, cwd=work, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not _listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                state = f"exited with {proc.poll()}" if proc.poll() is not None else f"not up after {timeout:.0f} s"
                raise RuntimeError(f"the Spark Connect server {state}; last lines of {server.log}:\n"
                                   f"{server.log_tail()}")
            time.sleep(0.5)
        yield server
    finally:
        if proc is not None:
            stop_process(proc, grace=0)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the Python workers it left (its own process group)
        shutil.rmtree(work, ignore_errors=True)
