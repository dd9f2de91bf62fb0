"""Issue 30 item 3: PySpark 4.0 through 4.3. The choices of ``connector/spark/compat.py`` and what the sources
do with them, as pure logic: the compat module loaded as on PySpark 4.0 (its later modules and classes hidden),
the stream reader planning as Spark before 4.2 calls it (``latestOffset()`` without arguments) with a fake
planner in place of cluster A, and the row-based sink writer's batches. The proof on a real PySpark 4.0 is the
wheel's smoke run on it (``integration/smoke_wheel.py``, ``tests/test_wheel_smoke.py``)."""

from __future__ import annotations

import importlib
import inspect
import os
import sys

import pyarrow as pa
import pyspark
import pyspark.sql.datasource
import pytest
from pyspark.sql import Row

from connector.accumulo.options import GatewayOptions
from connector.queue import DrainSettings, QueueConfig
from connector.spark import compat, queue_source
from connector.spark.export_sink import rows_to_batches
from connector.spark.options import EXPORT_QUEUE, OptionError


@pytest.fixture
def compat_as_on_spark_4_0(monkeypatch):
    """The compat module as PySpark 4.0 loads it: no ``pyspark.sql.streaming.datasource``, no
    ``DataSourceStreamArrowWriter``, no ``Filter`` (the module already loaded is put back afterwards)."""
    monkeypatch.setitem(sys.modules, "pyspark.sql.streaming.datasource", None)  # import raises ImportError
    for name in ("DataSourceStreamArrowWriter", "Filter"):
        monkeypatch.delattr(pyspark.sql.datasource, name, raising=False)
    monkeypatch.delitem(sys.modules, "connector.spark.compat")
    old = importlib.import_module("connector.spark.compat")
    monkeypatch.setitem(sys.modules, "connector.spark.compat", compat)
    return old


def _version(text: str) -> tuple[int, int]:
    return tuple(int(p) for p in text.split(".")[:2])  # type: ignore[return-value]


def test_the_features_found_are_those_of_the_running_pyspark_s_version():
    # the dev venv runs the newest supported PySpark (all found); the oldest's smoke venv can run this file too
    running = _version(pyspark.__version__)
    assert compat.summary() == {"pyspark": pyspark.__version__,
                                **{f: running >= _version(v) for f, v in compat.NEEDS.items()}}
    if compat.ADMISSION_CONTROL:
        from pyspark.sql.streaming.datasource import ReadMaxRows

        assert compat.ReadMaxRows is ReadMaxRows
    if compat.FILTER_PUSHDOWN:
        compat.require("filter_pushdown", "option 'pushdown'")  # no error


def test_on_spark_4_0_the_later_features_are_absent_and_refused_in_one_line(compat_as_on_spark_4_0):
    old = compat_as_on_spark_4_0
    assert (old.ADMISSION_CONTROL, old.FILTER_PUSHDOWN, old.STREAM_ARROW_WRITER) == (False, False, None)
    assert old.ReadMaxRows(5).max_rows == 5 and old.ReadMaxBytes(7).max_bytes == 7
    assert isinstance(old.ReadAllAvailable(), old.ReadLimit)
    with pytest.raises(OptionError) as err:
        old.require("filter_pushdown", "option 'pushdown' (filter pushdown of Python data sources)")
    assert str(err.value) == (f"option 'pushdown' (filter pushdown of Python data sources) needs Spark 5.0 or newer; "
                              f"this is PySpark {pyspark.__version__}")


