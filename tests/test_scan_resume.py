"""A scan's resumes (pure logic of ``connector.accumulo.scanner``, no gateway): a lost page resumes right after
the last cell yielded, after a jittered pause of the connection's retry policy; the failures counted are those
in a row, so a scan that lives long enough to lose its scanner a hundred times, with progress between, still
ends (the review's finding: it failed on its 40th resume in its life, and every task retried in lockstep)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.transport import TMemoryBuffer

from connector.accumulo import scanner
from connector.accumulo._idl import proxy
from connector.accumulo.cells import Cell
from connector.accumulo.errors import ConnectionLostError
from connector.accumulo.transport import RetryPolicy


class _Session:
    """Just enough of ``Session`` for ``scan``: a table of one-cell rows served a page at a time by scanners
    that honour the range's start; every ``lose_every``-th page is lost (the connection dropped)."""

    def __init__(self, rows: int, lose_every: int, attempts: int = 5) -> None:
        self.rows = [b"%06d" % i for i in range(rows)]
        self.lose_every = lose_every
        self.retry = RetryPolicy(attempts=attempts, initial_wait=0.1, max_wait=5.0)
        self.server_wait_ms = 0
        self.pages = 0
        self.losses = 0
        self.scanners: dict[str, list[bytes]] = {}

    def address(self) -> str:
        return "fake:1"

    shared_secret = "secret"

    def call_encoded(self, method: str, payload: bytes, **_: Any) -> Any:
        """The scanner's call as the client encoded it, read back as a gateway reads it."""
        proto = TCompactProtocol(TMemoryBuffer(payload))
        assert proto.read_message_begin()[0] == method
        call = proxy.AccumuloProxy.createScanner_args()
        call.read(proto)
        return self.call(method, call.tableName, call.options)

    def call(self, method: str, *args: Any, **_: Any) -> Any:
        assert method == "createScanner"
        options = args[1]
        start = options.range.start.row if options.range.start else b""
        inclusive = options.range.startInclusive if options.range.start else True
        left = [r for r in self.rows if r > start or (inclusive and r == start)]
        scanner_id = f"s{len(self.scanners)}"
        self.scanners[scanner_id] = left
        return scanner_id

    @contextlib.contextmanager
    def raw_client(self, what: str) -> Iterator[Any]:
        yield self


def _fetch(session: _Session, scanner_id: str, k: int) -> tuple[list[Cell], bool]:
    session.pages += 1
    if session.pages % session.lose_every == 0:
        session.losses += 1
        raise ConnectionLostError("the gateway went away")
    left = session.scanners[scanner_id]
    page, session.scanners[scanner_id] = left[:k], left[k:]
    return [Cell(r, b"f", b"q", b"", 1, b"v") for r in page], bool(session.scanners[scanner_id])


@pytest.fixture
def pauses(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(scanner.time, "sleep", slept.append)
    monkeypatch.setattr(scanner, "_close_quietly", lambda conn, scanner_id: None)
    monkeypatch.setattr(scanner, "next_k_cells", _fetch)
    return slept


def test_a_scan_that_resumes_a_hundred_times_with_progress_between_reads_every_cell_once(pauses):
    session = _Session(rows=300, lose_every=2, attempts=5)  # a page, a loss, a page...: far past 5 in its life
    cells = list(scanner.scan(session, "t", None, None, None, (), batch_size=2, isolated=False))
    assert [c.row for c in cells] == session.rows
    assert session.losses >= 100 and len(pauses) == session.losses


def test_failures_in_a_row_without_progress_still_fail_the_scan(pauses):
    session = _Session(rows=10, lose_every=1, attempts=4)  # every page lost: no progress ever
    with pytest.raises(ConnectionLostError):
        list(scanner.scan(session, "t", None, None, None, (), batch_size=2, isolated=False))
    assert session.losses == 4


def test_the_pauses_are_jittered_and_bounded_by_the_policy(pauses):
    session = _Session(rows=400, lose_every=2)
    list(scanner.scan(session, "t", None, None, None, (), batch_size=2, isolated=False))
    assert all(0 <= p <= session.retry.max_wait for p in pauses)
    assert len(set(pauses)) > len(pauses) // 2  # not one fixed schedule shared by every task
