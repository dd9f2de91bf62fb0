"""Several gateways for one cluster, on real clusters: a drain spread over two gateways of B (or of A) completes
through the other when one is SIGKILLed in the middle of it; B ends exact and the queue empty."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from connector.spark import run_batch
from integration.harness import StandaloneGateway, gateway_pool, pool_options

from . import translator_gate as gate
from .conftest import Scenario

pytestmark = pytest.mark.cluster

#: the drain is held a third of the way through these (tests/translator_gate.py) while a gateway is killed
TRANSACTIONS = 3000
BUFFER_BYTES = 16384


def _sockets_to(port: int) -> int:
    """Established TCP connections to ``port`` on this machine (from /proc: no extra dependency)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01":
                count += 1
    return count


def test_a_connection_skips_a_dead_gateway(accumulo):
    b = accumulo["b"]
    dead = StandaloneGateway(b)
    port = dead.start()
    dead.kill()  # its port is now refused
    from connector.accumulo import Connection

    conn = Connection(hosts=[f"127.0.0.1:{port}", f"{b.gateway_host}:{b.gateway_port}"], secret_file=b.secret_file)
    try:
        for _ in range(4):  # new sockets take the gateways in turn: the dead one is passed over each time
            assert conn.namespace_exists("accumulo")
            conn._drop_thread_client()
    finally:
        conn.close()


@pytest.mark.parametrize("cluster", ["b", "a"])
def test_one_of_two_gateways_killed_mid_drain_the_drain_completes_through_the_other(accumulo, cluster):
    s = Scenario(accumulo)
    try:
        s.produce(TRANSACTIONS, seed=53)
        before = s.depth()
        with gateway_pool(accumulo[cluster], 2) as gateways:
            role = "dest" if cluster == "b" else "source"
            job = s.job(**{role: pool_options(gateways)}, buffer_bytes=BUFFER_BYTES, server_wait=120.0,
                        translator=gate.GATED_DIFFERENCE)
            gate.arm(after=TRANSACTIONS // 3)  # the drain stops there, mid-way, until the gateway is killed
            result: dict[str, object] = {}

            def drain() -> None:
                try:
                    result["report"] = run_batch(None, job)
                except BaseException as exc:  # noqa: BLE001 - asserted below
                    result["error"] = exc

            runner = threading.Thread(target=drain, daemon=True)
            runner.start()
            try:
                assert gate.wait_reached(120), f"the drain never got a third of the way: {result}"
                in_use = {g.port: _sockets_to(g.port) for g in gateways}
                victim = max(gateways, key=lambda g: in_use[g.port])  # the one the drain leans on
                assert in_use[victim.port], f"the drain holds no socket to either gateway: {in_use}"
                killed_at = time.monotonic()
                victim.kill()
            finally:
                gate.open_gate()
            runner.join(300)
            assert not runner.is_alive(), "the drain hung after a gateway was killed"
        print(f"{cluster.upper()}: killed a gateway with {in_use[victim.port]} sockets in use (sockets per "
              f"gateway {in_use}); the drain finished {time.monotonic() - killed_at:.1f} s later")
        assert "error" not in result, result.get("error")
        assert result["report"].exported >= before  # type: ignore[attr-defined]
        s.verify()  # B exact, queue empty
    finally:
        s.close()
