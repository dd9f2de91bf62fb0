"""Issue 30 item 4: the connector used from a Spark Connect client.

A Spark Connect server (``SparkConnectServer``, ``local[2]``) runs in a process of its own, started here
(:mod:`integration.spark_connect`); its Python workers run this venv's Python with the connector on their path
("the package on the server"). This process holds only a ``sc://`` session: no JVM, no ``sparkContext``. Over
it: the ``accumulo`` read source, the ``accumulo-export`` sink, the ``export-queue`` source (batch, and a
stream into the sink: a drain), the batch drain (``run_batch``: rounds of ``mapInArrow`` jobs) and the
streaming drain (``start_stream``: the ``export-queue-drain`` source with its ``foreachBatch`` reporter, which
Spark Connect pickles to the server), each checked against what the clusters hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator

import pytest

from connector.accumulo import Mutation, Range
from connector.jobs import DrainReport
from connector.queue import queue_status
from connector.spark import DrainError, compat, register, run_batch, spark_session, start_stream
from connector.spark.drain_job import StreamCounters, collect_stream_reports, default_parallelism, stop_stream
from connector.spark.session import is_connect
from integration.spark_connect import CLIENT_ENV
from tests.conftest import Scenario, drain_args, run_cli, unique_table

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]

@contextlib.contextmanager
def _connect_env_restored() -> Iterator[None]:
    """Restore, on exit, what a Spark Connect client's session sets in this process's environment (so that a
    classic session later in the same process is classic again)."""
    saved = {key: os.environ.get(key) for key in CLIENT_ENV}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def connect_server():
    from integration.spark_connect import connect_server as start

    started = time.monotonic()
    with start("local[2]") as server:
        print(f"Spark Connect server up in {time.monotonic() - started:.1f} s at {server.url}")
        yield server


@pytest.fixture(scope="module")
def remote(connect_server):
    """A Spark Connect client's session on the test's server, with the data sources registered."""
    from pyspark.sql import SparkSession

    with _connect_env_restored():
        session = register(SparkSession.builder.remote(connect_server.url).getOrCreate())
        yield session
        session.stop()


@pytest.fixture
def scenario(accumulo):
    s = Scenario(accumulo, buckets=7)
    yield s
    s.close()


def test_the_session_is_a_connect_client_s(remote, connect_server):
    assert is_connect(remote)
    assert spark_session(connect_server.url) is remote  # sc:// names a Connect server: the same client session
    with pytest.raises(Exception, match="sparkContext|JVM_ATTRIBUTE_NOT_SUPPORTED|NOT_IMPLEMENTED"):
        remote.sparkContext  # noqa: B018 - what the connector must not touch over Connect
    assert default_parallelism(remote) == 2  # local[2], found without a SparkContext


# --- the accumulo read source ------------------------------------------------------------------------------

def test_read_source_returns_the_table_s_cells(remote, accumulo):
    from pyspark.sql import functions as F  # noqa: N812

    conn = accumulo["a"].connect()
    table = unique_table("cread")
    try:
        conn.create_table(table, versioning=False)
        conn.add_splits(table, [b"g", b"p"])
        with conn.batch_writer(table) as writer:
            for i, row in enumerate([b"a", b"g", b"ga", b"m", b"p", b"z\xff"]):
                writer.add_mutation(Mutation(row).put("f1", "q", bytes([i, 0xFE]), timestamp=10 + i)
                                    .put("f2", "q", f"v{i}", timestamp=3))
        opts = {**accumulo["a"].gateway_options().to_options(""), "table": table}
        df = remote.read.format("accumulo").options(**opts).load()
        assert df.schema.simpleString() == "struct<row:binary,cf:binary,cq:binary,cv:binary,ts:bigint,value:binary>"
        expected = sorted(tuple(c) for c in conn.scan(table))
        assert len(expected) == 12 and _cells(df) == expected
        ranged = remote.read.format("accumulo").options(**opts, start_row="g", end_row="m", columns="f1").load()
        assert _cells(ranged) == sorted(tuple(c) for c in conn.scan(table, range=Range.rows("g", "m"),
                                                                      columns=[b"f1"]))
        # a session setting of the client reaches the server: Spark's filters narrow the scan (where this Spark
        # keeps a pushdown to its scan; elsewhere the option is refused, and the refusal reaches the client)
        remote.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        try:
            where = (F.col("row") >= F.lit(bytearray(b"g"))) & (F.col("cf") == F.lit(bytearray(b"f2")))
            if compat.FILTER_PUSHDOWN:
                pushed = remote.read.format("accumulo").options(**opts, pushdown="true").load().filter(where)
                assert _cells(pushed) == [c for c in expected if c[0] >= b"g" and c[1] == b"f2"]
            else:
                with pytest.raises(Exception, match="option 'pushdown'.*needs Spark 5.0.*narrow the read with"):
                    remote.read.format("accumulo").options(**opts, pushdown="true").load().filter(where).collect()
        finally:
            remote.conf.unset("spark.sql.python.filterPushdown.enabled")
        # an error of ours reaches the client with its message
        with pytest.raises(Exception, match="option 'table': no table 'no_such_table_30'"):
            remote.read.format("accumulo").options(**{**opts, "table": "no_such_table_30"}).load().collect()
    finally:
        conn.delete_table(table, missing_ok=True)
        conn.close()


def _cells(df) -> list[tuple]:
    return sorted((bytes(r.row), bytes(r.cf), bytes(r.cq), bytes(r.cv), r.ts, bytes(r.value)) for r in df.collect())


# --- the accumulo-export sink ------------------------------------------------------------------------------

def test_sink_writes_a_dataframe_of_cells(remote, accumulo):
    table = unique_table("cwrite")
    rows = [("r1", "f", "q", "old", 1), ("r1", "f", "q", "new", 3), ("r2", "f", "q", "gone", 1),
            ("r2", "f", "q", None, 2), ("r3", "g", "h", "x", 5)]
    df = remote.createDataFrame(rows, "row string, cf string, cq string, value string, seq long").repartition(2)
    opts = {**accumulo["b"].gateway_options().to_options("dest."), "table": table, "translator": "cells",
            "create_dest_table": "true"}
    df.write.format("accumulo-export").mode("append").options(**opts).save()
    with accumulo["b"].connect() as conn:
        got = [(c.row, c.cf, c.cq, c.ts, c.value) for c in conn.scan(table)]
        conn.delete_table(table, missing_ok=True)
    assert got == [(b"r1", b"f", b"q", 3, b"new"), (b"r3", b"g", b"h", 5, b"x")]
    with pytest.raises(Exception, match="save mode 'append' only"):
        df.write.format("accumulo-export").mode("overwrite").options(**opts).save()


# --- the export-queue source: read, and streamed into the sink (a drain) -----------------------------------

def test_queue_source_reads_entries_and_streams_into_the_sink(remote, scenario, tmp_path):
    queued = scenario.produce(400, seed=3)
    job = scenario.job()
    entries = remote.read.format("export-queue").options(**job.source_options()).load()
    rows = entries.select("key", "seq", "bucket", "error").collect()
    assert len(rows) == queued == scenario.depth()
    assert all(r.error is None for r in rows) and len({(bytes(r.key), r.seq) for r in rows}) == queued
    assert {r.bucket for r in rows} <= set(range(scenario.queue.num_buckets))

    report_dir, checkpoint = str(tmp_path / "reports"), str(tmp_path / "ckpt")
    stream = (remote.readStream.format("export-queue").options(**job.source_options())
              .option("max_entries_per_trigger", "150").load())
    query = (stream.writeStream.format("accumulo-export").options(**job.export_options(report_dir))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    assert query.awaitTermination(240)
    assert query.exception() is None
    scenario.verify()  # B's index is exactly what A's counts imply; the queue is empty
    reports = [json.loads((tmp_path / "reports" / name).read_text()) for name in os.listdir(report_dir)]
    assert sum(r["exported"] for r in reports) == queued and len(reports) >= 2  # the read limit split it


# --- the drain: batch rounds and the streaming drain -------------------------------------------------------

def test_batch_drain(remote, scenario):
    queued = scenario.produce(600, seed=5)
    report = run_batch(remote, scenario.job(buffer_bytes=4096))
    assert report.exported == queued and report.deleted == queued and report.dead_lettered == 0
    scenario.verify()


def test_cli_drain_on_a_connect_server(connect_server, scenario, cli_env):
    queued = scenario.produce(300, seed=23)
    env = {key: value for key, value in cli_env.items() if key not in CLIENT_ENV}  # a process of its own
    out = run_cli(env, *drain_args(scenario), "--master", connect_server.url)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"starting Spark ({connect_server.url})" in out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["exported"] == queued and summary["remaining"] == 0
    scenario.verify()


def test_batch_drain_task_error_is_one_line(remote, scenario):
    scenario.produce(100, seed=7)
    poison = {"old": [], "new": [{"row": "x"}]}  # a cell without cf and cq: the difference translator rejects it
    with scenario.conn_a.batch_writer(scenario.queue.table) as w:
        w.add_mutation(Mutation(scenario.queue.layout.entry_row(b'"poison"', 1))
                       .put("e", "v", json.dumps(poison).encode()))
    with pytest.raises(DrainError) as info:
        run_batch(remote, scenario.job(fail_fast=True, buffer_bytes=1 << 30))
    message = str(info.value)
    assert "\n" not in message and "'poison'" in message and "lacks cf, cq" in message
    assert queue_status(scenario.conn_a, scenario.queue).bucket(scenario.queue.layout.bucket_of(b'"poison"')).entries


def test_streaming_drain_available_now_then_continuous(remote, scenario, tmp_path):
    report_dir, checkpoint = str(tmp_path / "reports"), str(tmp_path / "ckpt")
    queued = scenario.produce(400, seed=11)
    query = start_stream(remote, scenario.job(max_entries_per_trigger=150), checkpoint, report_dir,
                         available_now=True)
    assert query.awaitTermination(240)
    assert query.exception() is None
    report = DrainReport()
    collect_stream_reports(report_dir, report)  # written by the foreachBatch reporter on the server
    assert report.exported == queued and report.rounds >= 2
    assert scenario.depth() == 0

    # the same checkpoint, at a trigger interval, while producers add; with live progress rows
    job = scenario.job(trigger_seconds=0.5)
    query = start_stream(remote, job, checkpoint, report_dir, progress_id="connect30")
    counters = StreamCounters(job, report_dir, "connect30")
    report = DrainReport()
    try:
        producer = threading.Thread(target=scenario.produce, args=(600, 2, 300, 13))
        producer.start()
        producer.join()
        deadline = time.monotonic() + 180
        while scenario.depth() and time.monotonic() < deadline:
            assert query.exception() is None
            counters.collect(scenario.conn_a, report)
            time.sleep(1)
    finally:
        stop_stream(query)
    counters.collect(scenario.conn_a, report)
    counters.close(scenario.conn_a)
    assert query.exception() is None
    assert report.exported >= 600 and report.live.exported == 0
    scenario.verify()


# --- the package shipped as an artifact, not installed on the server ---------------------------------------

def test_package_shipped_as_an_archive_artifact(accumulo, scenario, tmp_path):
    """A server whose Python workers find no usable connector (a stand-in on their path refuses to load): the
    client ships its own copy with ``ship_connector``, and the read source, the sink, the queue source's batch
    reads and the batch drain run from it (tasks, the data sources' planners). Streams do not: Spark 4.3 runs
    a stream's Python (a streaming source, foreachBatch) in server processes that load no artifact, so the
    streaming drain is refused in one line that names the alternatives."""
    from pyspark.sql import SparkSession

    from connector.spark import ship_connector
    from integration.spark_connect import connect_server

    stand_in = tmp_path / "server-path" / "connector"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text('raise ImportError("the server\'s own connector was loaded")\n')
    with _connect_env_restored(), connect_server("local[2]", pythonpath=str(stand_in.parent)) as server:
        session = SparkSession.builder.remote(server.url).create()
        try:
            ship_connector(session, str(tmp_path))  # and registers the data sources from the shipped copy

            def where(batches):  # pickled by value: nothing of the tests is on the server
                import pyarrow as pa

                import connector

                for _ in batches:
                    yield pa.record_batch([pa.array([connector.__file__])], names=["file"])

            loaded = session.range(1, numPartitions=1).mapInArrow(where, "file string").first().file
            assert loaded.endswith("/connector/__init__.py") and str(stand_in) not in loaded

            queued = scenario.produce(300, seed=17)
            job = scenario.job()
            assert session.read.format("export-queue").options(**job.source_options()).load().count() == queued
            report = run_batch(session, job)
            assert report.exported == queued
            scenario.verify()

            # a stream's Python (sources, foreachBatch) runs in server processes that load no artifact: the
            # streaming drain is refused in one line naming the alternatives, a stream of the queue source fails
            # at its start, and the batch drain finishes the job
            more = scenario.produce(300, seed=19)
            with pytest.raises(DrainError, match="installed on the server") as info:
                start_stream(session, job, str(tmp_path / "ckpt"), str(tmp_path / "reports"), available_now=True)
            assert "\n" not in str(info.value) and "run_batch" in str(info.value)
            query = (session.readStream.format("export-queue").options(**job.source_options()).load()
                     .writeStream.format("accumulo-export").options(**job.export_options(""))
                     .option("checkpointLocation", str(tmp_path / "ckpt2")).trigger(availableNow=True).start())
            with pytest.raises(Exception, match="(?s)python_streaming_source_runner.*ImportError"):
                query.awaitTermination(240)
            assert scenario.depth() == more
            assert run_batch(session, job).exported == more
            scenario.verify()

            index = session.read.format("accumulo").options(
                **accumulo["b"].gateway_options().to_options(""), table=scenario.index).load()
            copy = unique_table("copy")
            (index.selectExpr("cast(row as string) as row", "cast(cf as string) as cf", "cast(cq as string) as cq",
                              "value", "ts as seq").write.format("accumulo-export").mode("append")
             .options(**accumulo["b"].gateway_options().to_options("dest."), table=copy, translator="cells",
                      create_dest_table="true").save())
            with accumulo["b"].connect() as conn:
                assert list(conn.scan(copy)) == list(conn.scan(scenario.index))
                conn.delete_table(copy, missing_ok=True)
        finally:
            session.stop()
