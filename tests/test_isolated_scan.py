"""Isolated scans (``ScanOptions.isolated``, this gateway's extension): each row read whole at one version, also
across ``nextK`` pages and resumed scanners; refused against a gateway that does not confirm the extension."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from connector.accumulo import AccumuloError, Cell, Connection, Key, Mutation, Range
from connector.accumulo.extensions import (
    BULK_RFILE,
    SCAN_ISOLATED,
    SCAN_TIMEOUT,
    SUMMARY_VISIBILITY,
    gateway_extensions,
)
from connector.accumulo.whole_rows import resume_range, whole_rows

from .upstream_proxy import UpstreamProxy

WIDE = 200  # cells per row: many pages of a small page size
ROWS = [b"w0", b"w1", b"w2"]


def test_the_gateway_names_the_extensions_the_client_spells(conn_a):
    _, names = gateway_extensions(conn_a)
    assert names == {SCAN_TIMEOUT, SCAN_ISOLATED, BULK_RFILE, SUMMARY_VISIBILITY}


def _round(row: bytes, n: int) -> Mutation:
    """One mutation rewriting every cell of ``row`` to round ``n``'s value."""
    m = Mutation(row)
    for q in range(WIDE):
        m.put("f", b"q%04d" % q, b"round-%06d" % n)
    return m


def _values_by_row(cells) -> dict[bytes, set[bytes]]:
    out: dict[bytes, set[bytes]] = {}
    for c in cells:
        out.setdefault(c.row, set()).add(c.value)
    return out


def test_an_isolated_scan_sees_each_row_at_one_round_while_it_is_rewritten(conn_a, table):
    """A writer rewrites wide rows round after round (each row one mutation, every cell the round's value); scans
    with a page size of 7 cells read them all the while. Every isolated read shows each row whole at one round;
    the same reads without isolation are counted, not asserted (whether they catch a row mid-rewrite depends on
    timing)."""
    with conn_a.batch_writer(table) as w:
        w.add_mutations(_round(r, 0) for r in ROWS)
    stop = threading.Event()
    rounds = [0]
    errors: list[BaseException] = []

    def rewrite() -> None:
        try:
            with conn_a.batch_writer(table) as w:
                while not stop.is_set():
                    rounds[0] += 1
                    for r in ROWS:
                        w.add_mutation(_round(r, rounds[0]))
                    w.flush()
                    time.sleep(0.01)  # leave the machine's two cores to the reads too
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    writer = threading.Thread(target=rewrite, daemon=True)
    writer.start()
    isolated_reads = mixed_without = 0
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and isolated_reads < 30:
            cells = list(conn_a.scan(table, batch_size=7, isolated=True))
            by_row = _values_by_row(cells)
            assert sorted(by_row) == ROWS and len(cells) == WIDE * len(ROWS)
            for row, values in by_row.items():
                assert len(values) == 1, f"isolated read of {row!r} mixed rounds {sorted(values)[:4]}"
            batches = list(conn_a.scan_batches(table, Range.exact_row(b"w1"), batch_size=7, isolated=True))
            assert len(set(pa.concat_arrays([b.column("value") for b in batches]).to_pylist())) == 1
            isolated_reads += 1
            plain = _values_by_row(conn_a.scan(table, batch_size=7))
            mixed_without += sum(len(v) > 1 for v in plain.values())
    finally:
        stop.set()
        writer.join(60)
    assert not errors, errors
    assert isolated_reads >= 5 and rounds[0] >= isolated_reads, (isolated_reads, rounds[0])
    print(f"\n{isolated_reads} isolated reads over {rounds[0]} rounds, none mixed; the same reads without "
          f"isolation caught {mixed_without} row(s) mid-rewrite")


