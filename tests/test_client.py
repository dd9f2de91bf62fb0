"""The Python client against a real Accumulo behind our gateway."""

from __future__ import annotations

import hashlib
import threading
import time

import pyarrow as pa
import pytest

from connector.accumulo import (
    AccumuloSecurityError,
    Condition,
    ConditionalMutation,
    Connection,
    ConnectionLostError,
    InvalidMutationError,
    Mutation,
    MutationsRejectedError,
    Range,
    RetryPolicy,
    TableExistsError,
    TableNotFoundError,
    UnknownWriterError,
)
from connector.accumulo._idl import proxy
from connector.accumulo.conditional import ConditionalWriter, write_conditional
from connector.accumulo.extensions import SCAN_ISOLATED, gateway_extensions
from integration.harness import StandaloneGateway

from .conftest import run_in_threads, unique_table


def cells_of(conn, table, rng=None):
    return [(c.row, c.cf, c.cq, c.cv, c.ts, c.value) for c in conn.scan(table, rng)]


def test_100k_cells_round_trip_nothing_lost(conn_a, table):
    expected = hashlib.sha256()
    with conn_a.batch_writer(table, chunk_bytes=256 << 10, max_memory=2 << 20) as writer:
        for i in range(10_000):
            m = Mutation(b"r%06d" % i)
            for j in range(10):
                m.put(b"f", b"q%d" % j, b"value-%d-%d" % (i, j), timestamp=1000 + j)
            writer.add_mutation(m)
    for i in range(10_000):
        for j in range(10):
            expected.update(b"r%06d|f|q%d|%d|value-%d-%d\n" % (i, j, 1000 + j, i, j))
    got = hashlib.sha256()
    count = 0
    for c in conn_a.scan(table, batch_size=5000):
        got.update(b"%s|%s|%s|%d|%s\n" % (c.row, c.cf, c.cq, c.ts, c.value))
        count += 1
    assert count == 100_000
    assert got.hexdigest() == expected.hexdigest()


def test_client_timestamps_are_kept(conn_a, table):
    conn_a.write(table, [Mutation("r").put("f", "q", "v", timestamp=42).put("f", "q2", "w", timestamp=7)])
    assert cells_of(conn_a, table) == [(b"r", b"f", b"q", b"", 42, b"v"), (b"r", b"f", b"q2", b"", 7, b"w")]


def test_delete_at_t_hides_versions_at_or_below_t_only(conn_a):
    name = unique_table()
    conn_a.create_table(name, versioning=False)  # keep every version so we can see which survive
    conn_a.write(name, [Mutation("r").put("f", "q", b"v%d" % ts, timestamp=ts) for ts in (5, 10, 15)])
    conn_a.write(name, [Mutation("r").delete("f", "q", timestamp=10)])
    assert [(c.ts, c.value) for c in conn_a.scan(name)] == [(15, b"v15")]
    conn_a.delete_table(name)


@pytest.mark.parametrize("delete_first", [True, False])
def test_put_and_delete_at_same_timestamp_delete_wins(conn_a, table, delete_first):
    put = Mutation("r").put("f", "q", "v", timestamp=9)
    delete = Mutation("r").delete("f", "q", timestamp=9)
    first, second = (delete, put) if delete_first else (put, delete)
    conn_a.write(table, [first])
    conn_a.write(table, [second])
    assert cells_of(conn_a, table) == []
    conn_a.write(table, [Mutation("r").put("f", "q", "newer", timestamp=10)])
    assert cells_of(conn_a, table) == [(b"r", b"f", b"q", b"", 10, b"newer")]


def test_same_row_twice_in_one_chunk_keeps_both(conn_a, table):
    with conn_a.batch_writer(table) as writer:
        writer.add_mutation(Mutation("r").put("f", "a", "1", timestamp=1))
        writer.add_mutation(Mutation("r").put("f", "b", "2", timestamp=1))
    assert [c.cq for c in conn_a.scan(table)] == [b"a", b"b"]


def test_abort_drops_what_was_not_flushed_and_closes(conn_a, table):
    writer = conn_a.batch_writer(table, chunk_bytes=1 << 20)
    writer.add_mutation(Mutation("kept").put("f", "q", "1", timestamp=1))
    writer.flush()
    writer.add_cells(pa.record_batch({"row": [b"cells"], "cf": [b"f"], "cq": [b"q"], "cv": [b""], "ts": [1],
                                      "value": [b"3"]}))  # sent at once, never flushed
    writer.add_mutation(Mutation("dropped").put("f", "q", "2", timestamp=1))  # buffered, not yet sent
    writer.abort()
    writer.abort()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        writer.add_mutation(Mutation("late").put("f", "q", "4"))
    with pytest.raises(RuntimeError, match="closed"):
        writer.flush()
    writer.close()  # after abort: nothing to flush, no error
    assert [c.row for c in conn_a.scan(table)] in ([b"kept"], [b"cells", b"kept"])  # never the buffered row


