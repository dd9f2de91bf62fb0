"""The export queue on a real Accumulo: producer, status, and the drain's export-then-delete contract."""

from __future__ import annotations

import time

import pytest

from connector.accumulo import Mutation
from connector.export import SequencedExport
from connector.queue import DrainSettings, ExportQueue, MalformedEntryError, QueueConfig, drain_bucket, drain_queue
from connector.queue.codec import EntryCodec
from connector.queue.drain import EntryProcessor
from connector.queue.reader import read_bucket

from .conftest import unique_table

pytestmark = pytest.mark.cluster


class RecordingExporter:
    """Collects the batches it is given; optionally raises on one call (1-based) to simulate a failure."""

    def __init__(self, fail_on_call: int | None = None) -> None:
        self.batches: list[list[SequencedExport]] = []
        self.calls = 0
        self.fail_on_call = fail_on_call

    def export(self, exports):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("destination down")
        self.batches.append(list(exports))

    @property
    def exported(self) -> list[SequencedExport]:
        return [e for batch in self.batches for e in batch]


def config_for(table: str, **kwargs) -> QueueConfig:
    return QueueConfig(table=table, qid=kwargs.pop("qid", "q"), num_buckets=kwargs.pop("num_buckets", 13),
                       buckets_per_tablet=kwargs.pop("buckets_per_tablet", 4), **kwargs)


def rows_of(conn, table, rng=None) -> dict[bytes, list]:
    """The table's rows, less the queue's own bookkeeping (stored config, bucket marks)."""
    out: dict[bytes, list] = {}
    for cell in conn.scan(table, rng):
        if not cell.row.endswith(b"#config") and b"#mark:" not in cell.row:
            out.setdefault(cell.row, []).append(cell)
    return out


def some_exports(n: int, value_size: int = 20) -> list[SequencedExport]:
    return [SequencedExport({"id": i % 97, "kind": "doc"}, {"n": i, "pad": "x" * value_size}, 1000 + i)
            for i in range(n)]


def as_tuples(exports) -> list[tuple[bytes, bytes]]:
    """Exports as sorted (row, value bytes): comparable, keeps duplicates."""
    codec = EntryCodec(QueueConfig("t", "q", 1))
    return sorted(codec.encode(e.key, e.value, e.seq) for e in exports)


# --- producer -------------------------------------------------------------------------------------------


def test_init_creates_the_table_and_splits_idempotently(conn_a):
    name = unique_table("queue")
    cfg = config_for(name)
    try:
        queue = ExportQueue(conn_a, cfg)
        queue.init()
        assert conn_a.table_exists(name)
        assert conn_a.list_splits(name) == sorted(cfg.split_points())
        assert conn_a.list_splits(name) == [b"q#", b"q:4", b"q:8", b"q:c", b"q:~"]
        queue.init()  # again: nothing changes, no error
        assert conn_a.list_splits(name) == sorted(cfg.split_points())
        # a second queue in the same table adds its own splits next to the first one's
        ExportQueue(conn_a, config_for(name, qid="r", num_buckets=5, buckets_per_tablet=2)).init()
        assert conn_a.list_splits(name) == sorted([*cfg.split_points(), b"r#", b"r:2", b"r:4", b"r:~"])
    finally:
        conn_a.delete_table(name, missing_ok=True)


def test_init_on_an_existing_table_keeps_its_data(conn_a, table):
    conn_a.write(table, [Mutation("other").put("f", "q", "keep")])
    ExportQueue(conn_a, config_for(table)).init()
    assert conn_a.list_splits(table) == [b"q#", b"q:4", b"q:8", b"q:c", b"q:~"]
    # the other data is untouched; init adds only the queue's configuration row
    assert [(c.row, c.value) for c in conn_a.scan(table) if c.row != b"q#config"] == [(b"other", b"keep")]
    assert [c.row for c in conn_a.scan(table)] == [b"other", b"q#config"]


def test_add_add_all_and_status(conn_a, table):
    cfg = config_for(table)
    codec = EntryCodec(cfg)
    with ExportQueue(conn_a, cfg) as queue:
        queue.init()
        queue.add("k1", {"v": 1}, 7)
        assert queue.add_all([("k1", {"v": 2}, 9), SequencedExport("0001", "x", 5)]) == 2
        conn_a.write(table, [queue.mutation("a", None, 11)])  # a caller sending the mutation itself
    with ExportQueue(conn_a, cfg) as queue:
        status = queue.status()

    rows = rows_of(conn_a, table)
    assert len(rows) == 4
    for cells in rows.values():
        assert [(c.cf, c.cq) for c in cells] == [(b"e", b"v")]
        assert cells[0].ts > 1_000_000_000_000  # the server's time in ms, not the seq
    expected: dict[int, list] = {}
    for key, value, seq in [("k1", {"v": 1}, 7), ("k1", {"v": 2}, 9), ("0001", "x", 5), ("a", None, 11)]:
        row, value_bytes = codec.encode(key, value, seq)
        assert row in rows
        assert rows[row][0].value == value_bytes
        b = cfg.layout.parse_row(row).bucket
        n, size, oldest = expected.get(b, [0, 0, seq])
        expected[b] = [n + 1, size + len(row) + len(value_bytes), min(oldest, seq)]
    assert {b.bucket: [b.entries, b.bytes, b.oldest_seq] for b in status.buckets} == expected
    assert status.entries == 4
    assert status.bytes == sum(v[1] for v in expected.values())
    assert status.oldest_seq == 5
    assert status.malformed == 0 and status.dead_letters == 0
    assert not status.empty
    empty_bucket = next(b for b in range(13) if b not in expected)
    assert status.bucket(empty_bucket).entries == 0