def test_an_isolated_scan_returns_every_cell_once_over_many_pages(conn_a, table):
    rows = [b"r%03d" % i for i in range(30)]
    with conn_a.batch_writer(table) as w:
        for i, r in enumerate(rows):
            m = Mutation(r)
            for q in range(1 + i * 7):  # rows of 1 to 204 cells: pages end inside rows and between them
                m.put("f", b"q%04d" % q, b"v", timestamp=1)
            w.add_mutation(m)
    expected = [(c.row, c.cq) for c in conn_a.scan(table)]
    for size in (1, 5, 64, 1000):
        assert [(c.row, c.cq) for c in conn_a.scan(table, batch_size=size, isolated=True)] == expected
        batches = conn_a.scan_batches(table, Range.rows(b"r010", b"r020"), batch_size=size, isolated=True)
        got = [(r, q) for b in batches for r, q in zip(b.column("row").to_pylist(), b.column("cq").to_pylist(),
                                                       strict=True)]
        assert got == [x for x in expected if b"r010" <= x[0] <= b"r020"]


# --- whole rows over pages and resumed scanners (no cluster) --------------------------------------------------


def _cells(spec: str) -> list[Cell]:
    """'a1 a2 b1' -> cells of rows a, a, b."""
    return [Cell(t[0].encode(), b"f", t[1:].encode(), b"", 1, b"v") for t in spec.split()]


def test_whole_rows_holds_back_each_pages_last_row_until_it_is_complete():
    pages = {"s1": [(_cells("a1 a2 b1"), True), (_cells("b2 b3"), True), (_cells("b4 c1"), True),
                    (_cells("c2"), False)]}
    fetch = whole_rows(lambda _c, sid, _k: pages[sid].pop(0))
    got = [fetch(None, "s1", 3) for _ in range(4)]
    assert [[c.row + c.cq for c in page] for page, _ in got] == [[b"a1", b"a2"], [], [b"b1", b"b2", b"b3", b"b4"],
                                                                  [b"c1", b"c2"]]
    assert [more for _, more in got] == [True, True, True, False]


def test_a_resumed_isolated_scan_drops_the_held_row_and_starts_at_the_next_row():
    pages = {"s1": [(_cells("a1 b1"), True)], "s2": [(_cells("b1 b2"), False)]}
    fetch = whole_rows(lambda _c, sid, _k: pages[sid].pop(0))
    first, _ = fetch(None, "s1", 2)
    assert [c.row for c in first] == [b"a"]  # b is held back; then the scanner is lost
    rng = resume_range(Range.rows(b"a", b"z"), Key.of(first[-1]))
    assert rng.start == Key(b"a\x00") and rng.start_inclusive and rng.stop == Range.rows(b"a", b"z").stop
    again, more = fetch(None, "s2", 2)  # the new scanner reads row b whole; nothing of s1's b is handed out
    assert [c.row + c.cq for c in again] == [b"b1", b"b2"] and not more


def test_whole_rows_works_on_cell_batches():
    def batch(spec: str) -> pa.RecordBatch:
        cells = _cells(spec)
        return pa.RecordBatch.from_pydict({name: [getattr(c, name) for c in cells]
                                           for name in ("row", "cf", "cq", "cv", "ts", "value")})

    pages = {"s": [(batch("a1 b1 b2"), True), (batch("b3"), True), (batch("c1"), False)]}
    fetch = whole_rows(lambda _c, sid, _k: pages[sid].pop(0))
    rows = [fetch(None, "s", 3)[0].column("row").to_pylist() for _ in range(3)]
    assert rows == [[b"a"], [], [b"b", b"b", b"b", b"c"]]


# --- against a gateway that does not confirm the extension ---------------------------------------------------


def test_an_isolated_scan_is_refused_by_an_upstream_proxy_and_a_plain_one_works(accumulo, conn_a, table):
    conn_a.write(table, [Mutation("r").put("f", "q", "v", timestamp=3)])
    a = accumulo["a"]
    with UpstreamProxy(a.gateway_host, a.gateway_port) as upstream, \
            Connection("127.0.0.1", upstream.port, secret_file=a.secret_file) as conn:
        assert [c.value for c in conn.scan(table)] == [b"v"]  # the field-skipping proxy serves plain scans
        assert gateway_extensions(conn)[1] == frozenset()  # it does not know gatewayExtensions: none
        with pytest.raises(AccumuloError, match="isolated scan of table .* needs this project's gateway"):
            list(conn.scan(table, isolated=True))
        with pytest.raises(AccumuloError, match="scan.isolated"):
            list(conn.scan_batches(table, isolated=True))
        assert [c.value for c in conn.scan(table)] == [b"v"]  # and the connection is fine afterwards
