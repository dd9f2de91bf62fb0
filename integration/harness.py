"""Real Accumulo on one machine: builds the gateway, starts MiniAccumuloClusters with a gateway each.

Use ``clusters(["a", "b"])`` as a context manager (tests use the session fixture in tests/conftest.py), or
``python -m integration.harness`` (``make cluster``) to keep clusters running in the foreground until
Ctrl-C. Secrets are generated per run, passed to the launcher through its environment and a 0600 file,
and never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GATEWAY_DIR = ROOT / "integration" / "gateway"
IDL = ROOT / "connector" / "accumulo" / "proxy.thrift"
LAUNCHER = "exportconnector.gateway.Launcher"
GATEWAY_MAIN = "exportconnector.gateway.GatewayMain"
BENCH_WRITER = "exportconnector.gateway.BenchWriter"


class HarnessError(RuntimeError):
    """The embedded clusters could not be built or started; the message says why."""


# --- build ---------------------------------------------------------------------------------------------


def _sources_hash() -> str:
    h = hashlib.sha256()
    files = [GATEWAY_DIR / "pom.xml", IDL, *sorted((GATEWAY_DIR / "src").rglob("*"))]
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def build_gateway(force: bool = False) -> str:
    """Build the gateway when its pom, sources or the IDL changed; return the runtime classpath."""
    target = GATEWAY_DIR / "target"
    stamp = target / ".build-hash"
    cp_file = target / "classpath.txt"
    digest = _sources_hash()
    if force or not stamp.exists() or stamp.read_text() != digest or not cp_file.exists():
        if shutil.which("mvn") is None:
            raise HarnessError("Maven (mvn) is not on PATH; install it (make deps does)")
        if shutil.which("thrift") is None:
            raise HarnessError("the thrift compiler is not on PATH; `apt-get install thrift-compiler` (make deps)")
        for args in (["package", "-DskipTests"],
                     ["dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt"]):
            proc = subprocess.run(["mvn", "-q", "-B", *args], cwd=GATEWAY_DIR, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
                raise HarnessError(f"gateway build failed (mvn {' '.join(args)}):\n{tail}")
        stamp.write_text(digest)
    return f"{target / 'classes'}{os.pathsep}{cp_file.read_text().strip()}"


def java_command(classpath: str, main: str, *args: str, heap: str = "1g", tmpdir: Path | None = None) -> list[str]:
    """``tmpdir``: the JVM's java.io.tmpdir, so what it leaves there (Accumulo's VFS cache) goes with it."""
    options = [f"-Djava.io.tmpdir={tmpdir}"] if tmpdir else []
    return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", *options, "-cp", classpath, main, *args]


# --- running clusters ----------------------------------------------------------------------------------


@dataclass
class Cluster:
    """Connection details of one embedded cluster. Secrets live in files; nothing here prints them."""

    name: str
    instance: str
    zookeepers: str
    user: str
    gateway_host: str
    gateway_port: int
    dir: str
    secret_file: str
    password_file: str = field(repr=False)

    def connect(self, **kwargs):  # noqa: ANN003, ANN201 - returns connector.accumulo.Connection
        """A client Connection to this cluster's gateway."""
        from connector.accumulo import Connection

        return Connection(self.gateway_host, self.gateway_port, secret_file=self.secret_file, **kwargs)

    def gateway_options(self):  # noqa: ANN201 - returns connector.spark.GatewayOptions
        """Where this cluster's gateway is, for the Spark layer and the CLI (the secret stays in its file)."""
        from connector.spark.options import GatewayOptions

        return GatewayOptions(self.gateway_host, self.gateway_port, secret_file=self.secret_file)

    def java_env(self) -> dict[str, str]:
        """Environment for a Java program of the gateway module talking to this cluster directly."""
        env = dict(os.environ)
        env["ACCUMULO_PASSWORD"] = Path(self.password_file).read_text().strip()
        env["ACCUMULO_GATEWAY_SECRET"] = Path(self.secret_file).read_text().strip()
        return env

    def java_args(self) -> list[str]:
        return ["--instance", self.instance, "--zookeepers", self.zookeepers, "--user", self.user]


@dataclass
class Clusters:
    by_name: dict[str, Cluster]
    classpath: str
    state_dir: Path
    log_file: Path

    def __getitem__(self, name: str) -> Cluster:
        return self.by_name[name]

    def __iter__(self) -> Iterator[Cluster]:
        return iter(self.by_name.values())


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_for_ready(proc: subprocess.Popen, timeout: float, log_file: Path, what: str) -> dict:
    """Read the process's stdout until its ``READY {json}`` line; on timeout or exit, raise with the log tail."""
    found: dict = {}
    done = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY "):
                found.update(json.loads(line[len("READY "):]))
                break
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    if not done.wait(timeout) or not found:
        _stop(proc)
        state = "timed out" if not done.is_set() else f"exited with {proc.poll()}"
        raise HarnessError(f"{what} {state} before it was ready; last lines of {log_file}:\n{_tail(log_file)}")
    return found


