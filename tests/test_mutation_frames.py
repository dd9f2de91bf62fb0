"""``BatchWriter.add_mutation`` encodes through the Rust encoder of ``update`` (the one ``add_cells`` uses) and
sends exactly the frames the Python encoder it replaced sent: same chunks, same bytes, same refusals, same
replay after a lost connection. The old path is rebuilt here from the oracle (``tests/wire_oracle.py``) and
the frame rule (``connector.accumulo.wire.frames``); no JVM: the writer talks to a stub session."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer, TTransportException

from connector import _native
from connector.accumulo import BatchWriter, ColumnUpdate, InvalidMutationError, Mutation, RetryPolicy
from connector.accumulo._idl import MAX_TIMESTAMP, proxy
from connector.accumulo.wire import native
from connector.accumulo.wire.frames import largest_binary, mutation_fits, update_entries_budget
from connector.accumulo.wire.structs import column_update_to_thrift

from .wire_oracle import encode_column_update, encode_row_entry, encode_update_message


class Trans:
    def __init__(self, client: StubClient) -> None:
        self.client = client
        self.pending = b""

    def write(self, b: bytes) -> None:
        self.pending += b

    def flush(self) -> None:
        frame, self.pending = self.pending, b""
        if self.client.fail_sends:
            self.client.fail_sends -= 1
            raise TTransportException(TTransportException.END_OF_FILE, "stub: connection reset")
        self.client.session.sent.append(frame)


class StubClient:
    def __init__(self, session: StubSession) -> None:
        self.session = session
        self.fail_sends = session.fail_sends
        session.fail_sends = 0
        self._oprot = type("Protocol", (), {})()
        self._oprot.trans = Trans(self)

    def createWriter(self, *_: Any) -> str:  # noqa: N802 - the Thrift method's name
        self.session.writers += 1
        return f"writer-{self.session.writers}"

    def flush(self, *_: Any) -> None:
        self.session.flushes += 1

    def closeWriter(self, *_: Any) -> None:  # noqa: N802
        pass

    def close(self) -> None:
        pass


class StubSession:
    """What a BatchWriter needs of a connection (``session.Session``), recording every frame sent."""

    host, port, server_wait, server_wait_ms, shared_secret = "stub", 1, None, 0, "secret"

    def __init__(self, max_frame_bytes: int = 15 << 20, fail_sends: int = 0) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.retry = RetryPolicy(attempts=3, initial_wait=0.0, max_wait=0.0)
        self.sent: list[bytes] = []
        self.writers = self.flushes = 0
        self.fail_sends = fail_sends

    def address(self) -> str:
        return "stub:1"

    def retry_policy(self) -> RetryPolicy:
        return self.retry

    def new_client(self) -> StubClient:
        return StubClient(self)

    def call(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("a writer makes no generic calls")

    @contextlib.contextmanager
    def raw_client(self, what: str) -> Any:
        raise AssertionError("a writer makes no raw calls")
        yield

    def timed_out(self, *_: Any) -> Exception:
        raise AssertionError


def oracle_frames(mutations: list[Mutation], writer_id: str, max_frame_bytes: int, chunk_bytes: int) -> list[bytes]:
    """The frames the writer sent before (Python encoder), chunked by the same rule."""
    budget = update_entries_budget(max_frame_bytes)
    chunk_bytes = min(chunk_bytes, budget)
    frames: list[bytes] = []
    rows: dict[bytes, list[bytes]] = {}
    size = largest_in_chunk = 0

    def send() -> None:
        nonlocal rows, size, largest_in_chunk
        if rows:
            entries = b"".join(encode_row_entry(r, ups) for r, ups in rows.items())
            frames.append(encode_update_message(writer_id, len(rows), entries))
        rows, size, largest_in_chunk = {}, 0, 0

    for m in mutations:
        encoded = [encode_column_update(u) for u in m.updates]
        cost = len(encode_row_entry(m.row, encoded))
        largest = largest_binary(m.row, m.updates, m.size)
        assert cost + largest <= budget, "the test only sends mutations the writer accepts"
        if rows and size + cost + max(largest, largest_in_chunk) > budget:
            send()
        rows.setdefault(m.row, []).extend(encoded)
        size += cost
        largest_in_chunk = max(largest, largest_in_chunk)
        if size >= chunk_bytes:
            send()
    send()
    return frames


def thriftpy2_update(writer_id: str, rows: dict[bytes, list[ColumnUpdate]]) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("update", TMessageType.ONEWAY, 0)
    cells = {r: [column_update_to_thrift(u) for u in ups] for r, ups in rows.items()}
    proto.write_struct(proxy.AccumuloProxy.update_args(writer=writer_id, cells=cells))
    proto.write_message_end()
    return buf.getvalue()


small = st.binary(max_size=120)
timestamp = st.one_of(st.none(), st.integers(0, 300), st.integers(0, MAX_TIMESTAMP))


@st.composite
def mutation(draw: Any) -> Mutation:
    m = Mutation(draw(st.sampled_from([b"a", b"b", b"row\x00\xff"]) | st.binary(min_size=1, max_size=30)))
    for _ in range(draw(st.integers(1, 20))):
        cv = draw(st.sampled_from([b"", b"a&b", b"x|(y&z)"]))
        if draw(st.booleans()):
            m.delete(draw(small), draw(small), visibility=cv, timestamp=draw(timestamp))
        else:
            m.put(draw(small), draw(small), draw(st.binary(max_size=400)), visibility=cv, timestamp=draw(timestamp))
    return m


@settings(max_examples=200, deadline=None)
@given(rows=st.dictionaries(st.binary(min_size=1, max_size=200), st.lists(mutation(), min_size=1, max_size=4),
                            max_size=12),
       writer_id=st.text(max_size=40))
def test_entries_from_column_updates_match_thriftpy2_and_the_oracle(rows, writer_id):
    """Each mutation's updates encoded on their own, a row's mutations put together in one entry."""
    chunk = {}
    for r, ms in rows.items():
        for m in ms:
            structs, cost = native.encode_column_updates(r, m.updates)
            assert structs == b"".join(encode_column_update(u) for u in m.updates)
            assert cost == len(encode_row_entry(r, [encode_column_update(u) for u in m.updates]))
        chunk[r] = [sum(len(m.updates) for m in ms), *(native.encode_column_updates(r, m.updates)[0] for m in ms)]
    n, entries = native.encode_update_entries(chunk)
    assert n == len(rows)
    updates = {r: [u for m in ms for u in m.updates] for r, ms in rows.items()}
    oracle = b"".join(encode_row_entry(r, [encode_column_update(u) for u in ups]) for r, ups in updates.items())
    assert entries == oracle
    message = native.update_message(writer_id, n, entries)
    assert message == encode_update_message(writer_id, n, oracle) == thriftpy2_update(writer_id, updates)


@settings(max_examples=150, deadline=None)
@given(mutations=st.lists(mutation(), min_size=1, max_size=40), chunk_bytes=st.integers(200, 20_000))
def test_add_mutation_sends_the_frames_the_python_encoder_sent(mutations, chunk_bytes):
    session = StubSession(max_frame_bytes=64 << 10)
    with BatchWriter(session, "t", chunk_bytes=chunk_bytes, max_memory=64 << 20) as writer:
        for m in mutations:
            writer.add_mutation(m)
    assert session.sent == oracle_frames(mutations, "writer-1", 64 << 10, chunk_bytes)
    assert writer.mutations_added == len(mutations)


def test_later_changes_to_an_added_mutation_are_not_sent():
    session = StubSession()
    m = Mutation(b"r").put(b"f", b"q", b"v", timestamp=1)
    with BatchWriter(session, "t") as writer:
        writer.add_mutation(m)
        m.put(b"f", b"q2", b"later", timestamp=2)
        writer.add_mutation(Mutation(b"r").put(b"f", b"q3", b"w", timestamp=3))
    sent = [ColumnUpdate(b"f", b"q", b"", 1, b"v", False), ColumnUpdate(b"f", b"q3", b"", 3, b"w", False)]
    assert session.sent == [thriftpy2_update("writer-1", {b"r": sent})]


def test_a_lost_connection_replays_the_same_chunks_for_the_new_writer():
    mutations = [Mutation(b"row%03d" % i).put(b"f", b"q", b"v" * 50, timestamp=i).delete(b"f", b"old")
                 for i in range(200)]
    session = StubSession(fail_sends=1)  # the first frame is lost with its connection
    with BatchWriter(session, "t", chunk_bytes=2048) as writer:
        writer.add_mutations(mutations)
    assert session.writers == 2  # reopened once, replayed everything to the new writer
    assert session.sent == oracle_frames(mutations, "writer-2", 15 << 20, 2048)
    assert session.flushes == 2  # the replay's, at the next add_mutation, and close()'s


def test_refusals_keep_their_words_and_send_nothing():
    session = StubSession(max_frame_bytes=64 << 10)
    with BatchWriter(session, "t") as writer:
        with pytest.raises(InvalidMutationError, match=r"mutation for row b'empty' has no updates"):
            writer.add_mutation(Mutation("empty"))
        big = Mutation("big").put("f", "q", b"x" * 40_000, timestamp=1)
        cost = len(encode_row_entry(big.row, [encode_column_update(u) for u in big.updates]))
        assert not mutation_fits(big, 64 << 10)
        with pytest.raises(InvalidMutationError) as refused:
            writer.add_mutation(big)
        assert str(refused.value) == (
            f"mutation for row b'big' encodes to {cost} bytes with a largest value of {big.size}: one Thrift "
            f"frame under max_frame_bytes=65536 cannot carry it (frame + largest value must fit; see "
            f"connector.accumulo.wire.frames); split it, or raise max_frame_bytes if the server allows "
            f"(upstream proxy: maxFrameSize, gateway: --max-frame-bytes)")
        with pytest.raises(InvalidMutationError, match="over the limit of 100 \\(max_mutation_bytes\\)"):
            BatchWriter(session, "t", max_mutation_bytes=100).add_mutation(Mutation("r").put("f", "q", b"v" * 200))
        assert session.sent == []
        writer.add_mutation(Mutation("ok").put("f", "q", b"v", timestamp=1))
    assert session.sent == [thriftpy2_update("writer-1", {b"ok": [ColumnUpdate(b"f", b"q", b"", 1, b"v", False)]})]


def test_the_native_entries_refuse_what_a_mutation_would_and_map_the_crate_errors():
    good = ColumnUpdate(b"f", b"q", b"", 1, b"v", False)
    with pytest.raises(InvalidMutationError, match=r"row b'r': timestamp must be an int in \[0, 2\*\*63-1\], got -1"):
        native.encode_column_updates(b"r", [good._replace(timestamp=-1)])
    with pytest.raises(InvalidMutationError, match=r"got 9223372036854775808"):
        native.encode_column_updates(b"r", [good, good._replace(timestamp=MAX_TIMESTAMP + 1)])
    with pytest.raises(InvalidMutationError, match="row must not be empty"):
        native.encode_column_updates(b"", [good])
    with pytest.raises(TypeError, match="ColumnUpdate.cq must be bytes, not str"):
        native.encode_column_updates(b"r", [good._replace(cq="q")])
    with pytest.raises(TypeError, match="expected ColumnUpdate tuples"):
        native.encode_column_updates(b"r", [b"not a tuple"])
    with pytest.raises(TypeError, match="6 fields"):
        native.encode_column_updates(b"r", [(b"f", b"q")])
    with pytest.raises(TypeError, match="expected a list of ColumnUpdate"):
        native.encode_column_updates(b"r", (good,))
    with pytest.raises(TypeError, match=r"rows must map bytes to \[n, bytes, ...\]"):
        native.encode_update_entries({b"r": [good]})
    with pytest.raises(ValueError, match="rows in"):
        native.update_message("w", 1, b"")
    # a delete carries no value, whatever its value field holds; None is fine there
    assert native.encode_column_updates(b"r", [good._replace(value=None, delete=True)])[0] == \
        encode_column_update(good._replace(value=b"", delete=True))
    with pytest.raises(_native.NativeError):
        _native.encode_column_updates(b"r", [good._replace(cf=None)])
