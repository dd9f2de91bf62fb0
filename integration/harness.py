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
GATEWAY_MAIN = "exportconnector.gateway.GatewayMain"  # the deployable jar's Main-Class
BENCH_WRITER = "exportconnector.gateway.BenchWriter"


class HarnessError(RuntimeError):
    """The embedded clusters could not be built or started; the message says why."""


#: the launcher's stdin commands (each answered by one stdout line, ``OK ...`` or ``ERR ...``)
_LAUNCHER_COMMANDS = ("tserver stop ", "tserver start ")


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
    """Build the gateway when its pom, sources or the IDL changed; return the classpath of the launcher
    (classes plus every dependency, the minicluster too). The deployable jar is ``gateway_jar()``."""
    target = GATEWAY_DIR / "target"
    stamp = target / ".build-hash"
    cp_file = target / "classpath.txt"
    digest = _sources_hash()
    jar_missing = not list(target.glob("accumulo-gateway-*-all.jar"))
    if force or not stamp.exists() or stamp.read_text() != digest or not cp_file.exists() or jar_missing:
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


def gateway_jar() -> Path:
    """The deployable gateway jar (``java -jar <jar> --config gateway.properties``), built by ``build_gateway``."""
    jars = sorted((GATEWAY_DIR / "target").glob("accumulo-gateway-*-all.jar"))
    if not jars:
        raise HarnessError("the gateway jar is missing: run build_gateway() (make gateway-jar)")
    return jars[-1]


def write_properties(path: Path, values: dict[str, str], comment: str) -> None:
    """A Java .properties file with mode 0600 (it may name secret files, or hold Accumulo's auth.token)."""
    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\:").replace("=", "\\=")

    _write_private(path, f"# {comment}\n" + "".join(f"{esc(k)}={esc(v)}\n" for k, v in values.items()))


