"""Issue 12: the client behaves the same against our gateway and an upstream accumulo-proxy 2.x.

Each test runs on the real embedded cluster behind our gateway. Where upstream's proxy behaves worse
(a writer that stays broken after one rejection, frames refused past 16 MiB, undeclared errors on
tableExists, silently dropped cells, scan failures reported as security errors, conditional writers
without authorizations), the client avoids depending on it; these tests pin that behaviour down.
"""

from __future__ import annotations

import time

import pytest

from connector.accumulo import (
    DEFAULT_MAX_FRAME_BYTES,
    AccumuloError,
    AccumuloSecurityError,
    AccumuloServerError,
    Condition,
    ConditionalMutation,
    Connection,
    InvalidMutationError,
    IteratorSetting,
    Mutation,
    MutationsRejectedError,
    RetryPolicy,
    UnknownWriterError,
)
from connector.accumulo._idl import proxy
from connector.accumulo.scanner import scan_error
from connector.accumulo.visibility import VisibilityError, check_visibility
from integration.harness import StandaloneGateway

MiB = 1 << 20
UPSTREAM_FRAME_LIMIT = 16 * MiB  # accumulo-proxy's maxFrameSize=16M


def rows_of(conn, table):
    return [c.row for c in conn.scan(table, batch_size=5000)]


# --- 1. a writer is replaced after a rejection ------------------------------------------------------------


def test_rejection_replaces_the_server_side_writer(conn_a, table):
    """Upstream keeps the first rejection of a writer and raises it on every later flush; so the client
    drops that writer and writes on a fresh one."""
    conn_a.set_table_property(table, "table.constraint.2",
                              "org.apache.accumulo.core.data.constraints.VisibilityConstraint")
    time.sleep(1.5)  # constraint configuration propagates to the tablet server
    with conn_a.batch_writer(table) as writer:
        rejected_id = writer.writer_id
        writer.add_mutation(Mutation("hidden").put("f", "q", "v", visibility="NOT_MINE", timestamp=1))
        with pytest.raises(MutationsRejectedError):
            writer.flush()
        assert writer.writer_id != rejected_id
        with pytest.raises(UnknownWriterError):  # the gateway closed the rejected writer
            conn_a.call("flush", rejected_id, secret=False)
        for i in range(3):
            writer.add_mutation(Mutation(b"after%d" % i).put("f", "q", "v", timestamp=1))
            writer.flush()
    assert rows_of(conn_a, table) == [b"after0", b"after1", b"after2"]


# --- 2. frames stay under the server's frame limit --------------------------------------------------------


@pytest.fixture(scope="module")
def small_frame_gateway(accumulo):
    """A gateway refusing frames over 16 MiB, as upstream's proxy does by default."""
    gw = StandaloneGateway(accumulo["a"], accumulo.classpath, max_frame_bytes=UPSTREAM_FRAME_LIMIT)
    port = gw.start()
    yield port
    gw.stop()


@pytest.fixture
def small_frame_conn(accumulo, small_frame_gateway):
    # few retries: a refused frame must not be mistaken for a network fault and resent for minutes
    conn = Connection("127.0.0.1", small_frame_gateway, secret_file=accumulo["a"].secret_file,
                      retry=RetryPolicy(attempts=2, max_seconds=10, max_wait=0.5))
    yield conn
    conn.close()


def test_a_chunk_plus_a_large_mutation_never_exceeds_the_frame_limit(small_frame_conn, table):
    conn = small_frame_conn
    with conn.batch_writer(table) as writer:  # default 4 MiB chunks
        for i in range(1040):  # just under one chunk
            writer.add_mutation(Mutation(b"s%04d" % i).put("f", "q", b"x" * 4000, timestamp=1))
        large = Mutation("large")
        for j in range(13):  # 13 MiB: with the chunk before it, over the 16 MiB frame limit
            large.put("f", b"q%02d" % j, b"y" * MiB, timestamp=1)
        writer.add_mutation(large)
        writer.flush()
    rows = rows_of(conn, table)  # one per cell: "large" has 13
    assert len(rows) == 1053 and len(set(rows)) == 1041 and rows[0] == b"large"


def test_chunk_bytes_over_the_frame_limit_is_clamped(small_frame_conn, table):
    conn = small_frame_conn
    with conn.batch_writer(table, chunk_bytes=32 * MiB, max_memory=64 * MiB) as writer:
        assert writer.chunk_bytes <= DEFAULT_MAX_FRAME_BYTES
        for i in range(4400):  # ~17 MiB
            writer.add_mutation(Mutation(b"c%05d" % i).put("f", "q", b"z" * 4000, timestamp=1))
    assert len(rows_of(conn, table)) == 4400


