"""The simulated gateway's wire: it answers each call with exactly the bytes thriftpy2's own processor writes, also
when it answers from its caches (a call message decoded once, a simple reply encoded once)."""

from __future__ import annotations

import pytest
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TProcessor
from thriftpy2.transport import TMemoryBuffer

from connector.accumulo import Mutation
from connector.accumulo._idl import proxy
from connector.accumulo.errors import AccumuloError
from integration.sim import transport
from integration.sim.accumulo import SimAccumulo
from integration.sim.gateway import SimGateway
from integration.sim.transport import SimServer, sim_connection


def test_every_reply_is_the_bytes_thriftpy2_writes_cached_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    exchanged: list[tuple[bytes, bytes | None]] = []
    handle = SimServer.handle

    def recorded(self: SimServer, message: bytes) -> bytes | None:
        reply = handle(self, message)
        exchanged.append((message, reply))
        return reply

    monkeypatch.setattr(SimServer, "handle", recorded)
    conn = sim_connection(SimGateway(SimAccumulo("t", clock=lambda: 1_000_000)), name="t")
    for _ in range(3):  # the same calls again: answered from the caches
        assert conn.table_exists("t") in (False, True)
        if not conn.table_exists("t"):
            conn.create_table("t")
        conn.write("t", [Mutation(b"r").put(b"f", b"q", b"v", timestamp=5)])
        assert [c.value for c in conn.scan("t")] == [b"v"]
        with pytest.raises(AccumuloError):
            conn.create_table("t")  # a declared exception
    assert len(exchanged) > 20

    # the same messages, in the same order, through thriftpy2's processor over a twin gateway
    twin = TProcessor(proxy.AccumuloProxy, SimGateway(SimAccumulo("t", clock=lambda: 1_000_000)))
    for message, reply in exchanged:
        out = TMemoryBuffer()
        try:
            twin.process(TCompactProtocol(TMemoryBuffer(message)), TCompactProtocol(out))
        except Exception:  # noqa: BLE001 - an undeclared exception: SimServer encodes it itself
            continue
        assert reply == (out.getvalue() or None), message


@pytest.mark.parametrize("seqid", [0, 1, 127, 128, 300, 2**31 - 1])
def test_a_cached_reply_header_is_the_one_thriftpy2_writes(seqid: int) -> None:
    from thriftpy2.thrift import TMessageType

    out = TMemoryBuffer()
    TCompactProtocol(out).write_message_begin("closeScanner", TMessageType.REPLY, seqid)
    assert transport._reply_header("closeScanner", seqid) == out.getvalue()
