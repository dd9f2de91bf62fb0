"""The gateway's direct ``update`` and ``nextK`` paths (DirectCalls) against its generated Thrift code.

The session's gateway for cluster A serves both calls the direct way; a standalone gateway started with
``EXPORTCONNECTOR_GATEWAY_CODEC=generic`` serves every call with the generated code. The same frames sent
to both must land the same cells, be refused with the same words, and be read back in the same bytes.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.transport import TMemoryBuffer

from connector.accumulo import Connection
from connector.accumulo._idl import proxy
from connector.accumulo.mutation import ColumnUpdate
from connector.accumulo.transport import close_client, send_frame
from connector.accumulo.wire.next_k import encode_next_k, recv_exact
from integration.harness import StandaloneGateway

from .conftest import unique_table
from .wire_oracle import encode_column_update, encode_row_entry, encode_update_message

pytestmark = pytest.mark.cluster

CODEC_ENV = "EXPORTCONNECTOR_GATEWAY_CODEC"
AUTH = b"GWC1"


@pytest.fixture(scope="module")
def generic_conn(accumulo) -> Iterator[Connection]:
    """A connection to a gateway on cluster A that serves every call with the generated code."""
    before = os.environ.get(CODEC_ENV)
    os.environ[CODEC_ENV] = "generic"
    gw = StandaloneGateway(accumulo["a"])
    try:
        gw.start()
    finally:
        if before is None:
            os.environ.pop(CODEC_ENV)
        else:
            os.environ[CODEC_ENV] = before
    conn = gw.connect()
    yield conn
    conn.close()
    gw.stop()


@pytest.fixture(scope="module")
def direct_conn(accumulo) -> Iterator[Connection]:
    assert os.environ.get(CODEC_ENV) != "generic", "the session's gateways must serve the direct way"
    conn = accumulo["a"].connect()
    yield conn
    conn.close()


@pytest.fixture(scope="module", autouse=True)
def visibility_auth(accumulo) -> Iterator[None]:
    """The gateway user may read cells labelled GWC1 (restored afterwards)."""
    conn = accumulo["a"].connect()
    user = accumulo["a"].user
    before = conn.call("getUserAuthorizations", user)
    conn.call("changeUserAuthorizations", user, {*before, AUTH})
    yield
    conn.call("changeUserAuthorizations", user, set(before))
    conn.close()


@pytest.fixture
def tables(direct_conn) -> Iterator[tuple[str, str]]:
    """One fresh table for each path (both on cluster A)."""
    names = (unique_table("gd"), unique_table("gg"))
    for name in names:
        direct_conn.create_table(name)
    yield names
    for name in names:
        direct_conn.delete_table(name, missing_ok=True)


def put(cf: bytes, cq: bytes, value: bytes, ts: int | None = None, cv: bytes = b"") -> bytes:
    return encode_column_update(ColumnUpdate(cf, cq, cv, ts, value, False))


def delete(cf: bytes, cq: bytes, ts: int | None = None, cv: bytes = b"") -> bytes:
    return encode_column_update(ColumnUpdate(cf, cq, cv, ts, b"", True))


def update_frame(writer: str, entries: list[tuple[bytes, list[bytes]]]) -> bytes:
    return encode_update_message(writer, len(entries), b"".join(encode_row_entry(r, us) for r, us in entries))


def write_raw(conn: Connection, table: str, frames: list[bytes]) -> str | None:
    """Sends the update frames on a fresh writer and flushes: None, or the rejection's message."""
    client = conn.new_client()
    try:
        writer = client.createWriter(conn.shared_secret, table, proxy.WriterOptions())
        for make in frames:
            send_frame(client, make(writer) if callable(make) else make)
        try:
            client.flush(writer)
        except proxy.MutationsRejectedException as exc:
            return str(exc.msg)
        finally:
            client.closeWriter(writer)
        return None
    finally:
        close_client(client)


def raw_pages(conn: Connection, table: str, k: int) -> list[bytes]:
    """Every nextK reply of a scan of ``table`` (the frames, without their lengths)."""
    client = conn.new_client()
    try:
        scanner = client.createScanner(conn.shared_secret, table, proxy.ScanOptions(authorizations={AUTH}))
        sock = client.raw_socket.sock
        pages = []
        try:
            while True:
                sock.sendall(encode_next_k(scanner, k))
                (size,) = struct.unpack("!i", recv_exact(sock, 4))
                pages.append(recv_exact(sock, size))
                result = proxy.AccumuloProxy.nextK_result()
                proto = TCompactProtocol(TMemoryBuffer(pages[-1]))
                proto.read_message_begin()
                proto.read_struct(result)
                assert result.success is not None, result
                if not result.success.more:
                    return pages
        finally:
            client.closeScanner(scanner)
    finally:
        close_client(client)


def cells(conn: Connection, table: str, with_ts: bool = True) -> list[tuple[Any, ...]]:
    return [(c.row, c.cf, c.cq, c.cv, c.ts if with_ts else None, c.value)
            for c in conn.scan(table, authorizations=[AUTH], batch_size=5000)]