def test_a_writer_left_by_an_exception_is_aborted(conn_a, table):
    with pytest.raises(ZeroDivisionError), conn_a.batch_writer(table, chunk_bytes=1 << 20) as writer:
        writer.add_mutation(Mutation("r").put("f", "q", "v", timestamp=1))
        1 / 0  # noqa: B018
    assert [c.row for c in conn_a.scan(table)] == []
    writer.abort()  # already closed: a no-op


def test_ranges_rows_and_prefix(conn_a, table):
    conn_a.write(table, [Mutation(r).put("f", "q", r) for r in ["a", "ab", "abc", "b", "b\xff"]])
    assert [c.row for c in conn_a.scan(table, Range.prefix("ab"))] == [b"ab", b"abc"]
    assert [c.row for c in conn_a.scan(table, Range.exact_row("ab"))] == [b"ab"]
    assert [c.row for c in conn_a.scan(table, Range.rows("ab", "b"))] == [b"ab", b"abc", b"b"]
    assert [c.row for c in conn_a.scan(table, Range.rows("ab", "b", end_inclusive=False))] == [b"ab", b"abc"]
    assert [c.row for c in conn_a.scan(table, columns=["f"], batch_size=2)] == [
        b"a", b"ab", b"abc", b"b", "b\xff".encode()]


def test_conditional_writer_accepts_and_rejects(conn_a, table):
    with conn_a.conditional_writer(table) as cw:
        create = ConditionalMutation("acct", [Condition("f", "balance", value=None)]).put("f", "balance", "10")
        assert cw.write(create) == "ACCEPTED"
        again = ConditionalMutation("acct", [Condition("f", "balance", value=None)]).put("f", "balance", "99")
        assert cw.write(again) == "REJECTED"
        cas = ConditionalMutation("acct", [Condition("f", "balance", value="10")]).put("f", "balance", "20")
        assert cw.write(cas) == "ACCEPTED"
    assert [c.value for c in conn_a.scan(table)] == [b"20"]


def test_a_conditional_write_whose_answer_is_lost_reports_unknown(conn_a, table, monkeypatch):
    """A gateway killed during ``updateRowsConditionally`` (the chaos harness kills them): the mutation may have
    been applied, so every row of the call is UNKNOWN, as Accumulo's own ConditionalWriter reports it, and the
    caller re-reads; no caller has to catch a transport error (before, a lost answer raised ConnectionLostError
    out of a lease write, a registration, a mark's settling: the process exited)."""
    real_send = ConditionalWriter.send

    def applied_then_lost(self, call):
        real_send(self, call)
        raise ConnectionLostError("updateRowsConditionally on 127.0.0.1:1: gateway unreachable after 1 attempts")

    monkeypatch.setattr(ConditionalWriter, "send", applied_then_lost)
    with conn_a.conditional_writer(table) as cw:
        first = ConditionalMutation("lost1", [Condition("f", "q")]).put("f", "q", "1")
        assert cw.write(first) == "UNKNOWN"
        both = [ConditionalMutation(r, [Condition("f", "q")]).put("f", "q", "2") for r in ("lost2", "lost3")]
        assert cw.write_all(both) == {b"lost2": "UNKNOWN", b"lost3": "UNKNOWN"}
        encoded = ConditionalMutation("lost4", [Condition("f", "q")]).put("f", "q", "4")
        assert write_conditional(cw, [encoded]) == {b"lost4": "UNKNOWN"}  # the encoded hot path too
    assert {c.row: c.value for c in conn_a.scan(table)} == {b"lost1": b"1", b"lost2": b"2", b"lost3": b"2",
                                                            b"lost4": b"4"}, "all applied: only the answers were lost"


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
def test_put_if_absent_settles_a_lost_answer_and_keeps_the_first_value(conn_a, table, monkeypatch, applied):
    """How a queue's id, configuration and translator are stored: a lost answer is read back (and sent again when
    it did not take), never an assertion or a refusal; a second caller gets the first value."""
    from .test_bootstrap_lease import lose_answers
    lost = lose_answers(monkeypatch, applied)
    assert conn_a.put_if_absent(table, "id", "f", "q", "first") == (True, b"first")
    assert lost == [b"id"]
    assert conn_a.put_if_absent(table, "id", "f", "q", "second") == (False, b"first")
    assert [c.value for c in conn_a.scan(table)] == [b"first"]