@dataclass(frozen=True)
class GatewayTls:
    """TLS material of a gateway (PEM paths): its certificate and key, the CA clients verify it with, and
    optionally the CA its clients' certificates must chain to (then client certificates are required)."""

    cert_file: str
    key_file: str
    ca_file: str
    client_ca_file: str | None = None

    def properties(self) -> dict[str, str]:
        props = {"gateway.tls.enabled": "true", "gateway.tls.cert.file": self.cert_file,
                 "gateway.tls.key.file": self.key_file}
        if self.client_ca_file:
            props["gateway.tls.client.ca.file"] = self.client_ca_file
        return props


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def make_test_pki(folder: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> dict[str, Path]:
    """A throwaway PKI made with the openssl CLI (EC P-256, one day): ``ca``, ``server`` (for ``hosts``) and
    ``client`` signed by it, and an unrelated ``other_ca``. Returns PEM paths: ``<name>.pem``, ``<name>.key``."""
    if shutil.which("openssl") is None:
        raise HarnessError("the openssl command is needed to make test certificates")
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}

    def key(name: str) -> None:
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key",
                 cwd=folder)
        os.chmod(folder / f"{name}.key", 0o600)
        out[f"{name}_key"] = folder / f"{name}.key"
        out[name] = folder / f"{name}.pem"

    for ca in ("ca", "other_ca"):
        key(ca)
        _openssl("req", "-x509", "-new", "-key", f"{ca}.key", "-out", f"{ca}.pem", "-days", "1",
                 "-subj", f"/CN=export connector test {ca}", cwd=folder)
    san = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() else f"DNS:{h}" for h in hosts)
    for name, ext in (("server", f"subjectAltName={san}\nextendedKeyUsage=serverAuth"),
                      ("client", "extendedKeyUsage=clientAuth")):
        key(name)
        _openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN=test {name}",
                 cwd=folder)
        (folder / f"{name}.ext").write_text(ext + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext", cwd=folder)
    return out


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

    tls_ca_file: str | None = None  # set when the gateways serve TLS

    def connect(self, **kwargs):  # noqa: ANN003, ANN201 - returns connector.accumulo.Connection
        """A client Connection to this cluster's gateway."""
        from connector.accumulo import Connection

        if self.tls_ca_file:
            kwargs.setdefault("tls_ca_file", self.tls_ca_file)
        return Connection(self.gateway_host, self.gateway_port, secret_file=self.secret_file, **kwargs)

    def gateway_options(self):  # noqa: ANN201 - returns connector.spark.GatewayOptions
        """Where this cluster's gateway is, for the Spark layer and the CLI (the secret stays in its file)."""
        from connector.spark.options import GatewayOptions

        return GatewayOptions(self.gateway_host, self.gateway_port, secret_file=self.secret_file,
                              tls_ca_file=self.tls_ca_file)

    def client_properties(self) -> dict[str, str]:
        """accumulo-client.properties for this cluster (holds the root password: write it 0600)."""
        return {"instance.name": self.instance, "instance.zookeepers": self.zookeepers, "auth.type": "password",
                "auth.principal": self.user, "auth.token": Path(self.password_file).read_text().strip()}

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
    """The running clusters, by name. ``stop_tablet_servers``/``start_tablet_servers`` model a crashed tablet
    server (SIGKILL) and its restart, through the launcher's stdin command channel."""

    by_name: dict[str, Cluster]
    classpath: str
    state_dir: Path
    log_file: Path
    launcher: subprocess.Popen | None = field(default=None, repr=False)
    _command_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __getitem__(self, name: str) -> Cluster:
        return self.by_name[name]

    def __iter__(self) -> Iterator[Cluster]:
        return iter(self.by_name.values())

    def stop_tablet_servers(self, name: str, timeout: float = 60.0) -> str:
        """Kill cluster ``name``'s tablet servers with SIGKILL (a crash: the manager is not told, unflushed
        data is recovered from the write-ahead logs at the next start). Returns the launcher's reply."""
        return self.command(f"tserver stop {name}", timeout)

    def start_tablet_servers(self, name: str, timeout: float = 300.0) -> str:
        """Start cluster ``name``'s tablet servers again; returns once its metadata table is served."""
        return self.command(f"tserver start {name}", timeout)

    def command(self, line: str, timeout: float = 60.0) -> str:
        """Send one command line to the launcher and return its ``OK ...`` reply; ``ERR ...`` raises."""
        proc = self.launcher
        if proc is None or proc.stdin is None or proc.stdout is None or proc.poll() is not None:
            raise HarnessError(f"cannot send {line!r}: the cluster launcher is not running")
        if line not in _LAUNCHER_COMMANDS and not any(line.startswith(c) for c in _LAUNCHER_COMMANDS):
            raise HarnessError(f"unknown launcher command {line!r}")
        with self._command_lock:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            reply: list[str] = []
            stdout = proc.stdout
            reader = threading.Thread(target=lambda: reply.append(stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            if reader.is_alive() or not reply or not reply[0]:
                # the reply may still come: the stream is unusable for later commands either way
                self.launcher = None
                raise HarnessError(f"no reply to {line!r} within {timeout:.0f} s; last lines of "
                                   f"{self.log_file}:\n{_tail(self.log_file)}")
        answer = reply[0].strip()
        if not answer.startswith("OK "):
            raise HarnessError(f"{line!r} failed: {answer}")
        return answer


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
        stop_process(proc)
        state = "timed out" if not done.is_set() else f"exited with {proc.poll()}"
        raise HarnessError(f"{what} {state} before it was ready; last lines of {log_file}:\n{_tail(log_file)}")
    return found


def stop_process(proc: subprocess.Popen, grace: float = 60.0) -> None:
    """Close its stdin and give it ``grace`` seconds to end, then SIGTERM, then (20 s later) SIGKILL."""
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
             max_frame_bytes: int | None = None, tls: GatewayTls | None = None) -> Iterator[Clusters]:
    """Start one MiniAccumuloCluster and gateway per name; stop and clean up on exit.

    Each gateway runs from a generated gateway.properties, as deployed ones do. ``max_frame_bytes`` sets
    their Thrift frame limit (default 64 MiB; upstream's proxy: 16 MiB); ``tls`` makes them serve TLS.
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
    if tls:
        extra = state_dir / "gateway-extra.properties"
        write_properties(extra, tls.properties(), "added to every gateway's generated gateway.properties")
        args += ["--gateway-properties", str(extra)]
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
                               secret_file=str(secret_file), password_file=str(password_file),
                               tls_ca_file=tls.ca_file if tls else None)
            for c in ready["clusters"]
        }
        yield Clusters(by_name, classpath, state_dir, log_file, launcher=proc)
    finally:
        stop_process(proc)
        shutil.rmtree(state_dir, ignore_errors=True)


class StandaloneGateway:
    """The deployable gateway (``java -jar <jar> --config gateway.properties``) against a running cluster, in
    its own JVM, so tests can kill -9 and restart it. Its config files live in the harness's state folder.
    ``classpath`` is unused (kept for callers); the jar is the one ``build_gateway`` made."""

    _seq = 0

    def __init__(self, cluster: Cluster, classpath: str = "", port: int = 0, idle_timeout_ms: int | None = None,
                 max_frame_bytes: int | None = None, tls: GatewayTls | None = None,
                 extra_properties: dict[str, str] | None = None) -> None:
        self.cluster = cluster
        self.port = port
        self.tls = tls
        self.settings: dict[str, str] = {"gateway.host": "127.0.0.1", "gateway.secret.file": cluster.secret_file}
        if idle_timeout_ms:
            self.settings["gateway.idle.timeout.ms"] = str(idle_timeout_ms)
        if max_frame_bytes:
            self.settings["gateway.max.frame.bytes"] = str(max_frame_bytes)
        if tls:
            self.settings.update(tls.properties())
        self.settings.update(extra_properties or {})
        self.proc: subprocess.Popen | None = None
        StandaloneGateway._seq += 1
        self.dir = Path(cluster.secret_file).parent / f"gateway-{cluster.name}-{os.getpid()}-{StandaloneGateway._seq}"
        self.log_file = self.dir.with_suffix(".log")
        self.config_file = self.dir / "gateway.properties"

    def start(self, timeout: float = 60.0) -> int:
        self.dir.mkdir(exist_ok=True)
        client_file = self.dir / "accumulo-client.properties"
        write_properties(client_file, self.cluster.client_properties(), f"cluster {self.cluster.name}")
        write_properties(self.config_file, {**self.settings, "accumulo.client.properties": str(client_file),
                                            "gateway.port": str(self.port)}, "standalone test gateway")
        command = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-jar", str(gateway_jar()), "--config",
                   str(self.config_file)]
        env = {k: v for k, v in os.environ.items() if k not in ("ACCUMULO_GATEWAY_SECRET", "ACCUMULO_PASSWORD")}
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=env, text=True,
                                         stdin=subprocess.DEVNULL)
        ready = wait_for_ready(self.proc, timeout, self.log_file, "the standalone gateway")
        self.port = int(ready["port"])
        return self.port

    def connect(self, **kwargs):  # noqa: ANN003, ANN201 - returns connector.accumulo.Connection
        """A client Connection to this gateway (with its CA file when it serves TLS)."""
        from connector.accumulo import Connection

        if self.tls:
            kwargs.setdefault("tls_ca_file", self.tls.ca_file)
        return Connection("127.0.0.1", self.port, secret_file=self.cluster.secret_file, **kwargs)

    def kill(self) -> None:
        """SIGKILL: no goodbye to clients, open writers and scanners vanish."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc:
            stop_process(self.proc, grace=10)


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
