"""The wheel on other Pythons and PySparks: build the abi3 wheel once (``pip wheel --no-deps .``, as the guides tell
users: docs/spark.md: Running the drain on a Spark cluster), install that one file into fresh virtualenvs of CPython
3.12 and 3.13 and drive the installed ``accumulo-export`` command there against the embedded clusters:
``queue add``, a drain and a combine in the command's own process, and a drain with Spark ``local[2]`` (its Python
workers run that Python too).

The 3.12 virtualenv runs the oldest supported PySpark (:data:`OLDEST_PYSPARK`, the newest 4.0 patch release),
the 3.13 one a 4.2 (:data:`NEWER_PYSPARK`); the development virtualenv (3.11), where the whole suite runs, has
the newest the wheel allows. On both pinned ones the smoke also drives the paths whose Spark-version fallbacks
``connector/spark/compat.py`` chooses (``integration/smoke_wheel_spark.py``): the streaming drain with
``availableNow``, the streaming sink at a processing-time trigger, and the read source, each checked on B. On
4.2 it also starts a Spark Connect server of that PySpark whose Python has no connector
(``integration/smoke_wheel_connect.py``): the client's shipped copy drains in rounds, and the streaming drain is
refused in one line.

``make smoke-wheel`` runs it with clusters of its own; ``make test`` runs it through
``tests/test_wheel_smoke.py`` on the test session's clusters. Interpreters come from ``python3.X`` on PATH or
pyenv; a version found in neither is skipped, and said so. The virtualenvs are kept under ``.smoke/``
(git-ignored) and rebuilt only when the wheel's dependencies or the interpreter change, so a re-run only
reinstalls the wheel.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import email.parser
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SMOKE_DIR = ROOT / ".smoke"
VERSIONS = ("3.12", "3.13")  # 3.11 is the development venv's: the whole test suite runs there
#: the oldest PySpark the connector supports (pyproject.toml: pyspark>=4.0), as its newest patch release
OLDEST_PYSPARK = "4.0.5"
#: a 4.2 (admission control of streaming sources came with it), between the oldest and the suite's newest
NEWER_PYSPARK = "4.2.1"
#: the PySpark each version's virtualenv pins (the others get the newest the wheel's requirement allows)
PYSPARK = {"3.12": OLDEST_PYSPARK, "3.13": NEWER_PYSPARK}
#: where each virtualenv's pin puts it by default (another pin, --pyspark, gets a folder of its own)
DEFAULT_PYSPARK = dict(PYSPARK)
#: the PySparks whose smoke also drives a Spark Connect server without the connector (needs pyspark[connect])
CONNECT_PYSPARK = {NEWER_PYSPARK}


class SmokeError(RuntimeError):
    """A smoke step failed; the message has the command and the tail of its output."""


def find_python(version: str) -> str | None:
    """An interpreter of CPython ``version`` ("3.13"): ``python3.13`` on PATH, else pyenv's newest 3.13.x."""
    candidates = [shutil.which(f"python{version}")]
    if shutil.which("pyenv"):
        listed = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        for name in sorted((v for v in listed if v.startswith(version + ".")),
                           key=lambda v: [int(p) if p.isdigit() else -1 for p in v.split(".")], reverse=True):
            found = subprocess.run(["pyenv", "which", "python"], capture_output=True, text=True,
                                   env=dict(os.environ, PYENV_VERSION=name))
            candidates.append(found.stdout.strip() if found.returncode == 0 else None)
    for python in filter(None, candidates):
        probe = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)  # a pyenv shim may exist without its version
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return python
    return None


def run(command: Sequence[str | Path], *, input_text: str | None = None, env: dict[str, str] | None = None,
        cwd: Path | None = None, timeout: float = 600) -> str:
    """Run a command; return its stdout, or raise SmokeError with the command and its output's tail."""
    proc = subprocess.run([str(c) for c in command], input=input_text, capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)
    if proc.returncode != 0:
        raise SmokeError(f"{' '.join(map(str, command))} exited {proc.returncode}:\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


@contextlib.contextmanager
def wheel_build_lock() -> Iterator[None]:
    """One wheel build at a time on this checkout: maturin stages the library in the crate's one target folder,
    and two builds at once (two test workers) fail renaming it."""
    target = ROOT / "connector" / "_native" / "target"
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".wheel-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build_wheel(out_dir: Path = SMOKE_DIR / "wheel") -> Path:
    """Build the wheel the documented way (``pip wheel --no-deps .``) and return it; it must be the one abi3
    wheel for every Python."""
    shutil.rmtree(out_dir, ignore_errors=True)
    with wheel_build_lock():
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(out_dir)], timeout=1800)
    wheels = list(out_dir.glob("*.whl"))
    if len(wheels) != 1 or "-cp311-abi3-" not in wheels[0].name:
        raise SmokeError(f"expected one cp311-abi3 wheel in {out_dir}, found {[w.name for w in wheels]}")
    return wheels[0]