def test_filter_pushdown_needs_the_filters_and_a_spark_that_keeps_a_pushdown_to_its_scan(monkeypatch):
    """Issue 36: Spark 4.1-4.3 hand a reader its filters but share what the pushdown planned between the
    DataFrame's scans (refused, saying so); Spark 5.0 (``DataSourceReader.pushLimit``) keeps it to the scan.
    ``tests/test_spark_read.py`` checks the running Spark behaves as the flag says."""
    def loaded():
        monkeypatch.delitem(sys.modules, "connector.spark.compat")
        return importlib.import_module("connector.spark.compat")

    monkeypatch.setitem(sys.modules, "connector.spark.compat", compat)
    monkeypatch.setattr(pyspark.sql.datasource, "Filter", object, raising=False)
    monkeypatch.delattr(pyspark.sql.datasource.DataSourceReader, "pushLimit", raising=False)
    shared = loaded()  # as on 4.1-4.3
    assert (shared.FILTER_CLASSES, shared.FILTER_PUSHDOWN) == (True, False)
    with pytest.raises(OptionError) as err:
        shared.require("filter_pushdown", "option 'pushdown'")
    assert str(err.value) == (f"option 'pushdown' needs Spark 5.0 or newer; this is PySpark {pyspark.__version__}: "
                              f"this Spark gives every scan of a DataFrame the partitions planned for the last query "
                              f"of it that pushed filters; narrow the read with the options 'start_row', 'end_row', "
                              f"'prefix' or 'columns' instead")
    monkeypatch.setattr(pyspark.sql.datasource.DataSourceReader, "pushLimit", lambda self, limit: False, raising=False)
    scoped = loaded()  # as on 5.0
    assert (scoped.FILTER_CLASSES, scoped.FILTER_PUSHDOWN, scoped.WHY) == (True, True, {})
    scoped.require("filter_pushdown", "option 'pushdown'")  # no error


def test_spark_4_2_sees_admission_control_in_the_readers_signature():
    # Spark 4.2+ asks for latestOffset(start, limit) when the method takes parameters; 4.0 and 4.1 call it bare
    assert len(inspect.signature(queue_source.QueueStreamReader(_read()).latestOffset).parameters) == 2
    from connector.spark.drain_source import DrainStreamReader

    assert len(inspect.signature(DrainStreamReader.latestOffset).parameters) == 3  # self, start, limit


class FakePlanner:
    """The planner with cluster A's marks as a dict: a bucket is pending while its token differs from the one
    it was last planned with."""

    def __init__(self, marks: dict[str, str]) -> None:
        self.marks_now = marks

    def marks(self) -> dict[str, str]:
        return dict(self.marks_now)

    def pending(self, planned: dict[str, str]) -> dict[str, str]:
        return {h: t for h, t in self.marks_now.items() if planned.get(h) != t}


def _read(available_now: bool = False, **settings) -> queue_source.QueueRead:
    return queue_source.QueueRead(GatewayOptions("127.0.0.1", 42424), QueueConfig(table="q", qid="x", num_buckets=4),
                                  DrainSettings(**settings), available_now)


@pytest.fixture
def settled(monkeypatch):
    """The marks each settling was given, in order (none reach a cluster)."""
    calls: list[dict] = []
    monkeypatch.setattr(queue_source, "settle_marks", lambda conn, config, planned, drained_whole: calls.append(
        {"planned": dict(planned), "whole": sorted(drained_whole)}))
    monkeypatch.setattr(GatewayOptions, "shared", lambda self: None)
    return calls


def _reader(read: queue_source.QueueRead, marks: dict[str, str]) -> queue_source.QueueStreamReader:
    reader = queue_source.QueueStreamReader(read)
    reader.planner = FakePlanner(marks)  # type: ignore[assignment]
    return reader


def test_before_spark_4_2_the_reader_plans_from_the_last_offset_spark_planned(settled):
    h0, h1 = "0", "1"
    reader = _reader(_read(max_entries_per_trigger=10), {h0: "a", h1: "b"})
    first = reader.latestOffset()  # Spark 4.0/4.1: no start, no limit: the reader's own (10 entries)
    assert first == {"batch": 1, "marks": {h0: "a", h1: "b"}, "limits": {h0: 5, h1: 5}}
    assert settled == []
    reader.partitions(reader.initialOffset(), first)  # Spark plans the micro-batch: the reader remembers it
    reader.planner.marks_now = {h0: "a", h1: "c"}  # bucket 1 was marked again meanwhile
    second = reader.latestOffset()
    assert settled == [{"planned": {0: b"a", 1: b"b"}, "whole": []}]  # the first batch is done: settled
    assert second == {"batch": 2, "marks": {h1: "c"}, "limits": {h1: 10}}
    reader.partitions(first, second)
    reader.planner.marks_now = {}
    assert reader.latestOffset() == second  # nothing new: no micro-batch
    assert len(settled) == 2