def test_adds_are_dropped_when_the_block_raises(conn_a, table):
    cfg = config_for(table)
    with pytest.raises(KeyError), ExportQueue(conn_a, cfg) as queue:
        queue.add("k", 1, 1)
        raise KeyError("caller failed")
    assert rows_of(conn_a, table) == {}


# --- drain ------------------------------------------------------------------------------------------------


def test_drain_exports_every_entry_once_in_bounded_batches(conn_a, table):
    cfg = config_for(table)
    exports = some_exports(600)
    with ExportQueue(conn_a, cfg) as queue:
        queue.init()
        queue.add_all(exports)
    exporter = RecordingExporter()
    progress: list[int] = []
    buffer_bytes = 2000

    stats = drain_queue(conn_a, cfg, exporter, DrainSettings(buffer_bytes=buffer_bytes), batch_size=50,
                        progress=lambda bucket, _stats: progress.append(bucket))

    got = exporter.exported
    assert len(got) == 600
    assert as_tuples(got) == as_tuples(exports)  # each exactly once (the rows are distinct)
    codec = EntryCodec(cfg)
    for batch in exporter.batches:
        sizes = [sum(map(len, codec.encode(e.key, e.value, e.seq))) for e in batch]
        assert sum(sizes) <= buffer_bytes
        # within a bucket, batches arrive in row order: key, then seq
        assert [codec.encode(e.key, e.value, e.seq)[0] for e in batch] == sorted(
            codec.encode(e.key, e.value, e.seq)[0] for e in batch)
    assert stats.entries == stats.exported == stats.deleted == 600
    assert stats.dead_lettered == 0
    assert stats.batches == len(exporter.batches) > 13
    assert stats.bytes == sum(sum(map(len, codec.encode(e.key, e.value, e.seq))) for e in exports)
    assert progress == list(range(13)) * 2  # one pass that drained, one that found the queue empty
    assert ExportQueue(conn_a, cfg).status().empty
    assert rows_of(conn_a, table, cfg.layout.queue_range()) == {}


def test_an_entry_larger_than_the_buffer_goes_alone(conn_a, table):
    cfg = config_for(table, num_buckets=1, buckets_per_tablet=1)
    with ExportQueue(conn_a, cfg) as queue:
        queue.add("a", "small", 1)
        queue.add("b", "x" * 5000, 2)
        queue.add("c", "small", 3)
        queue.add("d", "small", 4)
    exporter = RecordingExporter()
    stats = drain_bucket(conn_a, cfg, 0, exporter, DrainSettings(buffer_bytes=100))
    assert [[e.key for e in batch] for batch in exporter.batches] == [["a"], ["b"], ["c", "d"]]
    assert stats.batches == 3 and stats.deleted == 4
    assert rows_of(conn_a, table) == {}


def test_a_re_added_entry_survives_the_delete_of_the_version_read(conn_a, table):
    cfg = config_for(table)
    with ExportQueue(conn_a, cfg) as queue:
        queue.add("k1", "v", 42)
        queue.add("k2", "w", 43)
    bucket = cfg.layout.bucket_of(b'"k1"')
    read = [e for b in range(13) for e in read_bucket(conn_a, cfg, b)]
    assert len(read) == 2
    time.sleep(0.05)  # server timestamps are in ms: make sure the re-add is strictly newer
    with ExportQueue(conn_a, cfg) as queue:
        queue.add("k1", "v", 42)  # same row again, e.g. a producer's retry
    row = cfg.layout.entry_row(b'"k1"', 42)
    newer = rows_of(conn_a, table)[row][0].ts
    old = next(e.ts for e in read if e.row == row)
    assert newer > old

    exporter = RecordingExporter()
    stats = EntryProcessor(conn_a, cfg, exporter).process(read)

    assert stats.exported == stats.deleted == 2
    remaining = rows_of(conn_a, table)
    assert list(remaining) == [row]
    assert remaining[row][0].ts == newer
    # the next drain exports it again (at least once) and then it is gone
    again = RecordingExporter()
    assert drain_bucket(conn_a, cfg, bucket, again).exported == 1
    assert again.exported == [SequencedExport("k1", "v", 42)]
    assert rows_of(conn_a, table) == {}