def _requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(z.read(name).decode())
    return sorted(r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r)


def _pinned(requirements: list[str], pyspark: str | None) -> list[str]:
    """The requirements with PySpark pinned to ``pyspark`` (None: as the wheel asks), with its ``connect``
    extra where the smoke drives a Spark Connect server."""
    if pyspark is None:
        return requirements
    extra = "[connect]" if pyspark in CONNECT_PYSPARK else ""
    return [f"pyspark{extra}=={pyspark}" if r.split(">")[0].split("<")[0].split("=")[0].strip() == "pyspark"
            else r for r in requirements]


def prepare_venv(python: str, wheel: Path, version: str) -> Path:
    """A virtualenv of ``python`` with ``wheel`` installed (and the PySpark :data:`PYSPARK` pins for that
    version). Its dependencies come from the package index once; later runs keep them while the wheel's
    requirements and the interpreter stay the same."""
    pin = PYSPARK.get(version)
    # the usual pins keep the usual folder; another PySpark (--pyspark) gets one of its own
    venv = SMOKE_DIR / (f"venv-{version}" if pin == DEFAULT_PYSPARK.get(version) else f"venv-{version}-pyspark-{pin}")
    vpy = venv / "bin" / "python"
    requirements = _pinned(_requirements(wheel), pin)
    key = hashlib.sha256(json.dumps([os.path.realpath(python), requirements]).encode()).hexdigest()
    stamp = venv / ".smoke-deps"
    if not (vpy.exists() and stamp.exists() and stamp.read_text() == key):
        shutil.rmtree(venv, ignore_errors=True)
        run([python, "-m", "venv", str(venv)])
        run([vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements], timeout=1800)
        stamp.write_text(key)
    run([vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--force-reinstall",
         str(wheel)], timeout=600)
    return venv


