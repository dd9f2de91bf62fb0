"""Embedded clusters: one launcher JVM runs a MiniAccumuloCluster and a gateway per name.

``clusters(["a", "b"])`` is a context manager (tests use the session fixture in tests/conftest.py). Secrets
are generated per run, passed to the launcher through its environment and a 0600 file, and never printed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .build import LAUNCHER, NATIVE_DIR, accumulo_line, build_gateway, java_command, native_dir
from .common import HarnessError, tail, write_private, write_properties
from .pki import GatewayTls
from .processes import stop_process, wait_for_ready

#: the launcher's stdin commands (each answered by one stdout line, ``OK ...`` or ``ERR ...``)
_LAUNCHER_COMMANDS = ("tserver stop ", "tserver start ", "tserver kill-one ")


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
    native_maps: bool = False  # its tablet servers use Accumulo's native in-memory maps (libaccumulo.so)
    log_dir: str = ""  # MAC's log folder: each server process's stdout/stderr (TabletServer_*.err, ...)
    #: the accumulo-client.properties the launcher generated for this cluster's gateway (0600: it holds the
    #: root password)
    gateway_client_properties: str = ""
    accumulo_server: str = ""  # the Accumulo release of its servers (and of the launcher's gateways): 2.1.4, 3.0.0
    accumulo_line: str = "2.1"  # its Accumulo line: which deployable gateway jar serves it (``gateway_jar(line)``)
    #: a Kerberized cluster (``clusters(..., kerberos=True)``): the launcher's KDC, as its READY line says
    #: (realm, krb5_conf, principal, server_primary, keytabs by name); None: root password
    kerberos: dict[str, Any] | None = None

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
        """accumulo-client.properties for this cluster (holds the root password, or names root's keytab:
        write it 0600). A Kerberized cluster's are Accumulo 2.1's Kerberos client properties."""
        where = {"instance.name": self.instance, "instance.zookeepers": self.zookeepers}
        if self.kerberos:
            return {**where, "auth.type": "kerberos", "auth.principal": self.kerberos["principal"],
                    "auth.token": self.kerberos["keytabs"]["root"], "sasl.enabled": "true",
                    "sasl.kerberos.server.primary": self.kerberos["server_primary"]}
        return {**where, "auth.type": "password", "auth.principal": self.user,
                "auth.token": Path(self.password_file).read_text().strip()}

    def jvm_args(self) -> list[str]:
        """System properties a JVM talking to this cluster needs: the KDC's krb5.conf when Kerberized."""
        return [f"-Djava.security.krb5.conf={self.kerberos['krb5_conf']}"] if self.kerberos else []

    def java_env(self) -> dict[str, str]:
        """Environment for a Java program of the harness module talking to this cluster directly."""
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

    def kill_one_tablet_server(self, name: str, timeout: float = 60.0) -> str:
        """SIGKILL one of cluster ``name``'s tablet servers (of several: the others take over its tablets once
        the manager notices, after its ZooKeeper session expires). ``start_tablet_servers`` replaces it."""
        return self.command(f"tserver kill-one {name}", timeout)

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
                                   f"{self.log_file}:\n{tail(self.log_file)}")
        answer = reply[0].strip()
        if not answer.startswith("OK "):
            raise HarnessError(f"{line!r} failed: {answer}")
        return answer


@contextlib.contextmanager
def clusters(names: Sequence[str] = ("a", "b"), data_dir: str | None = None,
             start_timeout: float = 600.0, idle_timeout_ms: int | None = None,
             max_frame_bytes: int | None = None, tls: GatewayTls | None = None,
             tservers: int = 1, native_maps: Path | None = NATIVE_DIR, kerberos: bool = False,
             line: str | None = None) -> Iterator[Clusters]:
    """Start one MiniAccumuloCluster and gateway per name; stop and clean up on exit.

    ``tservers``: tablet servers per cluster (each a JVM of up to 768 MiB). More gateways for a cluster:
    :func:`~integration.harness.standalone.gateway_pool`.

    Each gateway runs from a generated gateway.properties, as deployed ones do. ``max_frame_bytes`` sets
    their Thrift frame limit (default 64 MiB; upstream's proxy: 16 MiB); ``tls`` makes them serve TLS.
    ``native_maps``: the folder holding libaccumulo.so (``build_gateway`` builds it there); the tablet servers
    use native in-memory maps when it loads, Java's map otherwise (None: always; the launcher's log says which).
    ``kerberos``: the launcher starts a KDC and Kerberizes every cluster (SASL RPC, Kerberos security handlers,
    root = its root principal); the gateways log in from root's keytab (``Cluster.kerberos``).
    ``line``: the Accumulo line of the clusters and their gateways (2.1, 3.0; default ``$ACCUMULO_LINE``, else 2.1).
    """
    line = accumulo_line(line)
    classpath = build_gateway(line=line)
    if native_maps == NATIVE_DIR:  # the default: the line's own build of the library
        native_maps = native_dir(line)
    state_dir = Path(tempfile.mkdtemp(prefix="accumulo-harness-"))
    secret_file = state_dir / "gateway.secret"
    password_file = state_dir / "root.password"
    write_private(secret_file, secrets.token_urlsafe(24))
    write_private(password_file, secrets.token_urlsafe(24))
    log_file = state_dir / "launcher.log"
    args = ["--clusters", ",".join(names), "--secret-file", str(secret_file)]
    if data_dir:
        args += ["--dir", data_dir]
    if idle_timeout_ms:
        args += ["--idle-timeout-ms", str(idle_timeout_ms)]
    if max_frame_bytes:
        args += ["--max-frame-bytes", str(max_frame_bytes)]
    if tservers != 1:
        args += ["--tservers", str(tservers)]
    if native_maps is not None:
        args += ["--native-maps", str(native_maps)]
    if kerberos:
        args += ["--kerberos"]
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
                               tls_ca_file=tls.ca_file if tls else None,
                               native_maps=bool(c.get("native_maps", False)), log_dir=c.get("log_dir", ""),
                               gateway_client_properties=c.get("gateway_client_properties", ""),
                               accumulo_server=c.get("accumulo_server", ""), accumulo_line=line,
                               kerberos=ready.get("kdc") if c.get("kerberos") else None)
            for c in ready["clusters"]
        }
        yield Clusters(by_name, classpath, state_dir, log_file, launcher=proc)
    finally:
        stop_process(proc)
        shutil.rmtree(state_dir, ignore_errors=True)