def test_a_restarted_query_before_spark_4_2_continues_from_the_offset_spark_restored(settled):
    reader = _reader(_read(), {"2": "t"})
    restored = {"batch": 41, "marks": {"3": "s"}, "limits": {"3": None}}
    reader.partitions(restored, restored)  # Spark's setLatestSeenOffset after a restart
    offset = reader.latestOffset()
    assert settled == [{"planned": {3: b"s"}, "whole": [3]}]
    assert offset == {"batch": 42, "marks": {"2": "t"}, "limits": {"2": None}}


def test_available_now_before_spark_4_2_is_one_micro_batch_of_what_a_scan_found(settled, monkeypatch):
    monkeypatch.setattr(queue_source, "ADMISSION_CONTROL", False)
    monkeypatch.setattr(queue_source, "pending_by_bucket", lambda conn, config: {0: 30, 2: 7, 3: 0})
    reader = _reader(_read(available_now=True, max_bytes_per_trigger=100), {"0": "a"})
    offset = reader.latestOffset()
    # every bucket the scan found, each whole as counted then, no byte limits: Spark runs this batch only
    assert offset == {"batch": 1, "marks": {"0": "a", "2": ""}, "limits": {"0": 30, "2": 7}}
    # should Spark ask again (the option given to a processing-time query), the reader plans as usual
    reader.partitions(reader.initialOffset(), offset)
    reader.planner.marks_now = {"1": "b"}
    assert reader.latestOffset() == {"batch": 2, "marks": {"1": "b"}, "limits": {"1": None},
                                     "byte_limits": {"1": 100}}


def test_available_now_on_spark_4_2_is_spark_s_to_ask(settled, monkeypatch):
    monkeypatch.setattr(queue_source, "ADMISSION_CONTROL", True)
    reader = _reader(_read(available_now=True), {"0": "a"})
    assert reader._one_batch is False
    assert reader.latestOffset({"batch": 0, "marks": {}, "limits": {}}, compat.ReadAllAvailable())["marks"] == {
        "0": "a"}


def test_the_available_now_option_is_an_option_of_the_queue_sources():
    EXPORT_QUEUE.check(["available_now"])
    read = queue_source.QueueRead.parse({"source.host": "h", "source.port": "1", "queue.table": "q", "queue.id": "x",
                                         "queue.buckets": "4", "available_now": "true"}, EXPORT_QUEUE)
    assert read.available_now is True


def test_rows_become_arrow_batches_of_the_sink_s_schema():
    schema = pa.schema([("key", pa.binary()), ("seq", pa.int64()), ("error", pa.string())])
    rows = [Row(key=bytearray(b"k%d" % i), seq=i, error=None if i % 2 else "bad") for i in range(5)]
    batches = list(rows_to_batches(iter(rows), schema, size=2))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert all(b.schema.equals(schema) for b in batches)
    assert pa.Table.from_batches(batches).to_pylist()[1] == {"key": b"k1", "seq": 1, "error": None}
    assert list(rows_to_batches(iter([]), schema)) == []


def test_only_an_input_error_in_a_spark_python_process_drops_its_traceback(monkeypatch):
    """Issue 39 item 5, the rule of ``planner_errors``; the real planner's one line is
    ``tests/test_spark_read.py::test_a_misspelt_option_is_one_line_naming_it``."""
    from connector.spark.planner_errors import input_errors_in_one_line

    @input_errors_in_one_line
    class Source:
        def __init__(self, error: Exception) -> None:
            raise error

    for name in ("SPARK_HIDE_TRACEBACK", "PYTHON_WORKER_FACTORY_SECRET"):  # put back as they were, afterwards
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    with pytest.raises(OptionError):
        Source(OptionError("option 'x': bad"))
    assert "SPARK_HIDE_TRACEBACK" not in os.environ  # a driver (tests, the CLI) keeps every traceback
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "s")
    with pytest.raises(RuntimeError):
        Source(RuntimeError("a bug"))
    assert "SPARK_HIDE_TRACEBACK" not in os.environ  # not the user's input: its frames say where
    with pytest.raises(OptionError):
        Source(OptionError("option 'x': bad"))
    assert os.environ["SPARK_HIDE_TRACEBACK"] == "1"
