"""The combine job with Spark and the ``combine`` CLI, end to end on real clusters: documents change on A,
word-count deltas are combined, changed counts are exported and drained into B's count -> words index."""

from __future__ import annotations

import json
import threading

import pytest

from connector.combine import CombineConfig, CombineQueue, combine_status
from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status
from connector.spark import DrainJob, run_batch
from connector.spark.combine_job import CombineError, CombineJob, run_combine, run_stream
from examples.inverted_count_index import actual_index
from examples.word_count import DocumentProducer, expected_index, recount
from tests.conftest import run_cli, unique_table

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

OBSERVER = "examples.word_count:index_observer"


@pytest.fixture
def wc(accumulo):
    conn_a, conn_b = accumulo["a"].connect(), accumulo["b"].connect()
    combine = CombineConfig(table=unique_table("wc"), cid="wc", num_buckets=9, buckets_per_tablet=3)
    export = QueueConfig(table=unique_table("ex"), qid="widx", num_buckets=5)
    CombineQueue(conn_a, combine).init()
    ExportQueue(conn_a, export).init()
    docs = unique_table("docs")
    conn_a.create_table(docs)
    yield conn_a, conn_b, combine, export, docs
    conn_a.close()
    conn_b.close()


def produce(accumulo, combine, docs, changes: int, producers: int = 2) -> int:
    vocabulary = [f"w{i:04d}" for i in range(300)]
    doc_ids = [f"d{i:04d}" for i in range(60)]
    ps = [DocumentProducer(accumulo["a"].connect(), docs, combine, doc_ids[i::producers], vocabulary, i)
          for i in range(producers)]
    threads = [threading.Thread(target=p.run, args=(changes // producers,)) for p in ps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in ps:
        p.conn.close()
    return sum(p.updates for p in ps)


def verify(conn_a, conn_b, combine, export, docs, index) -> None:
    truth = recount(conn_a, docs)
    assert CombineQueue(conn_a, combine).items() == {w: n for w, n in truth.items() if n}
    assert combine_status(conn_a, combine).empty
    assert sorted(actual_index(conn_b, index)) == sorted(expected_index(truth))
    assert queue_status(conn_a, export).empty


def test_spark_streaming_combine_while_producing_then_batch(spark, accumulo, wc):
    conn_a, conn_b, combine, export, docs = wc
    job = CombineJob(source=accumulo["a"].gateway_options(), combine=combine, observer=OBSERVER,
                     export_queue=export)
    stop = threading.Event()
    reports = []
    streamer = threading.Thread(target=lambda: reports.append(run_stream(spark, job, 0.5, stop)))
    streamer.start()
    updates = produce(accumulo, combine, docs, 800)
    stop.set()
    streamer.join()
    final = run_combine(spark, job)
    assert reports[0].totals.updates + final.totals.updates == updates
    assert final.remaining == 0 and final.totals.failed == 0
    index = unique_table("index")
    run_batch(spark, DrainJob(source=accumulo["a"].gateway_options(), dest=accumulo["b"].gateway_options(),
                              queue=export, dest_table=index, settings=DrainSettings(create_dest_table=True)))
    verify(conn_a, conn_b, combine, export, docs, index)


def test_spark_combine_reports_a_failing_key_and_finishes_the_others(spark, accumulo, wc):
    conn_a, _, combine, export, _ = wc
    with CombineQueue(conn_a, combine) as q:
        q.update_all([("good", 1), ("bad", 2), ("fine", 3)])
    job = CombineJob(source=accumulo["a"].gateway_options(), combine=combine,
                     combiner="tests.test_combine:failing_combiner", observer=OBSERVER, export_queue=export)
    report = run_combine(spark, job)
    assert report.totals.failed >= 1 and report.remaining == 1
    assert any("key 'bad'" in e and "refusing to combine" in e for e in report.totals.errors)
    assert CombineQueue(conn_a, combine).items() == {"good": 1, "fine": 3}


def test_spark_combine_preflight_names_the_problem(spark, accumulo, wc):
    _, _, combine, export, _ = wc
    job = CombineJob(source=accumulo["a"].gateway_options(), combine=combine, observer="no_such_module:f",
                     export_queue=export)
    with pytest.raises(CombineError, match="cannot import 'no_such_module'"):
        run_combine(spark, job)


def test_cli_combine_init_update_status_run_then_drain(accumulo, cli_env, conn_a, conn_b):
    table, etable, index = unique_table("wc"), unique_table("ex"), unique_table("index")
    base = ["--cluster", "A", "--table", table, "--queue", "wc"]
    out = run_cli(cli_env, "combine", "init", *base, "--buckets", "5")
    assert out.returncode == 0, out.stderr
    assert run_cli(cli_env, "queue", "init", "--cluster", "A", "--table", etable, "--queue", "idx",
                   "--buckets", "3").returncode == 0
    lines = "\n".join(json.dumps({"key": w, "delta": d}) for w, d in
                      [("a", 1), ("b", 2), ("a", 2), ("c", 5), ("c", -5), ("b", 1)])
    out = run_cli(cli_env, "combine", "update", *base, stdin=lines)
    assert out.returncode == 0 and "queued 6 updates" in out.stdout, out.stderr
    bad = run_cli(cli_env, "combine", "update", *base, stdin='{"key": "a", "delta": 1}\n{"key": "a"}\n')
    assert bad.returncode == 2 and "stdin line 2" in bad.stderr and "nothing was queued" in bad.stderr
    out = run_cli(cli_env, "combine", "status", *base, "--json")
    assert json.loads(out.stdout)["updates"] == 6 and json.loads(out.stdout)["keys"] == 3
    out = run_cli(cli_env, "combine", "run", *base, "--observer", OBSERVER, "--export-table", etable,
                  "--export-queue", "idx")
    assert out.returncode == 0, out.stderr
    assert "starting Spark" not in out.stderr  # 6 updates: the default engine combines them in-process
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["updates"] == 6 and summary["remaining"] == 0 and summary["exports"] == 2
    config = CombineConfig(table=table, cid="wc", num_buckets=5)
    assert CombineQueue(conn_a, config).items() == {"a": 3, "b": 3}
    out = run_cli(cli_env, "drain", "--source", "A", "--dest", "B", "--table", etable, "--queue", "idx",
                  "--dest-table", index, "--create-dest-table", "--translator", "difference")
    assert out.returncode == 0, out.stderr
    assert sorted(actual_index(conn_b, index)) == [(b"00000003", b"a"), (b"00000003", b"b")]
    wrong = run_cli(cli_env, "combine", "run", *base, "--buckets", "7")
    assert wrong.returncode == 2 and "initialised with 5" in wrong.stderr
    mixed = run_cli(cli_env, "combine", "run", *base, "--engine", "local", "--master", "local[2]")
    assert mixed.returncode == 2 and "--master applies to Spark, not to --engine local" in mixed.stderr