def test_wrong_secret_is_a_clear_security_error(accumulo, table):
    c = accumulo["a"]
    with Connection(c.gateway_host, c.gateway_port, "not-the-secret") as bad:
        with pytest.raises(AccumuloSecurityError, match="secret"):
            bad.table_exists(table)
        with pytest.raises(AccumuloSecurityError):
            bad.batch_writer(table)


def test_missing_table_errors(conn_a):
    with pytest.raises(TableNotFoundError):
        conn_a.batch_writer("no_such_table")
    with pytest.raises(TableNotFoundError):
        list(conn_a.scan("no_such_table"))
    with pytest.raises(TableNotFoundError):
        conn_a.write("no_such_table", [Mutation("r").put("f", "q", "v")])
    name = unique_table()
    conn_a.create_table(name)
    with pytest.raises(TableExistsError):
        conn_a.create_table(name)
    assert conn_a.create_table(name, exist_ok=True) is False
    conn_a.delete_table(name)


def test_bad_visibility_is_refused_before_sending(conn_a, table):
    with conn_a.batch_writer(table) as writer:
        writer.add_mutation(Mutation("good").put("f", "q", "v", timestamp=1))
        with pytest.raises(InvalidMutationError, match="visibility"):
            writer.add_mutation(Mutation("bad").put("f", "q", "v", visibility="a&|b"))
        with pytest.raises(InvalidMutationError, match="mix"):
            Mutation("bad").put("f", "q", "v", visibility="a&b|c")
    assert [c.row for c in conn_a.scan(table)] == [b"good"]


def test_gateway_rejects_bad_visibility_whole_update_and_reports_on_flush(accumulo, conn_a, table):
    """A client that skips validation (another language, say) still gets the error; nothing of the
    offending update call is applied, and the writer remains usable."""
    client = conn_a.new_client()
    secret = conn_a.shared_secret
    writer = client.createWriter(secret, table, proxy.WriterOptions(maxMemory=1 << 20, latencyMs=0,
                                                                    timeoutMs=0, threads=1))
    good = proxy.ColumnUpdate(colFamily=b"f", colQualifier=b"q", colVisibility=b"", timestamp=1, value=b"v")
    bad = proxy.ColumnUpdate(colFamily=b"f", colQualifier=b"q", colVisibility=b"a&|b", timestamp=1, value=b"v")
    client.update(writer, {b"row1": [good], b"row2": [bad]})
    with pytest.raises(proxy.MutationsRejectedException) as info:
        client.flush(writer)
    assert "visib" in info.value.msg.lower()
    client.update(writer, {b"row3": [good]})
    client.flush(writer)
    client.closeWriter(writer)
    with pytest.raises(proxy.UnknownWriter):
        client.flush(writer)
    client.close()
    assert [c.row for c in conn_a.scan(table)] == [b"row3"]


def test_oversized_mutation_refused_and_nothing_half_applied(conn_a, table):
    with conn_a.batch_writer(table, max_mutation_bytes=1 << 20) as writer:
        writer.add_mutation(Mutation("small").put("f", "q", "v", timestamp=1))
        big = Mutation("big").put("f", "a", b"x" * 10, timestamp=1).put("f", "b", b"x" * (2 << 20), timestamp=1)
        with pytest.raises(InvalidMutationError, match="over the limit"):
            writer.add_mutation(big)
    assert [c.row for c in conn_a.scan(table)] == [b"small"]


def test_constraint_violation_raises_mutations_rejected_and_writer_survives(conn_a, table):
    # Accumulo's built-in visibility constraint rejects cells the writer cannot see.
    conn_a.set_table_property(table, "table.constraint.2",
                              "org.apache.accumulo.core.data.constraints.VisibilityConstraint")
    time.sleep(1.5)  # constraint configuration propagates to the tablet server
    with conn_a.batch_writer(table) as writer:
        writer.add_mutation(Mutation("secret").put("f", "q", "v", visibility="TOPSECRET", timestamp=1))
        with pytest.raises(MutationsRejectedError, match="secret|constraint|Constraint"):
            writer.flush()
        writer.add_mutation(Mutation("public").put("f", "q", "v", timestamp=1))
        writer.flush()
    assert [c.row for c in conn_a.scan(table)] == [b"public"]


