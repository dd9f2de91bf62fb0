"""A Spark standalone cluster (one master, one worker, each its own JVM) from the installed pyspark, and the
packed Python environment its executors run the connector from: what the guide's spark-submit recipe
(docs/spark.md: Running the drain on a Spark cluster) describes, made runnable for the tests.

Executors do not use this repository's virtualenv: they unpack ``executor_environment()`` (a venv-pack
archive of a fresh venv holding the connector's wheel and its runtime dependencies) shipped with
``--archives``, and run ``./env/bin/python``. pyspark itself comes from the worker's SPARK_HOME, as on a
real cluster.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark

from integration.harness import stop_process
from integration.smoke_wheel import wheel_build_lock

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "accumulo-export-connector"
#: the connector's runtime dependencies an executor needs (pyspark comes from SPARK_HOME on the workers)
EXECUTOR_REQUIREMENTS_SKIP = ("pyspark",)


def spark_home() -> Path:
    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StandaloneSpark:
    master_url: str
    web_url: str
    work_dir: Path
    log_dir: Path

    def status(self) -> dict:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as reply:
            return json.load(reply)  # type: ignore[no-any-return]


def _spark_env() -> dict[str, str]:
    env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    env.pop("PYSPARK_PYTHON", None)  # executors take theirs from the application (spark.pyspark.python)
    return env


@contextlib.contextmanager
def standalone_spark(cores: int = 2, memory: str = "2g", timeout: float = 120.0) -> Iterator[StandaloneSpark]:
    """Start a master and one worker (``spark-class ... Master`` / ``... Worker``), wait until the worker
    has registered, and stop both on exit."""
    state = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
    port, web = _free_port(), _free_port()
    cluster = StandaloneSpark(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}", state / "work", state)
    cluster.work_dir.mkdir()
    spark_class = str(spark_home() / "bin" / "spark-class")
    env = _spark_env()
    procs: list[subprocess.Popen] = []
    try:
        with open(state / "master.log", "wb") as log:
            procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host",
                                           "127.0.0.1", "--port", str(port), "--webui-port", str(web)],
                                          env=env, stdout=log, stderr=subprocess.STDOUT))
        _wait(lambda: cluster.status() is not None, timeout, "the Spark master", state / "master.log")
        with open(state / "worker.log", "wb") as log:
            procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", cluster.master_url,
                                           "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                                           "--work-dir", str(cluster.work_dir), "--webui-port", str(_free_port())],
                                          env=env, stdout=log, stderr=subprocess.STDOUT))
        _wait(lambda: cluster.status().get("aliveworkers", 0) >= 1, timeout, "the Spark worker", state / "worker.log")
        yield cluster
    finally:
        for proc in reversed(procs):
            stop_process(proc, grace=0)
        shutil.rmtree(state, ignore_errors=True)


def _wait(check, timeout: float, what: str, log: Path) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if check():
                return
        time.sleep(0.5)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else "(no log)"
    raise RuntimeError(f"{what} was not ready after {timeout:.0f} s; last lines of {log}:\n{tail}")


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted([ROOT / "pyproject.toml", *(ROOT / "connector").rglob("*")]):
        if path.is_file() and "target" not in path.parts and "__pycache__" not in path.parts \
                and path.suffix in {".py", ".toml", ".rs", ".thrift", ".lock"}:
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def executor_environment() -> Path:
    """A venv-pack archive (``env.tar.gz``) of a virtualenv with this connector's wheel and its runtime
    dependencies but pyspark, built once per version of the sources (cached under ~/.cache)."""
    archive = CACHE / f"executor-env-{_sources_hash()}.tar.gz"
    if archive.exists():
        return archive
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="executor-env-") as tmp:
        work = Path(tmp)
        # the wheel reuses the editable install's Rust build (same release profile)
        env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "connector" / "_native" / "target"))
        with wheel_build_lock():
            _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(ROOT)], env)
        wheel = next((work / "dist").glob("*.whl"))
        venv = work / "env"
        _run([sys.executable, "-m", "venv", str(venv)])
        requirements = [r for r in _runtime_requirements() if not r.startswith(EXECUTOR_REQUIREMENTS_SKIP)]
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *requirements])
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)])
        partial = archive.with_name(f"partial-{archive.name}")
        _run([str(Path(sys.executable).parent / "venv-pack"), "-p", str(venv), "-o", str(partial), "-f", "-q"])
        partial.replace(archive)
    return archive


def _runtime_requirements() -> list[str]:
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def _run(command: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