def _stop(proc: subprocess.Popen, grace: float = 60.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        if proc.stdin:
            proc.stdin.close()  # the launcher stops on stdin EOF
    try:
        proc.wait(grace)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def clusters(names: Sequence[str] = ("a", "b"), data_dir: str | None = None,
             start_timeout: float = 300.0, idle_timeout_ms: int | None = None,
             max_frame_bytes: int | None = None) -> Iterator[Clusters]:
    """Start one MiniAccumuloCluster and gateway per name; stop and clean up on exit.

    ``max_frame_bytes`` sets the gateways' Thrift frame limit (default 64 MiB; upstream's proxy: 16 MiB).
    """
    classpath = build_gateway()
    state_dir = Path(tempfile.mkdtemp(prefix="accumulo-harness-"))
    secret_file = state_dir / "gateway.secret"
    password_file = state_dir / "root.password"
    _write_private(secret_file, secrets.token_urlsafe(24))
    _write_private(password_file, secrets.token_urlsafe(24))
    log_file = state_dir / "launcher.log"
    args = ["--clusters", ",".join(names), "--secret-file", str(secret_file)]
    if data_dir:
        args += ["--dir", data_dir]
    if idle_timeout_ms:
        args += ["--idle-timeout-ms", str(idle_timeout_ms)]
    if max_frame_bytes:
        args += ["--max-frame-bytes", str(max_frame_bytes)]
    env = dict(os.environ, ACCUMULO_ROOT_PASSWORD=password_file.read_text())
    env.pop("ACCUMULO_GATEWAY_SECRET", None)
    with open(log_file, "wb") as log:
        jvm_tmp = state_dir / "tmp"  # the clusters' data and temporary files: removed with the state folder
        jvm_tmp.mkdir()
        proc = subprocess.Popen(java_command(classpath, LAUNCHER, *args, tmpdir=jvm_tmp), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, env=env, text=True, cwd=state_dir)
    try:
        ready = wait_for_ready(proc, start_timeout, log_file, "the cluster launcher")
        by_name = {
            c["name"]: Cluster(name=c["name"], instance=c["instance"], zookeepers=c["zookeepers"],
                               user=c.get("user", "root"), gateway_host=c["gateway_host"],
                               gateway_port=int(c["gateway_port"]), dir=c.get("dir", ""),
                               secret_file=str(secret_file), password_file=str(password_file))
            for c in ready["clusters"]
        }
        yield Clusters(by_name, classpath, state_dir, log_file)
    finally:
        _stop(proc)
        shutil.rmtree(state_dir, ignore_errors=True)


class StandaloneGateway:
    """A gateway in its own JVM against a running cluster, so tests can kill -9 and restart it."""

    def __init__(self, cluster: Cluster, classpath: str, port: int = 0, idle_timeout_ms: int | None = None,
                 max_frame_bytes: int | None = None) -> None:
        self.cluster = cluster
        self.classpath = classpath
        self.port = port
        self.extra_args = ["--idle-timeout-ms", str(idle_timeout_ms)] if idle_timeout_ms else []
        if max_frame_bytes:
            self.extra_args += ["--max-frame-bytes", str(max_frame_bytes)]
        self.proc: subprocess.Popen | None = None
        self.log_file = Path(cluster.secret_file).parent / f"gateway-{cluster.name}-{os.getpid()}.log"

    def start(self, timeout: float = 60.0) -> int:
        args = [*self.cluster.java_args(), "--host", "127.0.0.1", "--port", str(self.port), *self.extra_args]
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(java_command(self.classpath, GATEWAY_MAIN, *args, heap="512m"),
                                         stdout=subprocess.PIPE, stderr=log, env=self.cluster.java_env(),
                                         text=True, stdin=subprocess.DEVNULL)
        ready = wait_for_ready(self.proc, timeout, self.log_file, "the standalone gateway")
        self.port = int(ready["port"])
        return self.port

    def kill(self) -> None:
        """SIGKILL: no goodbye to clients, open writers and scanners vanish."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc:
            _stop(self.proc, grace=10)


# --- make cluster --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run embedded Accumulo clusters until Ctrl-C.")
    parser.add_argument("--clusters", default="a,b", help="comma-separated cluster names (default a,b)")
    parser.add_argument("--dir", help="keep cluster data under this folder (default: a temporary one)")
    opts = parser.parse_args(argv)
    started = time.monotonic()

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM cleans up like Ctrl-C: clusters stopped, state folder removed

    signal.signal(signal.SIGTERM, stop)
    try:
        with clusters(opts.clusters.split(","), data_dir=opts.dir) as running:
            from connector.clusters_config import CONFIG_ENV, write_clusters

            config = running.state_dir / "clusters.toml"
            write_clusters(config, {c.name.upper(): c.gateway_options() for c in running})
            print(f"clusters ready in {time.monotonic() - started:.0f}s; Ctrl-C stops them", flush=True)
            for c in running:
                print(f"  {c.name.upper()}: gateway {c.gateway_host}:{c.gateway_port}  instance {c.instance}  "
                      f"zookeepers {c.zookeepers}  secret file {c.secret_file}", flush=True)
            print(f"point the CLI at them (clusters {', '.join(c.name.upper() for c in running)}):\n"
                  f"  export {CONFIG_ENV}={config}", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
            print("stopping clusters ...", flush=True)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