def test_a_mutation_too_large_for_one_frame_is_refused_before_sending(small_frame_conn, table):
    conn = small_frame_conn
    with conn.batch_writer(table) as writer:
        writer.add_mutation(Mutation("small").put("f", "q", "v", timestamp=1))
        huge = Mutation("huge").put("f", "q", b"h" * (15 * MiB + 512 * 1024), timestamp=1)
        with pytest.raises(InvalidMutationError, match="max_frame_bytes"):
            writer.add_mutation(huge)
        # upstream refuses one value longer than its frame limit minus the frame: 8 MiB of 16 MiB
        with pytest.raises(InvalidMutationError, match="largest value"):
            writer.add_mutation(Mutation("eight").put("f", "q", b"e" * (8 * MiB), timestamp=1))
        writer.add_mutation(Mutation("seven").put("f", "q", b"s" * (7 * MiB), timestamp=1))
        writer.add_mutation(Mutation("small2").put("f", "q", "v", timestamp=1))
    assert rows_of(conn, table) == [b"seven", b"small", b"small2"]
    with pytest.raises(InvalidMutationError, match="max_frame_bytes"):
        conn.write(table, [huge])
    assert rows_of(conn, table) == [b"seven", b"small", b"small2"]


def test_frame_limit_is_configurable_and_checked_against_the_server(small_frame_conn, table):
    """A client allowed larger frames than its server loses the connection; it says how large its frames
    were so the operator can tell a refused frame from a network fault."""
    conn = small_frame_conn
    with pytest.raises(ValueError, match="max_frame_bytes"):
        conn.batch_writer(table, max_frame_bytes=100)
    writer = conn.batch_writer(table, max_frame_bytes=32 * MiB, chunk_bytes=20 * MiB, max_memory=64 * MiB)
    for i in range(4400):  # ~17 MiB in one chunk, over the gateway's 16 MiB
        writer.add_mutation(Mutation(b"o%05d" % i).put("f", "q", b"o" * 4000, timestamp=1))
    with pytest.raises(AccumuloError, match="frame limit"):
        writer.flush()
    writer.abort()


# --- 3. a wrong secret is a security error against both servers -----------------------------------------


def test_wrong_secret_is_detected_by_a_call_that_declares_it(accumulo, table):
    c = accumulo["a"]
    with Connection(c.gateway_host, c.gateway_port, "not-the-secret") as bad:
        for call in (bad.list_tables, lambda: bad.table_exists(table)):
            with pytest.raises(AccumuloSecurityError, match="secret") as info:
                call()
            # the declared exception, not upstream's message-less "Internal error processing tableExists"
            assert isinstance(info.value.__cause__, proxy.AccumuloSecurityException)
    raw = accumulo["a"].connect().new_client()
    try:
        with pytest.raises(proxy.AccumuloSecurityException):
            raw.namespaceExists("not-the-secret", "accumulo")
    finally:
        raw.close()
    with accumulo["a"].connect() as good:
        assert table in good.list_tables()


# --- 4. cells the server could fail to convert are refused before sending ---------------------------------


def test_a_mutation_without_updates_is_refused_everywhere(conn_a, table):
    with pytest.raises(InvalidMutationError, match="no updates"):
        conn_a.write(table, [Mutation("ok").put("f", "q", "v", timestamp=1), Mutation("empty")])
    with conn_a.batch_writer(table) as writer, pytest.raises(InvalidMutationError, match="no updates"):
        writer.add_mutation(Mutation("empty"))
    with conn_a.conditional_writer(table) as cw, pytest.raises(InvalidMutationError, match="no updates"):
        cw.write(ConditionalMutation("empty", [Condition("f", "q")]))
    assert rows_of(conn_a, table) == []


def test_a_bad_condition_visibility_is_refused_before_sending(conn_a, table):
    with conn_a.conditional_writer(table) as cw:
        with pytest.raises(InvalidMutationError, match="visibility"):
            cw.write(ConditionalMutation("r", [Condition("f", "q", visibility="a&|b")]).put("f", "q", "v"))
        ok = ConditionalMutation("r", [Condition("f", "q", visibility="a&b")]).put("f", "q", "v")
        assert cw.write(ok) in ("ACCEPTED", "INVISIBLE_VISIBILITY")


TRICKY_VISIBILITIES = [
    b"a", b"a&b", b"a|b", b"(a)", b"((a))", b"(a|b)&c", b"a&(b|c)", b'"a b"', b'"a\\"b"', b'"a\\\\b"',
    b'"\xff"', b"a:b/c.d-e_f", b"", b"a&b|c", b"a|b&c", b"()", b"a&", b"&a", b"a&&b", b"(a", b"a)",
    b'""', b'"a', b'"a\\b"', b"a b", b"\xff", b"a(b)", b"(a)b", b'"a"b', b"a|", b"(a&b)|(c&d)", b"a=b",
]


