"""The deployable gateway in its own JVM beside a running cluster, so tests can SIGKILL and restart it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .build import gateway_jar
from .cluster import Cluster
from .common import write_properties
from .pki import GatewayTls
from .processes import stop_process, wait_for_ready


class StandaloneGateway:
    """The deployable gateway (``java -jar <jar> --config gateway.properties``) against a running cluster, in
    its own JVM, so tests can kill -9 and restart it. Its config files live in the harness's state folder.
    ``classpath`` is unused (kept for callers); the jar is the one ``build_gateway`` made."""

    _seq = 0

    def __init__(self, cluster: Cluster, classpath: str = "", port: int = 0, idle_timeout_ms: int | None = None,
                 max_frame_bytes: int | None = None, tls: GatewayTls | None = None,
                 extra_properties: dict[str, str] | None = None,
                 client_properties: dict[str, str] | None = None, line: str | None = None) -> None:
        self.cluster = cluster
        #: the Accumulo line of the jar it runs: the cluster's own unless told (another line's is refused at start)
        self.line = line or cluster.accumulo_line
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
        #: accumulo-client.properties changes over the cluster's own (a wrong principal, another keytab, ...)
        self.client_overrides = dict(client_properties or {})
        self.proc: subprocess.Popen | None = None
        StandaloneGateway._seq += 1
        self.dir = Path(cluster.secret_file).parent / f"gateway-{cluster.name}-{os.getpid()}-{StandaloneGateway._seq}"
        self.log_file = self.dir.with_suffix(".log")
        self.config_file = self.dir / "gateway.properties"
        self.client_file = self.dir / "accumulo-client.properties"  # 0600: it holds the password
        self.ready: dict[str, Any] = {}  # its READY line: host, port, tls, accumulo_client (the jar's release)

    def start(self, timeout: float = 60.0) -> int:
        self.dir.mkdir(exist_ok=True)
        write_properties(self.client_file, {**self.cluster.client_properties(), **self.client_overrides},
                         f"cluster {self.cluster.name}")
        write_properties(self.config_file, {**self.settings, "accumulo.client.properties": str(self.client_file),
                                            "gateway.port": str(self.port)}, "standalone test gateway")
        command = ["java", "-Xmx512m", "-XX:+UseSerialGC", *self.cluster.jvm_args(), "-jar",
                   str(gateway_jar(self.line)), "--config", str(self.config_file)]
        env = {k: v for k, v in os.environ.items() if k not in ("ACCUMULO_GATEWAY_SECRET", "ACCUMULO_PASSWORD")}
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=env, text=True,
                                         stdin=subprocess.DEVNULL)
        self.ready = wait_for_ready(self.proc, timeout, self.log_file, "the standalone gateway")
        self.port = int(self.ready["port"])
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

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextlib.contextmanager
def gateway_pool(cluster: Cluster, count: int = 2, **options: Any) -> Iterator[list[StandaloneGateway]]:
    """``count`` standalone gateways for ``cluster`` (started side by side; stopped on exit), each killable on
    its own. ``pool_options`` names them all for a drain; ``options`` go to each ``StandaloneGateway``."""
    gateways = [StandaloneGateway(cluster, **options) for _ in range(count)]
    try:
        start_all(gateways)
        yield gateways
    finally:
        for g in gateways:
            g.stop()


def start_all(gateways: list[StandaloneGateway], timeout: float = 60.0) -> None:
    """Start every gateway of ``gateways`` side by side (each its own JVM); raises the first failure."""
    errors: list[BaseException] = []

    def start(g: StandaloneGateway) -> None:
        try:
            g.start(timeout=timeout)
        except BaseException as exc:  # noqa: BLE001 - raised below, on the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(g,)) for g in gateways]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def pool_options(gateways: list[StandaloneGateway], also: Sequence[str] = (),
                 **options: Any):  # noqa: ANN201 - GatewayOptions
    """GatewayOptions naming every gateway of ``gateways`` (one cluster's) after the ``also`` addresses (the
    launcher's gateway, say), with the cluster's secret file and the gateways' TLS CA."""
    from connector.accumulo.options import GatewayOptions

    first = gateways[0]
    options.setdefault("secret_file", first.cluster.secret_file)
    if first.tls:
        options.setdefault("tls_ca_file", first.tls.ca_file)
    return GatewayOptions.pool([*also, *(g.address for g in gateways)], **options)