def test_connection_is_safe_across_threads(conn_a, table):
    def work(n: int) -> None:
        for i in range(20):
            conn_a.write(table, [Mutation(b"t%d-%02d" % (n, i)).put("f", "q", b"%d" % i, timestamp=1)])
            assert conn_a.table_exists(table)

    assert not run_in_threads(work, 4)
    assert sum(1 for _ in conn_a.scan(table)) == 80


def test_gateway_killed_and_restarted_mid_write_client_retries(accumulo, table):
    gw = StandaloneGateway(accumulo["a"], accumulo.classpath)
    port = gw.start()
    conn = Connection("127.0.0.1", port, secret_file=accumulo["a"].secret_file,
                      retry=RetryPolicy(attempts=30, max_seconds=120, max_wait=2.0))
    restarted = threading.Event()

    def kill_and_restart() -> None:
        time.sleep(0.5)
        gw.kill()
        time.sleep(1.0)
        gw.start()
        restarted.set()

    try:
        killer = threading.Thread(target=kill_and_restart)
        with conn.batch_writer(table, chunk_bytes=64 << 10, max_memory=512 << 10) as writer:
            killer.start()
            for i in range(60_000):
                writer.add_mutation(Mutation(b"k%06d" % i).put("f", "q", b"v%d" % i, timestamp=5))
                if i % 5000 == 0:
                    time.sleep(0.1)  # stretch the write across the kill
        killer.join()
        assert restarted.is_set()
        rows = [c.row for c in conn.scan(table, batch_size=10_000)]
        assert len(rows) == 60_000 and len(set(rows)) == 60_000
    finally:
        conn.close()
        gw.stop()


def test_the_default_policy_waits_out_a_gateway_restart_and_fails_fast_on_first_contact(accumulo):
    """Default retries: a gateway down for 20 s (a restart on a loaded machine) is waited for once the
    connection has reached it (the old bound, 8 attempts, gave up after about 8 s), while a connection that
    never reached a gateway gives up after its few first-contact attempts."""
    a = accumulo["a"]
    gw = StandaloneGateway(a, accumulo.classpath)
    port = gw.start()
    conn = Connection("127.0.0.1", port, secret_file=a.secret_file)
    restarter = threading.Timer(20.0, gw.start)
    try:
        assert conn.namespace_exists("accumulo")
        gw.kill()
        restarter.start()
        assert conn.namespace_exists("accumulo")  # retried through the outage, on a fresh socket
        assert not restarter.is_alive()
    finally:
        restarter.join()
        conn.close()
        gw.stop()
    never = Connection("127.0.0.1", port, secret_file=a.secret_file)  # the gateway is stopped for good now
    with pytest.raises(ConnectionLostError, match=f"unreachable after {RetryPolicy().first_contact_attempts} "
                                                  "attempts"):
        never.namespace_exists("accumulo")
    never.close()


def test_gateway_gone_for_good_fails_loudly_and_bounded(accumulo, table):
    gw = StandaloneGateway(accumulo["a"], accumulo.classpath)
    port = gw.start()
    conn = Connection("127.0.0.1", port, secret_file=accumulo["a"].secret_file,
                      retry=RetryPolicy(attempts=3, max_seconds=10, max_wait=0.5))
    writer = conn.batch_writer(table)
    writer.add_mutation(Mutation("r").put("f", "q", "v", timestamp=1))
    gw.kill()
    started = time.monotonic()
    with pytest.raises(ConnectionLostError, match="unreachable"):
        writer.flush()
    assert time.monotonic() - started < 30
    conn.close()


def test_scan_resumes_after_gateway_restart(accumulo, table):
    with accumulo["a"].connect() as direct, direct.batch_writer(table) as w:
        for i in range(5000):
            w.add_mutation(Mutation(b"s%05d" % i).put("f", "q", b"%d" % i, timestamp=3))
    gw = StandaloneGateway(accumulo["a"], accumulo.classpath)
    port = gw.start()
    conn = Connection("127.0.0.1", port, secret_file=accumulo["a"].secret_file,
                      retry=RetryPolicy(attempts=20, max_seconds=60, max_wait=1.0))
    try:
        rows = []
        for i, cell in enumerate(conn.scan(table, batch_size=500)):
            rows.append(cell.row)
            if i == 1200:
                gw.kill()
                gw.start()
        assert rows == [b"s%05d" % i for i in range(5000)]
    finally:
        conn.close()
        gw.stop()


def test_unknown_writer_maps_to_typed_error(conn_a):
    with pytest.raises(UnknownWriterError):
        conn_a.call("flush", "no-such-writer", secret=False)


