"""A lost answer on a new socket's first call is the connector's transient error, like every other transport
failure: the shared-secret check a new socket makes (``namespaceExists``) whose reply never comes surfaces from
``raw_client`` as ``ConnectionLostError``, which the callers that start over (a scan resuming, a commit settling
its outcome) catch, never as thriftpy2's ``TTransportException``. Pure client logic, against a socket server that
reads each call and closes the connection without answering."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from connector.accumulo import Connection, ConnectionLostError
from connector.accumulo.transport import RetryPolicy
from connector.errors import ConnectorError


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = conn.recv(n - len(data))
        if not part:
            return data
        data += part
    return data


class ReplyDropper:
    """Accepts connections, reads one framed call on each (length first), and closes without a reply."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.calls = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                head = _read_exactly(conn, 4)
                if len(head) == 4 and head[0] < 0x10:  # a framed Thrift call (not a TLS probe's hello): read it
                    _read_exactly(conn, struct.unpack(">I", head)[0])
                    self.calls += 1

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def dropper() -> Iterator[ReplyDropper]:
    server = ReplyDropper()
    yield server
    server.close()


def test_a_lost_answer_to_the_secret_check_is_a_connection_lost_error(dropper):
    conn = Connection("127.0.0.1", dropper.port, "secret", timeout=5.0, retry=RetryPolicy(attempts=1))
    try:
        with pytest.raises(ConnectorError) as raised, conn.raw_client("nextK"):
            pytest.fail("the block must not run without a socket whose secret was checked")
        assert isinstance(raised.value, ConnectionLostError), repr(raised.value)
        assert str(raised.value).startswith("nextK: "), str(raised.value)
        assert dropper.calls >= 1, "the secret check was sent and its answer dropped"
    finally:
        conn.close()


def test_a_lost_answer_to_the_secret_check_is_retried_by_calls(dropper):
    """The retried path (``call``) already retried it; it still ends as ConnectionLostError, after its attempts."""
    conn = Connection("127.0.0.1", dropper.port, "secret", timeout=5.0,
                      retry=RetryPolicy(attempts=2, initial_wait=0.01, max_wait=0.01, first_contact_attempts=2))
    try:
        with pytest.raises(ConnectionLostError):
            conn.table_exists("t")
        assert dropper.calls >= 2, "retried on a fresh socket"
    finally:
        conn.close()
