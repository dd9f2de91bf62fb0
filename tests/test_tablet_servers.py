"""Tablet servers come and go, tablets split and move: a destination cluster with three tablet servers gets new
splits in its table and loses one tablet server (SIGKILL) in the middle of a drain. Nothing is lost and B ends
exact; if the drain hits its ``server_wait`` bound, its error names the bound and a rerun finishes the job."""

from __future__ import annotations

import threading
import time

import pytest

from connector.spark import DrainError, run_batch
from integration.harness import clusters

from . import translator_gate as gate
from .conftest import Scenario, unique_table

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TRANSACTIONS = 3000
BUFFER_BYTES = 1024
SERVER_WAIT = 120.0
#: index rows are counts written "%08d"; 3000 transactions over 300 words give counts of about 1 to 30
SPLITS = [f"{n:08d}".encode() for n in (4, 8, 12, 16, 24)]


@pytest.fixture(scope="module")
def three_tservers():
    """Cluster "c": one MiniAccumuloCluster with three tablet servers (the session's A is the source)."""
    with clusters(("c",), tservers=3) as running:
        yield running


def test_splits_and_a_lost_tablet_server_mid_drain_leave_b_exact(accumulo, three_tservers):
    c = three_tservers["c"]
    s = Scenario(accumulo)
    s.conn_b.close()
    s.b, s.conn_b = c, c.connect()
    s.index = unique_table("index")
    s.conn_b.create_table(s.index)
    try:
        s.produce(TRANSACTIONS, seed=61)
        before = s.depth()
        result: dict[str, object] = {}

        def drain() -> None:
            try:
                result["report"] = run_batch(None, s.job(buffer_bytes=BUFFER_BYTES, server_wait=SERVER_WAIT,
                                                         translator=gate.GATED_DIFFERENCE))
            except BaseException as exc:  # noqa: BLE001 - asserted below
                result["error"] = exc

        gate.arm(after=TRANSACTIONS // 3)  # the drain is held there, mid-way, while the faults are injected
        runner = threading.Thread(target=drain, daemon=True)
        runner.start()
        try:
            assert gate.wait_reached(120), f"the drain never got a third of the way: {result}"
            assert s.depth() < before
            s.conn_b.add_splits(s.index, SPLITS)  # new tablets, which the balancer moves to the other servers
            reply = three_tservers.kill_one_tablet_server("c")
            killed_at = time.monotonic()
        finally:
            gate.open_gate()
        assert reply.endswith("running=2"), reply
        runner.join(SERVER_WAIT + 180)
        assert not runner.is_alive(), "the drain hung after a tablet server was killed"
        took = time.monotonic() - killed_at
        left = s.depth()
        print(f"{len(s.conn_b.list_splits(s.index))} splits on B; the drain ended {took:.1f} s after the kill, "
              f"{'with ' + str(result['error']) if 'error' in result else 'completed'}; {left} entries left")
        if "error" in result:
            error = result["error"]
            assert isinstance(error, DrainError) and f"bound of {SERVER_WAIT:g} s" in str(error), error
            run_batch(None, s.job(server_wait=SERVER_WAIT))  # the rerun finishes the job
        s.verify()  # B exact (no stale, missing or duplicate cell), queue empty
    finally:
        s.close()
