"""The queue's row layout, serializers and configuration: pure unit tests, no cluster."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.accumulo import Key, Range
from connector.export import SequencedExport
from connector.queue import (
    DrainStats,
    MalformedEntryError,
    QueueConfig,
    QueueLayout,
    bucket_of,
)
from connector.queue.codec import EntryCodec
from connector.queue.config import default_buckets_per_tablet
from connector.queue.errors import QueueError
from connector.queue.layout import hex_width, murmur3_32
from connector.serializers import BytesSerializer, JsonSerializer, serializer_from_name

MAX_SEQ = (1 << 63) - 1


class Rot13:
    """A custom serializer for serializer_from_name("module:callable")."""

    def dumps(self, obj: str) -> bytes:
        return obj.translate(str.maketrans("abc", "nop")).encode()

    def loads(self, data: bytes) -> str:
        return data.decode().translate(str.maketrans("nop", "abc"))


ROT13_INSTANCE = Rot13()


def make_rot13() -> Rot13:
    return Rot13()


def make_nothing() -> int:
    return 3


# --- hashing and buckets --------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), [(b"a", 1009084850), (b"0001", -195267438), (b"k1", -37330902)])
def test_murmur3_check_values(key, expected):
    assert murmur3_32(key) == expected


@pytest.mark.parametrize(("key", "num_buckets", "expected"), [
    (b"0001", 13, 2), (b"0001", 1009, 713), (b"k1", 13, 11), (b"a", 1, 0),
])
def test_bucket_check_values(key, num_buckets, expected):
    assert bucket_of(key, num_buckets) == expected
    assert QueueLayout("q", num_buckets).bucket_of(key) == expected


def test_bucket_of_min_int_hash_is_not_negative(monkeypatch):
    # abs(-2**31) must not wrap around as Java's Math.abs does; Fluo uses Math.abs(hash % n), which agrees
    import connector.queue.layout as layout_mod

    monkeypatch.setattr(layout_mod, "murmur3_32", lambda _key: -(2**31))
    for n in (1, 3, 7, 13, 1009, 2**31 - 1):
        b = layout_mod.bucket_of(b"x", n)
        assert 0 <= b < n
        assert b == (2**31) % n


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=5000))
def test_bucket_always_in_range(key, n):
    assert 0 <= bucket_of(key, n) < n


@pytest.mark.parametrize(("num_buckets", "width"), [
    (1, 1), (2, 1), (5, 1), (7, 1), (8, 1), (15, 1), (16, 2), (17, 2), (255, 2), (256, 3), (1009, 3),
    (4095, 3), (4096, 4), (65536, 5),
])
def test_hex_width(num_buckets, width):
    assert hex_width(num_buckets) == width
    assert QueueLayout("q", num_buckets).hex_width == width


def test_bucket_hex_is_lowercase_and_padded():
    layout = QueueLayout("q", 1009)
    assert layout.bucket_hex(0) == "000"
    assert layout.bucket_hex(713) == "2c9"
    assert layout.bucket_hex(1008) == "3f0"
    assert QueueLayout("q", 16).bucket_hex(10) == "0a"
    assert QueueLayout("q", 15).bucket_hex(14) == "e"
    with pytest.raises(ValueError):
        layout.bucket_hex(1009)
    with pytest.raises(ValueError):
        layout.bucket_hex(-1)


# --- validation ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("qid", "num_buckets"), [
    ("", 4), ("a:b", 4), (":", 4), ("a#dead", 4), ("q", 0), ("q", -3), ("q", True), ("q", 2.0), (None, 4),
])
def test_layout_rejects_bad_arguments(qid, num_buckets):
    with pytest.raises(ValueError):
        QueueLayout(qid, num_buckets)


# --- rows ---------------------------------------------------------------------------------------------


def test_entry_row_matches_the_fluo_layout():
    layout = QueueLayout("q", 13)
    assert layout.entry_row(b"0001", 5) == b"q:2:0001" + b"\x00" * 7 + b"\x05"
    assert layout.entry_row(b"k1", 0x0102030405060708) == b"q:b:k1\x01\x02\x03\x04\x05\x06\x07\x08"
    assert QueueLayout("exp", 1009).entry_row(b"0001", MAX_SEQ) == b"exp:2c9:0001\x7f" + b"\xff" * 7


@pytest.mark.parametrize("seq", [-1, MAX_SEQ + 1, 1.5, True, "3"])
def test_entry_row_rejects_bad_seq(seq):
    with pytest.raises(ValueError):
        QueueLayout("q", 13).entry_row(b"k", seq)


@given(
    qid=st.text(st.characters(blacklist_characters=":#", blacklist_categories=("Cs",)), min_size=1, max_size=8),
    num_buckets=st.integers(min_value=1, max_value=5000),
    key=st.binary(max_size=40),
    seq=st.integers(min_value=0, max_value=MAX_SEQ),
)
def test_row_round_trip(qid, num_buckets, key, seq):
    layout = QueueLayout(qid, num_buckets)
    row = layout.entry_row(key, seq)
    parsed = layout.parse_row(row)
    assert parsed == (layout.bucket_of(key), key, seq)
    assert row.startswith(layout.bucket_prefix(parsed.bucket))
    assert _in_range(layout.bucket_range(parsed.bucket), row)
    assert _in_range(layout.queue_range(), row)
    assert not _in_range(layout.dead_letter_range(), row)


@given(keys=st.lists(st.tuples(st.binary(max_size=12), st.integers(min_value=0, max_value=MAX_SEQ)),
                     min_size=2, max_size=20))
def test_rows_of_one_key_sort_by_seq(keys):
    layout = QueueLayout("q", 1)
    rows = sorted(layout.entry_row(k, s) for k, s in keys)
    same_key = [(k, s) for k, s in keys if k == keys[0][0]]
    ordered = [layout.parse_row(r) for r in rows if layout.parse_row(r).key_bytes == keys[0][0]]
    # for a fixed key the 8-byte big-endian seq makes row order = seq order
    assert [p.seq for p in ordered] == sorted(s for _, s in same_key)


def _malformed_cases():
    layout = QueueLayout("q", 13)
    good = layout.entry_row(b"k1", 7)  # b"q:b:k1" + seq
    seq7 = (7).to_bytes(8, "big")
    return [
        (b"", "wrong prefix"),
        (b"p:b:k1" + seq7, "wrong prefix"),
        (b"qq:b:k1" + seq7, "wrong prefix"),
        (b"q:", "short row"),
        (b"q:b", "short row"),
        (b"q:b:", "short row"),
        (b"q:b:k1\x00\x00", "short row"),
        (b"q:B:k1" + seq7, "bad bucket hex"),
        (b"q:g:k1" + seq7, "bad bucket hex"),
        (b"q:0b:k1" + seq7, "bad bucket hex"),
        (b"q:bk1" + seq7, "bad bucket hex"),
        (b"q:d:k1" + seq7, "out of range"),
        (b"q:f:k1" + seq7, "out of range"),
        (b"q:b:k1\x80" + b"\x00" * 7, "does not fit"),
        (b"q:b:k1" + b"\xff" * 8, "does not fit"),
        (b"q:3:k1" + seq7, "hashes to bucket 11"),
        (good[:-8] + b"x" + good[-8:], "hashes to bucket"),
    ]


@pytest.mark.parametrize(("row", "reason"), _malformed_cases())
def test_parse_row_names_the_reason(row, reason):
    layout = QueueLayout("q", 13)
    with pytest.raises(MalformedEntryError) as info:
        layout.parse_row(row)
    assert reason in info.value.reason
    assert info.value.row == row
    assert repr(row) in str(info.value)


def test_malformed_entry_error_pickles():
    err = pickle.loads(pickle.dumps(MalformedEntryError(b"q:x", "bad bucket hex")))
    assert (err.row, err.reason) == (b"q:x", "bad bucket hex")


def test_empty_key_is_a_valid_entry():
    layout = QueueLayout("q", 13)
    assert layout.parse_row(layout.entry_row(b"", 3)) == (layout.bucket_of(b""), b"", 3)


# --- ranges and splits ----------------------------------------------------------------------------------


def _in_range(rng: Range, row: bytes) -> bool:
    key = Key(row, b"e", b"v")
    after_start = rng.start is None or _cmp(key, rng.start) >= 0
    before_stop = rng.stop is None or _cmp(key, rng.stop) < 0
    return after_start and before_stop


def _cmp(a: Key, b: Key) -> int:
    ta, tb = (a.row, a.cf, a.cq, a.cv), (b.row, b.cf, b.cq, b.cv)
    return (ta > tb) - (ta < tb)


def test_bucket_ranges_do_not_overlap():
    layout = QueueLayout("q", 20)
    row = layout.entry_row(b"k1", 9)
    bucket = layout.parse_row(row).bucket
    assert [b for b in range(20) if _in_range(layout.bucket_range(b), row)] == [bucket]
    # a row of a neighbouring queue id is in none of them
    other = QueueLayout("q2", 20).entry_row(b"k1", 9)
    assert not _in_range(layout.queue_range(), other)


@pytest.mark.parametrize(("num_buckets", "per_tablet", "bucket_splits"), [
    (13, 4, [b"q:4", b"q:8", b"q:c"]),
    (16, 4, [b"q:04", b"q:08", b"q:0c"]),
    (16, 16, []),
    (1, 1, []),
    (5, 1, [b"q:1", b"q:2", b"q:3", b"q:4"]),
    (1009, 300, [b"q:12c", b"q:258", b"q:384"]),
])
def test_split_points(num_buckets, per_tablet, bucket_splits):
    splits = QueueLayout("q", num_buckets).split_points(per_tablet)
    assert splits == sorted([b"q#", b"q:~", *bucket_splits])


def test_split_points_separate_buckets_and_keep_dead_letters_apart():
    layout = QueueLayout("q", 13)
    splits = layout.split_points(4)

    def tablet(row: bytes) -> int:
        return sum(1 for s in splits if s < row)  # a tablet holds rows up to and including its end row

    tablets = {b: tablet(layout.bucket_prefix(b)) for b in range(13)}
    assert [tablets[b] for b in range(13)] == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4]
    for b in range(13):
        assert tablet(layout.entry_row(b"zz", 1)) >= 1
        assert tablet(layout.bucket_prefix(b) + b"\xff" * 20) == tablets[b]
    assert b"q#" < layout.dead_letter_prefix < b"q:"
    assert tablet(layout.dead_letter_row(b"q:3:anything")) == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_split_points_reject_bad_buckets_per_tablet(bad):
    with pytest.raises(ValueError):
        QueueLayout("q", 13).split_points(bad)


def test_dead_letter_rows():
    layout = QueueLayout("q", 13)
    original = layout.entry_row(b"k1", 1)
    dead = layout.dead_letter_row(original)
    assert dead == b"q#dead:" + original
    assert layout.original_row(dead) == original
    assert _in_range(layout.dead_letter_range(), dead)
    assert not _in_range(layout.queue_range(), dead)
    assert b"q#" <= dead < b"q:"
    with pytest.raises(ValueError):
        layout.original_row(original)


def test_layout_equality_and_pickle():
    layout = QueueLayout("q", 13)
    assert layout == QueueLayout("q", 13) != QueueLayout("q", 14)
    assert pickle.loads(pickle.dumps(layout)) == layout


# --- serializers ----------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_json_round_trip(obj):
    s = JsonSerializer()
    assert s.loads(s.dumps(obj)) == obj


@given(st.dictionaries(st.text(max_size=5), st.integers(), max_size=8))
def test_json_is_deterministic_whatever_the_insertion_order(d):
    s = JsonSerializer()
    reordered = dict(reversed(list(d.items())))
    assert s.dumps(d) == s.dumps(reordered) == s.dumps(dict(sorted(d.items())))


def test_json_is_compact_sorted_utf8():
    s = JsonSerializer()
    assert s.dumps({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()
    assert s.dumps("a") == b'"a"'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}, object(), b"bytes"])
def test_json_refuses_what_it_cannot_hold(bad):
    with pytest.raises((TypeError, ValueError)):
        JsonSerializer().dumps(bad)


@pytest.mark.parametrize("bad", [b"\xff\xfe", b"{", b"", b"nope"])
def test_json_loads_raises_value_error(bad):
    with pytest.raises(ValueError):
        JsonSerializer().loads(bad)


def test_bytes_serializer():
    s = BytesSerializer()
    assert s.dumps(b"\x00\xff") == b"\x00\xff"
    assert s.dumps(bytearray(b"ab")) == b"ab"
    assert s.dumps("é") == "é".encode()
    assert s.loads(b"xy") == b"xy"
    with pytest.raises(TypeError):
        s.dumps(3)


def test_serializer_from_name():
    assert isinstance(serializer_from_name("json"), JsonSerializer)
    assert isinstance(serializer_from_name("bytes"), BytesSerializer)
    for name in (f"{__name__}:Rot13", f"{__name__}:make_rot13", f"{__name__}:ROT13_INSTANCE"):
        s = serializer_from_name(name)
        assert s.loads(s.dumps("abc")) == "abc"
        assert s.dumps("abc") == b"nop"


@pytest.mark.parametrize(("name", "message"), [
    ("pickle", "unknown serializer"),
    ("", "non-empty"),
    ("no_such_module_xyz:thing", "cannot import"),
    (f"{__name__}:NoSuchThing", "no attribute"),
    (f"{__name__}:MAX_SEQ", "neither"),
    (f"{__name__}:make_nothing", "did not give"),
    (":x", "module:callable"),
])
def test_serializer_from_name_errors(name, message):
    with pytest.raises(ValueError, match=message):
        serializer_from_name(name)


# --- configuration and codec ------------------------------------------------------------------------------


@pytest.mark.parametrize("num_buckets", [1, 5, 8, 13, 16, 17, 31, 64, 100, 1009, 4096, 10_000])
def test_default_buckets_per_tablet_gives_8_to_16_tablets(num_buckets):
    bpt = default_buckets_per_tablet(num_buckets)
    tablets = -(-num_buckets // bpt)
    assert tablets <= 16
    assert tablets >= min(8, num_buckets)


def test_config():
    cfg = QueueConfig("t", "q", 1009)
    assert cfg.buckets_per_tablet is None and cfg.tablet_buckets == 64
    assert cfg.layout == QueueLayout("q", 1009)
    assert len(cfg.split_points()) == 2 + 15
    assert QueueConfig("t", "q", 13, buckets_per_tablet=4).split_points() == QueueLayout("q", 13).split_points(4)
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    key_s, value_s = QueueConfig("t", "q", 4, key_serializer="bytes").serializers()
    assert isinstance(key_s, BytesSerializer) and isinstance(value_s, JsonSerializer)


@pytest.mark.parametrize("kwargs", [
    {"table": ""}, {"qid": "a:b"}, {"num_buckets": 0}, {"buckets_per_tablet": 0}, {"key_serializer": ""},
])
def test_config_validates(kwargs):
    args = {"table": "t", "qid": "q", "num_buckets": 4, **kwargs}
    with pytest.raises(ValueError):
        QueueConfig(**args)


def test_codec_round_trip_and_undecodable_parts():
    codec = EntryCodec(QueueConfig("t", "q", 13))
    row, value = codec.encode({"id": 1}, [1, 2], 42)
    assert codec.decode(row, value) == SequencedExport({"id": 1}, [1, 2], 42)
    with pytest.raises(MalformedEntryError, match="undecodable value"):
        codec.decode(row, b"{not json")
    bad_key_row = codec.layout.entry_row(b"\xff{", 1)
    with pytest.raises(MalformedEntryError, match="undecodable key"):
        codec.decode(bad_key_row, value)


def test_drain_stats_add_up():
    a = DrainStats(entries=2, exported=1, deleted=2, dead_lettered=1, batches=1, bytes=10, seconds=0.5)
    b = DrainStats(entries=3, exported=3, deleted=3, batches=2, bytes=5, seconds=0.25)
    assert a + b == DrainStats(5, 4, 5, 1, 3, 15, 0.75)
    assert sum([a, b]) == a + b


def test_bucket_range_of_finds_the_bucket_even_for_malformed_rows():
    from connector.queue import QueueLayout

    layout = QueueLayout("q", 13)
    good = layout.entry_row(b'"k1"', 5)
    assert layout.bucket_range_of(good) == layout.parse_row(good).bucket
    assert layout.bucket_range_of(layout.bucket_prefix(3) + b"x") == 3  # too short to parse, still bucket 3
    assert layout.bucket_range_of(b"q:d:abc") is None  # bucket 13 of 13 does not exist
    assert layout.bucket_range_of(b"q:3") is None
    assert layout.bucket_range_of(b"other:3:abcdefghij") is None


def test_bucket_counts_beyond_the_bound_are_refused_everywhere(capsys):
    """The new user's finding: --buckets 100000000 was accepted without a word."""
    from connector.cli.main import parser
    from connector.combine import CombineConfig
    from connector.queue.layout import MAX_BUCKETS

    assert QueueLayout("q", MAX_BUCKETS).num_buckets == MAX_BUCKETS
    for make in (lambda n: QueueLayout("q", n), lambda n: QueueConfig(table="t", qid="q", num_buckets=n),
                 lambda n: CombineConfig(table="t", cid="c", num_buckets=n)):
        with pytest.raises(QueueError, match=f"at most {MAX_BUCKETS:,}|must be <= {MAX_BUCKETS}"):
            make(MAX_BUCKETS + 1)
    for argv in (["queue", "init", "--cluster", "A", "--table", "t", "--queue", "q", "--buckets", "100000000"],
                 ["drain", "--source", "A", "--dest", "B", "--table", "t", "--queue", "q", "--dest-table", "x",
                  "--buckets", "100000000"]):
        with pytest.raises(SystemExit) as exit_:
            parser().parse_args(argv)
        assert exit_.value.code == 2
        assert f"must be <= {MAX_BUCKETS}" in capsys.readouterr().err