def varied_entries() -> list[tuple[bytes, list[bytes]]]:
    """Rows with what the codecs must get right: binary bytes, empty parts, long lengths (2-byte varints),
    a value past Accumulo's 32 KiB copy cutoff, a visibility, 15+ updates (long list headers), deletes with
    and without a timestamp, a put without a timestamp."""
    return [
        (b"r\x00\xff", [put(b"", b"", b"", ts=1), put(b"f", b"q" * 200, b"v" * 300, ts=2**62)]),
        (b"big", [put(b"f", b"q", bytes(range(256)) * 160, ts=5)]),
        (b"vis", [put(b"f", b"q", b"secret", ts=7, cv=AUTH)]),
        (b"many", [put(b"f", b"q%02d" % i, b"%d" % i, ts=100 + i) for i in range(20)]),
        (b"del", [put(b"f", b"a", b"1", ts=10), put(b"f", b"b", b"1", ts=10), delete(b"f", b"a", ts=11)]),
        (b"now", [put(b"f", b"n", b"server time")]),
    ]


def test_updates_land_the_same_cells_on_both_paths(direct_conn, generic_conn, tables):
    entries = varied_entries()
    for conn, table in zip((direct_conn, generic_conn), tables, strict=True):
        assert write_raw(conn, table, [lambda w: update_frame(w, entries)]) is None
        # a delete without a timestamp, in a later frame (the server's time is after the put's)
        assert write_raw(conn, table, [lambda w: update_frame(w, [(b"del", [delete(b"f", b"b")])])]) is None
    direct, generic = (cells(direct_conn, t, with_ts=False) for t in tables)
    assert direct == generic
    assert [(c[0], c[2]) for c in direct] == [
        (b"big", b"q"), *[(b"many", b"q%02d" % i) for i in range(20)], (b"now", b"n"),
        (b"r\x00\xff", b""), (b"r\x00\xff", b"q" * 200), (b"vis", b"q")]
    assert [c for c in cells(direct_conn, tables[0]) if c[0] == b"vis"] == [
        (b"vis", b"f", b"q", AUTH, 7, b"secret")]
    assert next(c for c in direct if c[0] == b"big")[5] == bytes(range(256)) * 160


@pytest.mark.parametrize("k", [1, 14, 15, 1000])
def test_next_k_replies_are_byte_for_byte_the_generated_ones(direct_conn, generic_conn, tables, k):
    table = tables[0]
    assert write_raw(direct_conn, table, [lambda w: update_frame(w, varied_entries())]) is None
    direct, generic = raw_pages(direct_conn, table, k), raw_pages(generic_conn, table, k)
    assert len(direct) == -(-26 // k)  # 26 cells: the "del" row shows one
    assert direct == generic


@pytest.mark.parametrize(("bad", "why"), [
    (put(b"f", b"q", b"v", ts=1, cv=b"a&&b"), "row 'bad' column 'f':'q': bad visibility 'a&&b': "),
    (b"\x18\x01f\x48\x01v\x00", "row 'bad': column update without a column qualifier"),  # cf(1), value(5)
    (b"\x28\x01q\x38\x01v\x00", "row 'bad': column update without a column family"),  # cq(2), value(5)
])
def test_a_bad_cell_refuses_the_whole_update_in_the_same_words(direct_conn, generic_conn, tables, bad, why):
    entries = [(b"good", [put(b"f", b"q", b"v", ts=1)]), (b"bad", [put(b"f", b"ok", b"v", ts=1), bad])]
    for conn, table in zip((direct_conn, generic_conn), tables, strict=True):
        message = write_raw(conn, table, [lambda w: update_frame(w, entries)])
        assert message is not None and "an update of 2 row(s) was refused, none of it applied: " + why in message
        assert cells(conn, table) == []  # nothing of the call, not even the good row


def test_a_row_repeated_in_one_update_keeps_all_its_cells(direct_conn, tables):
    """A map with one row twice: the generated code keeps only the last entry of a key (a HashMap); the
    direct path writes both."""
    entries = [(b"r", [put(b"f", b"a", b"1", ts=1)]), (b"r", [put(b"f", b"b", b"2", ts=1)])]
    assert write_raw(direct_conn, tables[0], [lambda w: update_frame(w, entries)]) is None
    assert [(c[2], c[5]) for c in cells(direct_conn, tables[0])] == [(b"a", b"1"), (b"b", b"2")]


def test_an_update_in_another_shape_goes_the_generated_way(direct_conn, tables):
    """Fields the direct path does not know (a newer client's, say) are skipped as the generated code skips
    them: the call falls back to it whole."""
    unknown_cell_field = put(b"f", b"x", b"1", ts=1)[:-1] + b"\x25\x54\x00"  # + field 7 (delta 2): i32 42
    entries = [(b"r", [unknown_cell_field, put(b"f", b"y", b"2", ts=1)])]

    def unknown_args_field(writer: str) -> bytes:
        frame = update_frame(writer, [(b"s", [put(b"f", b"z", b"3", ts=1)])])
        return frame[:-1] + b"\x15\x02\x00"  # + field 3: i32 1, before the stop

    assert write_raw(direct_conn, tables[0], [lambda w: update_frame(w, entries), unknown_args_field]) is None
    assert [(c[0], c[2], c[5]) for c in cells(direct_conn, tables[0])] == [
        (b"r", b"x", b"1"), (b"r", b"y", b"2"), (b"s", b"z", b"3")]