def prepare_venvs(pythons: dict[str, str], wheel: Path) -> dict[str, Path]:
    """:func:`prepare_venv` for each version -> interpreter, all at once (the installs wait on the network
    and the disk more than on the CPU)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(pythons))) as pool:
        futures = {v: pool.submit(prepare_venv, python, wheel, v) for v, python in pythons.items()}
        return {v: f.result() for v, f in futures.items()}


@dataclass
class Smoke:
    """One interpreter's run against clusters A and B (objects with ``gateway_options()`` and ``connect()``)."""

    venv: Path
    version: str
    clusters: Any
    work: Path

    def __post_init__(self) -> None:
        config = self.work / "clusters.toml"
        lines = []
        for name in ("a", "b"):  # the file a user writes (docs/reference.md: clusters.toml), secrets by path only
            g = self.clusters[name].gateway_options()
            lines += [f"[clusters.{name.upper()}]", f'host = "{g.host}"', f"port = {g.port}",
                      f'secret_file = "{g.secret_file}"'] + ([f'tls_ca_file = "{g.tls_ca_file}"']
                                                             if g.tls_ca_file else []) + [""]
        config.write_text("\n".join(lines))
        config.chmod(0o600)
        keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "LC_ALL", "TMPDIR")
        self.env = {k: v for k, v in os.environ.items() if k in keep}  # no PYTHONPATH: the wheel, not the tree
        self.env.update(ACCUMULO_EXPORT_CONFIG=str(config), PYSPARK_PYTHON=str(self.venv / "bin" / "python"),
                        PYSPARK_DRIVER_PYTHON=str(self.venv / "bin" / "python"))
        self.tag = self.version.replace(".", "")

    def cli(self, *args: str, stdin: str | None = None) -> str:
        return run([self.venv / "bin" / "accumulo-export", *args], input_text=stdin, env=self.env, cwd=self.work)

    def cells(self, table: str) -> set[tuple[bytes, bytes, bytes, bytes]]:
        with self.clusters["b"].connect() as conn:
            return {(c.row, c.cf, c.cq, c.value) for c in conn.scan(table)}

    @property
    def pyspark(self) -> str | None:
        """The PySpark this virtualenv pins (None: the newest the wheel allows)."""
        return PYSPARK.get(self.version)

    def check_install(self) -> None:
        version = self.cli("--version")
        if f"(Python {self.version}." not in version or (self.pyspark and f"PySpark {self.pyspark}" not in version):
            raise SmokeError(f"accumulo-export --version in {self.venv} says {version.strip()!r}")
        where = run([self.venv / "bin" / "python", "-I", "-c",
                     "import connector, connector._native as n; print(connector.__file__, n.__file__)"],
                    env=self.env, cwd=self.work)
        if str(ROOT / "connector") in where or str(self.venv) not in where:
            raise SmokeError(f"connector imported from {where.strip()}, not from the wheel in {self.venv}")

    def queue_and_local_drain(self) -> None:
        queue = ["--cluster", "A", "--table", f"smoke{self.tag}", "--queue", "q"]
        self.cli("queue", "init", *queue, "--buckets", "4", "--translator", "cells")
        lines = [{"key": f"k{i}", "value": {"row": f"r{i}", "cf": "f", "cq": "q", "value": f"v{i}"}, "seq": i + 1}
                 for i in range(20)]
        self.cli("queue", "add", *queue, stdin="".join(json.dumps(line) + "\n" for line in lines))
        table = f"smoke{self.tag}_local"
        self.cli("drain", "--source", "A", "--dest", "B", "--table", f"smoke{self.tag}", "--queue", "q",
                 "--dest-table", table, "--create-dest-table", "--engine", "local")
        expected = {(f"r{i}".encode(), b"f", b"q", f"v{i}".encode()) for i in range(20)}
        if self.cells(table) != expected:
            raise SmokeError(f"the local drain wrote {sorted(self.cells(table))[:5]}..., expected {len(expected)} "
                             "cells r0..r19")

    def combine_and_spark_drain(self) -> None:
        exports = ["--cluster", "A", "--table", f"smoke{self.tag}_x", "--queue", "x"]
        combine = ["--cluster", "A", "--table", f"smoke{self.tag}_wc", "--queue", "wc"]
        self.cli("queue", "init", *exports, "--buckets", "2", "--translator", "value=count")
        self.cli("combine", "init", *combine, "--buckets", "4")
        deltas = [("apple", 1), ("pear", 2), ("apple", 3), ("fig", 5), ("fig", -5)]
        self.cli("combine", "update", *combine,
                 stdin="".join(json.dumps({"key": k, "delta": d}) + "\n" for k, d in deltas))
        self.cli("combine", "run", *combine, "--combiner", "sum", "--observer", "changes", "--export-table",
                 f"smoke{self.tag}_x", "--export-queue", "x", "--engine", "local")
        got = json.loads(self.cli("combine", "get", *combine, "--key", "apple", "--key", "pear", "--json"))
        if got != {"apple": 4, "pear": 2}:
            raise SmokeError(f"combine get says {got}, expected apple 4 and pear 2")
        table = f"smoke{self.tag}_counts"
        self.cli("drain", "--source", "A", "--dest", "B", "--table", f"smoke{self.tag}_x", "--queue", "x",
                 "--dest-table", table, "--create-dest-table", "--engine", "spark", "--master", "local[2]")
        expected = {(b"apple", b"count", b"", b"4"), (b"pear", b"count", b"", b"2")}
        if self.cells(table) != expected:
            raise SmokeError(f"the Spark drain wrote {sorted(self.cells(table))}, expected {sorted(expected)}")


    def spark_fallbacks(self) -> None:
        """On a pinned PySpark: the streams, the sink and the read source (``smoke_wheel_spark.py``, run by
        this virtualenv's Python from the work folder, so ``connector`` is the wheel's), each table checked
        here on B."""
        script = self.work / "smoke_wheel_spark.py"
        shutil.copy(ROOT / "integration" / "smoke_wheel_spark.py", script)
        output = run([self.venv / "bin" / "python", script, self.tag, self.work], env=self.env, cwd=self.work)
        result = json.loads(output.strip().splitlines()[-1])
        expected = {(f"r{i:03d}".encode(), b"f", b"q", f"v{i}".encode()) for i in range(20)}
        for name, table in result["tables"].items():
            if self.cells(table) != expected:
                raise SmokeError(f"{name}: table {table} on B holds {len(self.cells(table))} cells, not the "
                                 f"{len(expected)} expected ({result})")
        batches = result["micro_batches"]
        one_batch = not result["compat"]["admission_control"]  # Spark's availableNow fallback before 4.2
        if batches["sink"] < 2 or (batches["available_now"] == 1) != one_batch:
            raise SmokeError(f"micro-batches {batches}: a read limit of 8 entries needs several for 20, "
                             f"availableNow one exactly where Spark lacks admission control ({result['compat']})")
        if not result["compat"]["filter_pushdown"] and "pushdown_refused" not in result:
            raise SmokeError(f"option pushdown was not refused on {result['compat']}")
        print(f"smoke_wheel: Spark fallbacks on PySpark {result['compat']['pyspark']}: seconds {result['seconds']}, "
              f"micro-batches {batches}", flush=True)


    def connect_without_package(self) -> None:
        """A Spark Connect server of this virtualenv's PySpark whose Python workers find no usable connector
        (a stand-in first on their path refuses to load, as a server without the package would): the client
        (``smoke_wheel_connect.py``, this virtualenv's Python: the wheel) ships its copy and drains a queue in
        rounds through it, checked here on B; the streaming drain is refused in one line."""
        from integration.spark_connect import connect_server

        stand_in = self.work / "server-path" / "connector"
        stand_in.mkdir(parents=True)
        (stand_in / "__init__.py").write_text('raise ImportError("no connector on this server")\n')
        vpy = self.venv / "bin" / "python"
        home = Path(run([vpy, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                        env=self.env).strip())
        script = self.work / "smoke_wheel_connect.py"
        shutil.copy(ROOT / "integration" / "smoke_wheel_connect.py", script)
        with connect_server("local[2]", python=str(vpy), pythonpath=str(stand_in.parent), env=self.env,
                            home=home) as server:
            output = run([vpy, script, self.tag, self.work, server.url], env=self.env, cwd=self.work)
        result = json.loads(output.strip().splitlines()[-1])
        expected = {(f"r{i:03d}".encode(), b"f", b"q", f"v{i}".encode()) for i in range(20)}
        if result["exported"] != 20 or self.cells(result["table"]) != expected:
            raise SmokeError(f"the batch drain over Spark Connect exported {result['exported']}, B's table holds "
                             f"{len(self.cells(result['table']))} of the {len(expected)} cells expected")
        refused = result["refused"]
        if refused is None or "\n" in refused or "installed on the server" not in refused:
            raise SmokeError(f"the streaming drain on a Connect server without the connector was not refused in "
                             f"one line: {refused!r}")
        print(f"smoke_wheel: Spark Connect on PySpark {self.pyspark}: seconds {result['seconds']}", flush=True)


def steps(s: Smoke) -> list[Any]:
    """The steps of one virtualenv's smoke run: the Spark fallbacks too where it pins a PySpark, and the Spark
    Connect server without the connector on :data:`CONNECT_PYSPARK`."""
    return [s.check_install, s.queue_and_local_drain, s.combine_and_spark_drain,
            *([s.spark_fallbacks] if s.pyspark is not None else []),
            *([s.connect_without_package] if s.pyspark in CONNECT_PYSPARK else [])]


def smoke(venv: Path, version: str, clusters: Any) -> dict[str, float]:
    """Run every step in ``venv`` against ``clusters``; return each step's seconds. Raises SmokeError."""
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix=f"smoke-{version}-") as work:
        s = Smoke(venv, version, clusters, Path(work))
        for step in steps(s):
            started = time.monotonic()
            step()
            seconds[step.__name__] = round(time.monotonic() - started, 1)
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Smoke-test the built wheel on CPython 3.12 (with the oldest "
                                                 f"supported PySpark) and 3.13 (with PySpark {NEWER_PYSPARK}).")
    parser.add_argument("--versions", default=",".join(VERSIONS), help="comma-separated (default %(default)s)")
    parser.add_argument("--pyspark", help="pin this PySpark in every virtualenv (e.g. 4.1.4; default: "
                                          f"{OLDEST_PYSPARK} for 3.12, {NEWER_PYSPARK} for 3.13)")
    opts = parser.parse_args(argv)
    if opts.pyspark:
        PYSPARK.update(dict.fromkeys(opts.versions.split(","), opts.pyspark))
    pythons = {v: find_python(v) for v in opts.versions.split(",")}
    for v, python in pythons.items():
        if python is None:
            print(f"smoke_wheel: skipped Python {v}: no python{v} on PATH or in pyenv", flush=True)
    found = {v: p for v, p in pythons.items() if p}
    if not found:
        return 0
    started = time.monotonic()
    wheel = build_wheel()
    print(f"smoke_wheel: built {wheel.name} in {time.monotonic() - started:.0f}s", flush=True)
    t = time.monotonic()
    venvs = prepare_venvs(found, wheel)
    print(f"smoke_wheel: venvs of Python {', '.join(found)} ready in {time.monotonic() - t:.0f}s", flush=True)
    from integration.harness import clusters

    failed = 0
    with clusters(("a", "b")) as running:
        for v, venv in venvs.items():
            try:
                print(f"smoke_wheel: Python {v} passed {smoke(venv, v, running)}", flush=True)
            except SmokeError as exc:
                failed += 1
                print(f"smoke_wheel: Python {v} FAILED: {exc}", file=sys.stderr, flush=True)
    print(f"smoke_wheel: {time.monotonic() - started:.0f}s in all", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