def test_idle_writer_and_scanner_expire_and_the_client_recovers(accumulo, table):
    """The gateway expires idle sessions; the writer replays its unflushed mutations on a new server-side
    writer, and a scan resumes after its last cell on a new scanner."""
    gw = StandaloneGateway(accumulo["a"], accumulo.classpath, idle_timeout_ms=1000)
    port = gw.start()
    conn = Connection("127.0.0.1", port, secret_file=accumulo["a"].secret_file)
    try:
        with conn.batch_writer(table) as writer:
            writer.add_mutation(Mutation("before").put("f", "q", "1", timestamp=1))
            writer.flush()
            time.sleep(3)  # the server-side writer expires
            writer.add_mutation(Mutation("after").put("f", "q", "2", timestamp=1))
            writer.flush()
        for i in range(30):
            conn.write(table, [Mutation(b"z%02d" % i).put("f", "q", "v", timestamp=1)])
        rows = []
        for cell in conn.scan(table, batch_size=10):
            rows.append(cell.row)
            if len(rows) == 10:
                time.sleep(3)  # the scanner expires between pages
        assert rows == [b"after", b"before", *[b"z%02d" % i for i in range(30)]]
        raw = conn.new_client()
        scanner = raw.createScanner(conn.shared_secret, table, proxy.ScanOptions())
        time.sleep(3)
        with pytest.raises(proxy.UnknownScanner):
            raw.nextK(scanner, 5)
        raw.close()
    finally:
        conn.close()
        gw.stop()


def test_threads_that_come_and_go_leave_no_sockets_behind(conn_a):
    import gc
    import os
    import threading

    conn_a.list_tables()  # this thread's socket, kept

    def fds() -> int:
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    before = fds()
    for _ in range(3):
        threads = [threading.Thread(target=conn_a.list_tables) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # 30 threads each opened a socket to the gateway; each closed with its thread
    assert fds() - before < 5
    assert conn_a.list_tables()  # and the connection still works


def test_a_conditional_writer_and_the_extension_check_survive_a_gateway_restart(accumulo, table):
    """After a restart the gateway knows neither this connection's socket nor its conditional writer's id. The
    extension question is asked again on a fresh socket (it raised ConnectionLostError), and the writer, which
    the gateway refuses before applying anything, opens a new id and sends again (it raised
    UnknownWriterError: a producer of the chaos run died of it)."""
    a = accumulo["a"]
    gw = StandaloneGateway(a, accumulo.classpath)
    port = gw.start()
    conn = Connection("127.0.0.1", port, secret_file=a.secret_file)
    try:
        writer = conn.conditional_writer(table)  # opens this thread's socket; extensions not asked yet
        first = writer.writer_id
        gw.kill()
        gw.start()
        where, names = gateway_extensions(conn)  # the old socket is dead: asked again on a new one
        assert where.endswith(f":{port}") and SCAN_ISOLATED in names
        assert writer.write(ConditionalMutation("r1", [Condition("f", "q")]).put("f", "q", "one")) == "ACCEPTED"
        assert writer.writer_id != first
        again = writer.writer_id
        gw.kill()
        gw.start()
        conn.namespace_exists("accumulo")  # the thread's socket moves to the restarted gateway first
        cm = ConditionalMutation("r2", [Condition("f", "q")]).put("f", "q", "two")
        assert write_conditional(writer, [cm]) == {b"r2": "ACCEPTED"}  # the encoded hot path too
        assert writer.writer_id != again
        assert {c.row: c.value for c in conn.scan(table)} == {b"r1": b"one", b"r2": b"two"}
        writer.close()
    finally:
        conn.close()
        gw.stop()


def test_table_properties_changed_at_once_by_many_writers_all_take(accumulo):
    """Accumulo refuses a table property change that races another ("Invalid table property", a ZooKeeper version
    conflict): a CI run's bootstrap died of it recording its feeder while its stream did the same. Each change
    is made again until it takes, and an iterator attached at once by many writers is attached once."""
    from connector.export.tombstones import install_tombstone_filter

    conn = accumulo["b"].connect()
    table = unique_table("props")
    conn.create_table(table)

    def work(i: int) -> None:
        with accumulo["b"].connect() as mine:
            for j in range(6):
                mine.set_table_property(table, f"table.custom.k{i}", str(j))
            install_tombstone_filter(mine, table)

    assert run_in_threads(work, 8) == []
    props = conn.table_properties(table)
    assert [props.get(f"table.custom.k{i}") for i in range(8)] == ["5"] * 8
    assert props["table.iterator.scan.exportTombstones"].endswith("RegExFilter")
    conn.delete_table(table)
    conn.close()