def test_an_exporter_failure_deletes_nothing_of_its_batch(conn_a, table):
    cfg = config_for(table, num_buckets=1, buckets_per_tablet=1)
    exports = [SequencedExport(f"k{i:02d}", "v" * 10, i) for i in range(20)]
    with ExportQueue(conn_a, cfg) as queue:
        queue.add_all(exports)
    before = rows_of(conn_a, table)
    exporter = RecordingExporter(fail_on_call=2)

    with pytest.raises(RuntimeError, match="destination down"):
        drain_bucket(conn_a, cfg, 0, exporter, DrainSettings(buffer_bytes=150))

    first = exporter.batches[0]
    assert 1 < len(first) < 20
    after = rows_of(conn_a, table)
    codec = EntryCodec(cfg)
    assert set(after) == set(before) - {codec.encode(e.key, e.value, e.seq)[0] for e in first}
    assert len(after) == 20 - len(first)  # the failed batch and everything after it is still queued

    # a plain failure on the first call deletes nothing at all
    with pytest.raises(RuntimeError):
        drain_bucket(conn_a, cfg, 0, RecordingExporter(fail_on_call=1))
    assert set(rows_of(conn_a, table)) == set(after)


def _write_malformed(conn, table, cfg) -> dict[bytes, tuple[bytes, str]]:
    """Raw rows a drain cannot decode, each in the bucket range it will be read from: row -> (value, reason)."""
    layout = cfg.layout
    key = b'"k1"'
    prefix = layout.bucket_prefix(layout.bucket_of(key))
    bad = {
        layout.bucket_prefix(3) + b"ab": (b'"v"', "short row"),
        prefix + key + b"\x80" + b"\x00" * 7: (b'"v"', "does not fit"),
        layout.entry_row(key, 99): (b"{not json", "undecodable value"),
        layout.bucket_prefix(3) + key + (5).to_bytes(8, "big"): (b'"v"', "hashes to bucket"),
    }
    conn.write(table, [Mutation(row).put("e", "v", value) for row, (value, _) in bad.items()])
    return bad


def test_malformed_entries_are_dead_lettered_with_their_reason(conn_a, table):
    cfg = config_for(table)
    good = some_exports(30)
    with ExportQueue(conn_a, cfg) as queue:
        queue.init()
        queue.add_all(good)
    bad = _write_malformed(conn_a, table, cfg)
    originals = {row: cells[0].ts for row, cells in rows_of(conn_a, table).items() if row in bad}
    # status parses rows only: the entry with an undecodable value looks well-formed until a drain reads it
    assert ExportQueue(conn_a, cfg).status().malformed == len(bad) - 1
    exporter = RecordingExporter()

    stats = drain_queue(conn_a, cfg, exporter, DrainSettings(buffer_bytes=300))

    assert as_tuples(exporter.exported) == as_tuples(good)
    assert stats.dead_lettered == len(bad)
    assert stats.exported == len(good)
    assert stats.deleted == len(good) + len(bad)
    assert rows_of(conn_a, table, cfg.layout.queue_range()) == {}
    dead = rows_of(conn_a, table, cfg.layout.dead_letter_range())
    assert set(dead) == {cfg.layout.dead_letter_row(row) for row in bad}
    for row, (value, reason) in bad.items():
        cells = {c.cq: c.value for c in dead[cfg.layout.dead_letter_row(row)]}
        assert reason in cells[b"reason"].decode()
        assert cells[b"value"] == value
        assert int(cells[b"ts"]) == originals[row]
    status = ExportQueue(conn_a, cfg).status()
    assert status.empty and status.dead_letters == len(bad)


def test_fail_fast_raises_before_exporting_or_deleting_the_batch(conn_a, table):
    cfg = config_for(table)
    good = some_exports(30)
    with ExportQueue(conn_a, cfg) as queue:
        queue.add_all(good)
    bad = _write_malformed(conn_a, table, cfg)
    before = rows_of(conn_a, table)
    bucket = cfg.layout.bucket_of(b'"k1"')  # holds good entries and malformed ones
    entries = list(read_bucket(conn_a, cfg, bucket))
    assert any(e.row in bad for e in entries) and any(e.row not in bad for e in entries)
    exporter = RecordingExporter()

    with pytest.raises(MalformedEntryError) as info:
        EntryProcessor(conn_a, cfg, exporter, DrainSettings(fail_fast=True)).process(entries)

    assert info.value.row in bad
    assert bad[info.value.row][1] in info.value.reason
    assert exporter.calls == 0
    assert rows_of(conn_a, table) == before