def test_client_visibility_check_agrees_with_accumulo(conn_a, table):
    """The client's check must refuse exactly what Accumulo's ColumnVisibility parser refuses: upstream drops
    the rest of an update silently at the first bad one. Sent raw (no client check) to learn Accumulo's view."""
    client = conn_a.new_client()
    try:
        for i, expr in enumerate(TRICKY_VISIBILITIES):
            cell = proxy.ColumnUpdate(colFamily=b"f", colQualifier=b"q", colVisibility=expr, timestamp=1,
                                      value=b"v")
            try:
                client.updateAndFlush(conn_a.shared_secret, table, {b"v%02d" % i: [cell]})
                accumulo_ok = True
            except proxy.MutationsRejectedException:
                accumulo_ok = False
            try:
                check_visibility(expr)
                client_ok = True
            except VisibilityError:
                client_ok = False
            assert client_ok == accumulo_ok, expr
    finally:
        client.close()


# --- 5. scan failures are server errors, not security errors ---------------------------------------------


def test_scan_failure_on_the_server_is_a_server_error(conn_a, table):
    conn_a.write(table, [Mutation("r").put("f", "q", "v", timestamp=1)])
    broken = IteratorSetting(priority=30, name="broken", iterator_class="no.such.IteratorClass")
    with pytest.raises(AccumuloServerError, match="server") as info:
        list(conn_a.scan(table, iterators=[broken]))
    assert not isinstance(info.value, AccumuloSecurityError)
    with pytest.raises(AccumuloServerError):
        list(conn_a.batch_scan(table, [], iterators=[broken]))
    assert rows_of(conn_a, table) == [b"r"]  # the connection is fine afterwards


def test_scan_with_authorizations_the_user_lacks_stays_a_security_error(conn_a, table):
    conn_a.write(table, [Mutation("r").put("f", "q", "v", timestamp=1)])
    with pytest.raises(AccumuloSecurityError):
        list(conn_a.scan(table, authorizations=["NEVER_GRANTED_12"]))


@pytest.mark.parametrize(("message", "expected"), [
    # upstream wraps every nextK failure as AccumuloSecurityException(ex.toString())
    ("java.lang.RuntimeException: org.apache.accumulo.core.clientImpl.AccumuloServerException: "
     "Error on server 127.0.0.1:9997", AccumuloServerError),
    ("java.lang.RuntimeException: org.apache.accumulo.core.client.AccumuloSecurityException: "
     "Error BAD_AUTHORIZATIONS for user root", AccumuloSecurityError),
    ("Error BAD_AUTHORIZATIONS for user root", AccumuloSecurityError),  # our gateway's real one
])
def test_upstream_nextk_messages_are_classified(message, expected):
    err = scan_error(proxy.AccumuloSecurityException(msg=message), "host:1")
    assert type(err) is expected


# --- 6. conditional writers: no authorizations unless given, on both servers ------------------------------


def test_conditional_writer_sees_visible_cells_only_with_explicit_authorizations(accumulo, conn_a, table):
    user = accumulo["a"].user
    before = conn_a.call("getUserAuthorizations", user)
    conn_a.call("changeUserAuthorizations", user, {*before, b"UPC6"})
    try:
        conn_a.write(table, [Mutation("acct").put("f", "bal", "10", visibility="UPC6", timestamp=1)])
        cas = ConditionalMutation("acct", [Condition("f", "bal", value="10", visibility="UPC6")])
        with conn_a.conditional_writer(table) as cw:  # no authorizations: Accumulo's and upstream's default
            assert cw.write(cas.put("f", "bal", "20", visibility="UPC6")) == "INVISIBLE_VISIBILITY"
        with conn_a.conditional_writer(table, authorizations=["UPC6"]) as cw:
            assert cw.write(cas) == "ACCEPTED"
        assert [c.value for c in conn_a.scan(table, authorizations=["UPC6"])] == [b"20"]
        # the gateway's own default, for clients that send no authorizations, is upstream's too
        raw = conn_a.new_client()
        try:
            cw_id = raw.createConditionalWriter(conn_a.shared_secret, table, proxy.ConditionalWriterOptions())
            update = proxy.ConditionalUpdates(
                conditions=[proxy.Condition(column=proxy.Column(colFamily=b"f", colQualifier=b"bal",
                                                                colVisibility=b"UPC6"), value=b"20")],
                updates=[proxy.ColumnUpdate(colFamily=b"f", colQualifier=b"bal", colVisibility=b"UPC6",
                                            value=b"30")])
            status = raw.updateRowsConditionally(cw_id, {b"acct": update})
            assert status == {b"acct": proxy.ConditionalStatus.INVISIBLE_VISIBILITY}
            raw.closeConditionalWriter(cw_id)
        finally:
            raw.close()
    finally:
        conn_a.call("changeUserAuthorizations", user, set(before))
