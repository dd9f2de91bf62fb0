"""The deployable gateway (``java -jar <jar> --config gateway.properties``) against a real cluster: what the
jar holds (the gateway and its Accumulo 2.1.6 client, nothing of the harness) and that it serves the embedded
Accumulo 2.1.4 clusters (calls and a whole drain); TLS on the Thrift port, client certificates, the secret on
the wire, refused secrets in the log, one log line for a client that goes away, config errors.

Certificates are made at run time (openssl CLI) in a throwaway folder."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.accumulo import AccumuloSecurityError, Connection, Mutation, Range, RetryPolicy, TlsError
from connector.clusters_config import load_clusters, write_clusters
from connector.spark import run_batch
from connector.spark.options import GatewayOptions
from integration.harness import (
    ROOT,
    GatewayTls,
    StandaloneGateway,
    gateway_jar,
    make_test_pki,
    pom_property,
    pool_options,
    write_properties,
)

from .conftest import Scenario, unique_table

FAST = RetryPolicy(attempts=2, max_seconds=5, max_wait=0.2)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_gateway(accumulo, pki) -> Iterator[StandaloneGateway]:
    gw = StandaloneGateway(accumulo["a"], tls=GatewayTls(str(pki["server"]), str(pki["server_key"]),
                                                         str(pki["ca"])))
    gw.start()
    yield gw
    gw.stop()


def secret_of(accumulo) -> str:
    return Path(accumulo["a"].secret_file).read_text().strip()


# --- the jar: only the gateway, on its own Accumulo client ---------------------------------------------------

#: what only the test harness runs (MiniAccumuloCluster, the launcher, the benchmark writer, the Java example)
#: and Accumulo's server side: none of it may be in the deployable jar
HARNESS_ONLY = ("exportconnector/harness/", "exportconnector/examples/", "org/apache/accumulo/minicluster/",
                "org/apache/accumulo/miniclusterImpl/", "org/apache/accumulo/server/",
                "org/apache/accumulo/tserver/", "org/apache/accumulo/manager/", "org/apache/accumulo/gc/")


def test_the_jar_holds_the_gateway_and_no_harness_class(gateway_classpath):
    jar = gateway_jar()
    with zipfile.ZipFile(jar) as z:
        names = z.namelist()
        core = z.read("META-INF/maven/org.apache.accumulo/accumulo-core/pom.properties").decode()
    ours = sorted(n for n in names if n.startswith("exportconnector/") and n.endswith(".class"))
    assert "exportconnector/gateway/GatewayMain.class" in ours
    assert all(n.startswith("exportconnector/gateway/") for n in ours), [n for n in ours if "/gateway/" not in n]
    stray = [n for n in names if n.startswith(HARNESS_ONLY)]
    assert not stray, f"harness or server classes in the deployable jar: {stray[:10]}"
    assert f"version={pom_property('accumulo.client.version')}" in core.splitlines()
    # every class of ours loads from the jar alone, with every type its fields and methods name
    out = subprocess.run(["java", "-Xmx256m", "-cp", str(jar), str(ROOT / "tests" / "java" / "JarClassesLoad.java"),
                          str(jar), "exportconnector.", "org.apache.accumulo.proxy."],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["failed"] == [] and result["checked"] >= len(ours), result


def test_the_jar_on_the_2_1_6_client_serves_the_2_1_4_clusters(accumulo):
    client, server = pom_property("accumulo.client.version"), pom_property("accumulo.server.version")
    assert client != server and client.startswith("2.1.") and server.startswith("2.1."), (client, server)
    assert {c.accumulo_server for c in accumulo} == {server}
    gateways = [StandaloneGateway(accumulo[name]) for name in ("a", "b")]
    try:
        for gw in gateways:
            gw.start()
            assert gw.ready["accumulo_client"] == client, gw.ready  # the Accumulo classes the jar loaded
        gw_a, gw_b = gateways
        # calls: tables, a batch writer, scans (nextK's direct path), a conditional write, a delete
        table = unique_table("v216")
        with gw_a.connect() as conn:
            conn.create_table(table)
            with conn.batch_writer(table) as w:
                for i in range(500):
                    w.add_mutation(Mutation(b"r%04d" % i).put("f", "q", b"v%d" % i, timestamp=11))
            cells = list(conn.scan(table, batch_size=128))
            assert len(cells) == 500 and cells[7].value == b"v7" and cells[7].ts == 11
            assert [c.value for c in conn.scan(table, Range.exact_row(b"r0042"))] == [b"v42"]
            conn.delete_table(table)
            assert not conn.table_exists(table)
        # a whole drain: A's queue read and its entries deleted, B's index written, all through the 2.1.6 jar
        s = Scenario(accumulo)
        try:
            produced = s.produce(400, seed=61)
            report = run_batch(None, s.job(source=pool_options([gw_a]), dest=pool_options([gw_b])))
            assert report.exported >= produced
            s.verify()  # B exact, the queue empty
        finally:
            s.close()
    finally:
        for gw in gateways:
            gw.stop()


# --- a client that goes away ----------------------------------------------------------------------------------

def _vanish(port: int, reset: bool) -> int:
    """Connect to ``port`` and go away without a word: with a TCP reset (``reset``: a killed client) or an
    orderly close before sending anything (a load balancer's health check). Returns the local port."""
    s = socket.create_connection(("127.0.0.1", port))
    local = s.getsockname()[1]
    if reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    time.sleep(0.2)  # accepted and reading
    s.close()
    return local


def _log_after(log: Path, offset: int, needle: str, timeout: float = 10.0) -> str:
    """The log's text after ``offset``, once it mentions ``needle`` (and a moment longer, for stragglers)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_bytes()[offset:].decode(errors="replace")
        if needle in text:
            time.sleep(0.5)
            return log.read_bytes()[offset:].decode(errors="replace")
        time.sleep(0.1)
    return log.read_bytes()[offset:].decode(errors="replace")


def test_a_client_that_goes_away_costs_one_log_line_not_a_stack_trace(accumulo, tls_gateway):
    plain = StandaloneGateway(accumulo["a"])
    plain.start()
    try:
        for gw, reset in ((plain, True), (tls_gateway, True), (tls_gateway, False)):
            offset = gw.log_file.stat().st_size
            peer = f"127.0.0.1:{_vanish(gw.port, reset)}"
            text = _log_after(gw.log_file, offset, peer)
            lines = [line for line in text.splitlines() if peer in line]
            assert len(lines) == 1 and " INFO " in lines[0] and "disconnected" in lines[0], (gw.tls, reset, text)
            assert "\tat " not in text and "Exception occurred during processing" not in text, text
            assert "Error occurred during processing" not in text, text
        # and the gateway serves on as before
        with plain.connect() as conn:
            assert "accumulo.metadata" in conn.list_tables()
    finally:
        plain.stop()


def test_tls_round_trip(tls_gateway, pki):
    table = unique_table("tls")
    with tls_gateway.connect() as conn:
        conn.create_table(table)
        with conn.batch_writer(table) as w:
            for i in range(1000):
                w.add_mutation(Mutation(b"r%04d" % i).put("f", "q", b"v%d" % i, timestamp=7))
        cells = list(conn.scan(table, batch_size=300))  # nextK fast path on the TLS socket
        assert len(cells) == 1000 and cells[0].value == b"v0" and cells[0].ts == 7
        conn.delete_table(table)


def test_tls_settings_through_clusters_toml_and_spark_options(tls_gateway, pki, tmp_path):
    config = tmp_path / "clusters.toml"
    opts = GatewayOptions("127.0.0.1", tls_gateway.port, secret_file=tls_gateway.cluster.secret_file,
                          tls_ca_file=str(pki["ca"]))
    write_clusters(config, {"A": opts})
    assert f'tls_ca_file = "{pki["ca"]}"' in config.read_text()
    loaded = load_clusters(config)["A"]
    assert loaded.tls_ca_file == str(pki["ca"]) and loaded.tls_cert_file is None
    spark_options = loaded.to_options("source.")
    assert spark_options["source.tls_ca_file"] == str(pki["ca"])
    parsed = GatewayOptions.parse(spark_options, "source.")
    assert parsed == loaded
    with parsed.connect() as conn:
        assert conn.tls is not None
        assert "accumulo.metadata" in conn.list_tables()


def test_tls_by_host_name_and_server_hostname_override(tls_gateway, pki):
    # the certificate names 127.0.0.1 and localhost
    with Connection("localhost", tls_gateway.port, secret_file=tls_gateway.cluster.secret_file,
                    tls_ca_file=pki["ca"]) as conn:
        conn.list_tables()
    other_name = tls_gateway.connect(tls_server_hostname="gateway.example.com", retry=FAST)
    with other_name as conn, pytest.raises(TlsError, match=r"certificate verify failed for host "
                                                         r"gateway\.example\.com.*[Hh]ostname mismatch.*"
                                                         r"check tls_ca_file"):
        conn.list_tables()


def test_wrong_ca_is_refused_with_a_clear_error(tls_gateway, pki):
    started = time.monotonic()
    wrong_ca = tls_gateway.connect(tls_ca_file=pki["other_ca"])
    with wrong_ca as conn, pytest.raises(TlsError, match=r"TLS: certificate verify failed for host 127\.0\.0\.1 "
                                                       r".*check tls_ca_file"):
        conn.list_tables()
    assert time.monotonic() - started < 5, "a certificate that does not verify is not retried"


def test_plain_client_against_tls_gateway_is_refused(tls_gateway):
    started = time.monotonic()
    with Connection("127.0.0.1", tls_gateway.port, secret_file=tls_gateway.cluster.secret_file) as conn, \
            pytest.raises(TlsError, match="the gateway may require TLS"):
        conn.list_tables()
    assert time.monotonic() - started < 10


class Relay:
    """Forwards 127.0.0.1 TCP connections to ``port`` and records every byte, both directions."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.recorded = bytearray()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target))
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                with self.lock:
                    self.recorded += data
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.server.close()


def one_call_through_relay(port: int, secret: str, **tls: object) -> bytes:
    relay = Relay(port)
    try:
        # connect by name "127.0.0.1" to the relay: the certificate check still applies to that name
        with Connection("127.0.0.1", relay.port, secret, **tls) as conn:  # type: ignore[arg-type]
            assert "accumulo.metadata" in conn.list_tables()  # the secret check, then the call
        time.sleep(0.2)
        with relay.lock:
            return bytes(relay.recorded)
    finally:
        relay.close()


def test_secret_never_on_the_wire_with_tls(accumulo, tls_gateway, pki):
    secret = secret_of(accumulo).encode()
    over_tls = one_call_through_relay(tls_gateway.port, secret.decode(), tls_ca_file=pki["ca"])
    assert len(over_tls) > 500, "the relay saw the TLS handshake and the call"
    assert secret not in over_tls
    # control: the same relay in front of the plain gateway of the same cluster does show it
    plain = one_call_through_relay(accumulo["a"].gateway_port, secret.decode())
    assert secret in plain


def test_client_certificates_when_the_gateway_requires_them(accumulo, pki):
    tls = GatewayTls(str(pki["server"]), str(pki["server_key"]), str(pki["ca"]), client_ca_file=str(pki["ca"]))
    gw = StandaloneGateway(accumulo["a"], tls=tls)
    gw.start()
    try:
        with gw.connect(tls_cert_file=pki["client"], tls_key_file=pki["client_key"]) as conn:
            assert "accumulo.metadata" in conn.list_tables()
        with gw.connect(retry=FAST) as conn, \
                pytest.raises(TlsError, match="client certificate"):
            conn.list_tables()
    finally:
        gw.stop()


def test_wrong_secret_is_logged_with_the_peer_never_the_secret(accumulo, tls_gateway, pki):
    guess = "not-the-secret-" + "x" * 12
    with pytest.raises(AccumuloSecurityError, match="refused the shared secret"), \
            Connection("127.0.0.1", tls_gateway.port, guess, tls_ca_file=pki["ca"]) as conn:
        conn.list_tables()
    time.sleep(0.3)
    log = tls_gateway.log_file.read_text()
    assert re.search(r"refused a call with a wrong shared secret from /127\.0\.0\.1:\d+", log)
    assert guess not in log and secret_of(accumulo) not in log


def run_jar(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", "-Xmx256m", "-jar", str(gateway_jar()), "--config", str(config)],
                          capture_output=True, text=True, timeout=120)


def test_config_errors_fail_at_start_with_the_setting_named(accumulo, tmp_path):
    client = tmp_path / "accumulo-client.properties"
    write_properties(client, accumulo["a"].client_properties(), "test")
    base = {"accumulo.client.properties": str(client), "gateway.secret.file": accumulo["a"].secret_file,
            "gateway.port": "0"}
    cases = [
        ({"gateway.prot": "1"}, "unknown setting(s) [gateway.prot]"),
        ({"gateway.tls.enabled": "true"}, "gateway.tls.enabled=true needs gateway.tls.cert.file"),
        ({"gateway.tls.cert.file": "x.pem"}, "gateway.tls.cert.file is set but gateway.tls.enabled is not true"),
        ({"gateway.max.frame.bytes": "12"}, "gateway.max.frame.bytes must be between 1024"),
        ({"gateway.bulk.dir": "relative/bulk"}, "gateway.bulk.dir must be an absolute path"),
        ({"gateway.secret.file": str(tmp_path / "missing")}, "cannot read the gateway shared secret file"),
    ]
    for extra, message in cases:
        config = tmp_path / "gateway.properties"
        write_properties(config, {**base, **extra}, "test")
        proc = run_jar(config)
        assert proc.returncode != 0 and message in proc.stderr, (extra, proc.stderr[-2000:])
        assert "READY" not in proc.stdout
    # a wrong Accumulo password fails at start-up, not on the first call
    write_properties(client, {**accumulo["a"].client_properties(), "auth.token": "wrong"}, "test")
    config = tmp_path / "gateway.properties"
    write_properties(config, base, "test")
    proc = run_jar(config)
    assert proc.returncode == 1 and "start-up failed" in proc.stderr
    assert "wrong" not in proc.stderr.replace("wrong shared", "")
