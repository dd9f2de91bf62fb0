"""Bad input never blocks a drain or half-applies (issue 7, findings 1-5), on the real clusters.

Each test here failed before its fix: a poison entry blocked its bucket group, ``queue add`` wrote the lines
before a bad one, a wrong ``--buckets`` read an empty queue, an unset ``secret_env`` fell back to another
secret, and drain options were checked inside Spark as long traces.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from connector.accumulo import Mutation
from connector.export import AccumuloExporter, BatchTranslationError, SequencedExport
from connector.queue import (
    DrainSettings,
    EntryTranslationError,
    ExportQueue,
    QueueConfig,
    QueueConfigError,
    queue_status,
)
from connector.queue.drain import EntryProcessor
from connector.queue.reader import read_bucket
from connector.queue.stored_config import read_stored_config
from connector.spark import run_batch

from .conftest import drain_args, run_cli, unique_table

POISON = {"old": [], "new": [{"row": "x"}]}  # a cell without cf and cq: the difference translator rejects it


def _one_line_error(out, status: int = 2) -> str:
    """The CLI's stderr must be exactly one ``accumulo-export: error: ...`` line (after any progress lines), and
    the exit status ``status`` (2: a usage or input error; 5: a run that failed, a task say)."""
    progress = ("drained ", "starting Spark", "waiting for the first round")
    lines = [line for line in out.stderr.strip().splitlines() if not line.startswith(progress)]
    assert out.returncode == status, (out.returncode, out.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("accumulo-export: error: "), out.stderr[-2000:]
    return lines[0]


def _dead_letters(conn, config: QueueConfig) -> dict[bytes, bytes]:
    """original entry row -> reason"""
    layout = config.layout
    return {layout.original_row(c.row): c.value for c in conn.scan(config.table, layout.dead_letter_range())
            if c.cq == b"reason"}


# --- 1. a rejected entry is dead-lettered, the rest of its batch drains ----------------------------------

def test_exporter_names_every_untranslatable_export_and_writes_nothing(conn_b):
    table = unique_table("bt")
    exporter = AccumuloExporter(conn_b, table, "difference").ensure_table()
    good = SequencedExport("g", {"new": [{"row": "r", "cf": "f", "cq": "q", "value": "1"}]}, 5)
    with pytest.raises(BatchTranslationError) as info:
        exporter.export([SequencedExport("p", POISON, 1), good, SequencedExport("n", 1, 2)])
    assert sorted(info.value.failures) == [0, 2]
    assert "new[0]: cell {'row': 'x'} lacks cf, cq" in info.value.failures[0]
    assert list(conn_b.scan(table)) == []
    exporter.close()


@pytest.mark.parametrize("poison", [POISON, 1], ids=["cell-without-columns", "not-a-difference"])
def test_untranslatable_entry_is_dead_lettered_and_its_batch_drains(conn_a, conn_b, poison):
    config = QueueConfig(table=unique_table("poison"), qid="p", num_buckets=1)  # everything in one batch
    with ExportQueue(conn_a, config) as q:
        q.init()
        q.add_all([(f"k{i}", {"new": [{"row": f"r{i}", "cf": "f", "cq": "q", "value": str(i)}]}, 10 + i)
                   for i in range(50)])
        q.add("poison", poison, 1)
    dest = unique_table("poisondest")
    exporter = AccumuloExporter(conn_b, dest, "difference").ensure_table()
    settings = DrainSettings(buffer_bytes=1 << 30)
    stats = EntryProcessor(conn_a, config, exporter, settings).process(read_bucket(conn_a, config, 0))
    exporter.close()
    assert (stats.exported, stats.dead_lettered, stats.deleted, stats.batches) == (50, 1, 51, 1)
    assert len(list(conn_b.scan(dest))) == 50
    assert queue_status(conn_a, config).entries == 0
    (row, reason), = _dead_letters(conn_a, config).items()
    assert row == config.layout.entry_row(b'"poison"', 1)
    assert reason.startswith(b"untranslatable: ")


def test_fail_fast_stops_at_the_untranslatable_entry_and_deletes_nothing_of_its_batch(conn_a, conn_b):
    config = QueueConfig(table=unique_table("ff"), qid="p", num_buckets=1)
    with ExportQueue(conn_a, config) as q:
        q.init()
        q.add_all([(f"k{i}", {"new": [{"row": f"r{i}", "cf": "f", "cq": "q", "value": "v"}]}, 10 + i)
                   for i in range(20)])
        q.add("poison", POISON, 1)
    exporter = AccumuloExporter(conn_b, unique_table("ffdest"), "difference").ensure_table()
    with pytest.raises(EntryTranslationError) as info:
        EntryProcessor(conn_a, config, exporter, DrainSettings(fail_fast=True, buffer_bytes=1 << 30)).process(
            read_bucket(conn_a, config, 0))
    exporter.close()
    assert (info.value.key, info.value.seq) == ("poison", 1)
    assert "'poison'" in str(info.value) and "seq 1" in str(info.value) and "lacks cf, cq" in str(info.value)
    assert queue_status(conn_a, config).entries == 21 and not _dead_letters(conn_a, config)


def test_spark_drain_with_a_poison_entry_exports_the_rest_and_fail_fast_is_one_line(spark, scenario, cli_env):
    scenario.produce(600, seed=31)
    poison_row = scenario.queue.layout.entry_row(b'"poison"', 1)
    with scenario.conn_a.batch_writer(scenario.queue.table) as w:
        w.add_mutation(Mutation(poison_row).put("e", "v", json.dumps(POISON).encode()))

    out = run_cli(cli_env, *drain_args(scenario), "--fail-fast", "--buffer-bytes", str(1 << 30), "--engine", "spark")
    line = _one_line_error(out, 5)  # the task's error, out of Spark's trace: the run failed, not the command
    assert "'poison'" in line and "seq 1" in line and "lacks cf, cq" in line
    # one batch per bucket group: the poison's group kept every entry of that batch (other groups drained)
    left = queue_status(scenario.conn_a, scenario.queue)
    assert left.bucket(scenario.queue.layout.bucket_of(b'"poison"')).entries > 1

    report = run_batch(spark, scenario.job())
    assert report.dead_lettered == 1 and report.exported == left.entries - 1
    assert list(_dead_letters(scenario.conn_a, scenario.queue)) == [poison_row]
    scenario.verify()


# --- 2. queue add is all or nothing ----------------------------------------------------------------------

@pytest.mark.parametrize("last_line", [b'{"key": "bad", "value": NaN, "seq": 1}',
                                       b'{"key": "\xff\xfe", "value": 1, "seq": 1}'], ids=["nan", "not-utf8"])
def test_queue_add_checks_every_line_before_writing_any(accumulo, cli_env, last_line):
    q = ["--cluster", "A", "--table", unique_table("addq"), "--queue", "jobs"]
    assert run_cli(cli_env, "queue", "init", *q, "--buckets", "5").returncode == 0
    good = "\n".join(json.dumps({"key": f"k{i}", "value": {"n": i}, "seq": 100 + i}) for i in range(3000))
    out = run_cli(cli_env, "queue", "add", *q, stdin_bytes=good.encode() + b"\n" + last_line + b"\n")
    line = _one_line_error(out)
    assert "line 3001" in line and "nothing was added" in line
    status = run_cli(cli_env, "queue", "status", *q, "--json")
    assert json.loads(status.stdout)["entries"] == 0
    assert math.isnan(json.loads('{"v": NaN}')["v"])  # Python's json accepts NaN: the serializer must refuse it


# --- 3. the queue's configuration is stored and checked ---------------------------------------------------

def test_wrong_bucket_count_is_refused_and_the_stored_one_is_used(scenario, cli_env):
    config = QueueConfig(table=unique_table("cfgq"), qid="jobs", num_buckets=64)
    with ExportQueue(scenario.conn_a, config) as q:
        q.init()
        q.add_all([(f"k{i}", {"new": []}, i) for i in range(10)])
    stored = read_stored_config(scenario.conn_a, config.table, "jobs")
    assert stored is not None and stored["num_buckets"] == 64
    q = ["--cluster", "A", "--table", config.table, "--queue", "jobs"]
    for command in (["queue", "status", *q, "--buckets", "7"],
                    ["drain", "--source", "A", *q[2:], "--buckets", "7", "--dest", "B", "--dest-table", "x"]):
        line = _one_line_error(run_cli(cli_env, *command))
        assert "--buckets 7" in line and "initialised with 64" in line
    status = run_cli(cli_env, "queue", "status", *q, "--json")  # --buckets is read from the queue
    assert status.returncode == 0 and json.loads(status.stdout)["entries"] == 10

    splits = scenario.conn_a.list_splits(config.table)
    line = _one_line_error(run_cli(cli_env, "queue", "init", *q, "--buckets", "65536"))  # the most it may have
    assert "initialised with buckets 64, not 65536" in line
    assert scenario.conn_a.list_splits(config.table) == splits
    assert run_cli(cli_env, "queue", "init", *q, "--buckets", "64").returncode == 0  # same config: fine

    with pytest.raises(QueueConfigError, match="buckets 64, not 7"):  # a producer with the wrong count
        ExportQueue(scenario.conn_a, QueueConfig(table=config.table, qid="jobs", num_buckets=7)).add("k", 1, 1)


def test_buckets_given_for_a_queue_never_initialised_is_refused_naming_the_nearest(scenario, cli_env):
    """The new user's finding: following the hint "give the bucket count (--buckets)", ``drain ... --queue rwy
    --buckets 16`` and ``queue status ... --queue rwy --buckets 16`` exited 0 with 0 entries on a misspelt queue.
    A queue made by another program (entries, no stored configuration) is still read with the count given."""
    config = QueueConfig(table=unique_table("cfgq"), qid="rwx", num_buckets=16)
    ExportQueue(scenario.conn_a, config).init()
    q = ["--table", config.table, "--queue", "rwy", "--buckets", "16"]
    for command in (["queue", "status", "--cluster", "A", *q],
                    ["drain", "--source", "A", *q, "--dest", "B", "--dest-table", scenario.index]):
        line = _one_line_error(run_cli(cli_env, *command))
        assert "queue 'rwy'" in line and "was never initialised" in line and "did you mean queue 'rwx'" in line, line
    from connector.queue.stored_config import resolve_config

    foreign = QueueConfig(table=config.table, qid="fluo", num_buckets=4)
    scenario.conn_a.write(config.table, [Mutation(foreign.layout.entry_row(b'"k"', 7)).put(b"e", b"v", b"{}")])
    assert resolve_config(scenario.conn_a, config.table, "fluo", num_buckets=4) == foreign
    with pytest.raises(QueueConfigError, match="queue 'rwy' in table .* was never initialised"):
        resolve_config(scenario.conn_a, config.table, "rwy", num_buckets=16)


# --- 4. a named secret source that is missing is an error ------------------------------------------------

def test_unset_secret_env_does_not_fall_back_to_another_secret(accumulo, cli_env, tmp_path):
    config = tmp_path / "e.toml"
    config.write_text(f'[clusters.E]\nhost = "127.0.0.1"\nport = {accumulo["a"].gateway_port}\n'
                      'secret_env = "NOPE_SECRET"\n')
    env = dict(cli_env, ACCUMULO_EXPORT_CONFIG=str(config), ACCUMULO_GATEWAY_SECRET_FILE=accumulo["a"].secret_file)
    env.pop("NOPE_SECRET", None)
    line = _one_line_error(run_cli(env, "queue", "status", "--cluster", "E", "--table", "t", "--queue", "q"))
    assert "cluster 'E'" in line and "NOPE_SECRET" in line and "not set" in line
    assert "shared_secret" not in line


# --- 5. drain options are checked before Spark starts, as one line ---------------------------------------

def test_bad_drain_options_are_one_line_errors_before_spark(scenario, cli_env, tmp_path):
    scenario.produce(50, seed=37)
    depth = scenario.depth()
    wrong = tmp_path / "wrong.secret"
    wrong.write_text("wrong")
    config = tmp_path / "wrong.toml"
    config.write_text(Path(cli_env["ACCUMULO_EXPORT_CONFIG"]).read_text()
                      + f'\n[clusters.W]\nhost = "127.0.0.1"\nport = {scenario.b.gateway_port}\n'
                        f'secret_file = "{wrong}"\n')
    env = dict(cli_env, ACCUMULO_EXPORT_CONFIG=str(config))
    base = drain_args(scenario)
    cases = {
        "unknown translator 'nope'": [*base, "--translator", "nope"],
        "--buffer-bytes: must be >= 1": [*base, "--buffer-bytes", "-1"],
        "--trigger-seconds: must be a number of seconds > 0": [*base, "--trigger-seconds", "-1"],
        "--max-entries-per-trigger: must be >= 1": [*base, "--max-entries-per-trigger", "-5"],
        "table 'no_such_queue_table' does not exist on the source cluster 'A'":
            [*(a if a != scenario.queue.table else "no_such_queue_table" for a in base)],
        "destination cluster 'W'": [*(a if a != "B" else "W" for a in base)],
    }
    for expected, args in cases.items():
        out = run_cli(env, *args)
        line = _one_line_error(out)
        assert expected in line, line
        assert "Spark" not in out.stderr and "Traceback" not in out.stderr
    assert "secret" in _one_line_error(run_cli(env, *(a if a != "B" else "W" for a in base))).lower()
    assert scenario.depth() == depth
