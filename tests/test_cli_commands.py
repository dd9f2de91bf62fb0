"""The commands as a user meets them: the combine queue's path to B, exit statuses, progress, status,
stopping on SIGTERM, errors and checks. Cluster tests run on the real embedded clusters."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import time

import pytest

from connector.accumulo import Mutation
from connector.combine import CombineConfig, CombineQueue, combine_all
from connector.export import SequencedExport, TranslationError, translator_from_name
from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status

from .conftest import ROOT, run_cli, unique_table


def _cli_popen(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "connector.cli", *args], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _summary(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _wait(condition, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.5)


# --- the combine queue reaches B through a built-in translator -----------------------------------

def test_value_translator_writes_each_keys_new_value():
    value = translator_from_name("value=count")
    (put,) = value(SequencedExport("apple", {"old": 1, "new": 4}, 9))
    assert (put.row, put.cf, put.cq, put.value) == (b"apple", b"count", b"", b"4")
    (gone,) = value(SequencedExport("pear", {"old": 2, "new": None}, 9))
    assert gone.is_delete and gone.row == b"pear"
    (plain,) = translator_from_name("value=c:q")(SequencedExport("k", "text", 1))
    assert (plain.cf, plain.cq, plain.value) == (b"c", b"q", b"text")
    (default,) = translator_from_name("value")(SequencedExport(7, [1, 2], 1))
    assert (default.row, default.cf, default.value) == (b"7", b"value", b"[1,2]")
    with pytest.raises(TranslationError, match="key must be text"):
        list(value(SequencedExport({"a": 1}, 1, 1)))
    with pytest.raises(ValueError, match="name the column family"):
        translator_from_name("value=")


@pytest.mark.cluster
def test_combine_changes_reach_b_through_the_cli_drain(accumulo, conn_a, conn_b, cli_env):
    changes = QueueConfig(table=unique_table("cx"), qid="wcx", num_buckets=4)
    ExportQueue(conn_a, changes).init()
    counts = CombineConfig(table=unique_table("wc"), cid="wc", num_buckets=4)
    dest = unique_table("wcounts")
    drain = ["drain", "--source", "A", "--dest", "B", "--table", changes.table, "--queue", "wcx",
             "--dest-table", dest, "--create-dest-table", "--translator", "value=count"]
    with CombineQueue(conn_a, counts) as q:
        q.init()
        q.update_all([("apple", 1), ("pear", 2), ("apple", 3), ("fig", 5)])
    combine_all(conn_a, counts, "sum", "changes", export_queue=changes)
    out = run_cli(cli_env, *drain)
    assert out.returncode == 0, out.stderr[-3000:]
    assert _summary(out.stdout)["dead_lettered"] == 0
    assert {(c.row, c.cf, c.value) for c in conn_b.scan(dest)} == {
        (b"apple", b"count", b"4"), (b"pear", b"count", b"2"), (b"fig", b"count", b"5")}
    with CombineQueue(conn_a, counts) as q:  # a count that falls to 0 deletes the key, and its cell on B
        q.update_all([("pear", -2), ("fig", 1)])
    combine_all(conn_a, counts, "sum", "changes", export_queue=changes)
    out = run_cli(cli_env, *drain)
    assert out.returncode == 0, out.stderr[-3000:]
    assert {(c.row, c.value) for c in conn_b.scan(dest)} == {(b"apple", b"4"), (b"fig", b"6")}


# --- dead letters make a distinct exit status ---------------------------------------------------

def _small_queue(conn, entries: int = 5, poison: int = 0) -> QueueConfig:
    config = QueueConfig(table=unique_table("q"), qid="dl", num_buckets=4)
    with ExportQueue(conn, config) as q:
        q.init()
        for i in range(entries):
            q.add(f"k{i}", {"new": [{"row": f"r{i}", "cf": "f", "cq": "q", "value": str(i)}]}, seq=10 + i)
    _add_poison(conn, config, poison)
    return config


def _add_poison(conn, config: QueueConfig, n: int) -> None:
    with conn.batch_writer(config.table) as w:
        for i in range(n):
            row = config.layout.entry_row(json.dumps(f"poison{i}").encode(), 3)
            w.add_mutation(Mutation(row).put("e", "v", b'{"new": [{"row": "x"}]}'))


def _drain_args(config: QueueConfig, dest: str, *more: str) -> list[str]:
    return ["drain", "--source", "A", "--dest", "B", "--table", config.table, "--queue", config.qid,
            "--dest-table", dest, "--create-dest-table", *more]


@pytest.mark.cluster
def test_drain_that_dead_letters_exits_3_unless_allowed(conn_a, cli_env):
    config = _small_queue(conn_a, entries=5, poison=2)
    dest = unique_table("d")
    out = run_cli(cli_env, *_drain_args(config, dest))
    assert out.returncode == 3, out.stderr[-3000:]
    assert _summary(out.stdout)["dead_lettered"] == 2 and _summary(out.stdout)["exported"] == 5
    assert "2 entries were dead-lettered" in out.stderr and "exit status 3" in out.stderr
    _add_poison(conn_a, config, 1)
    out = run_cli(cli_env, *_drain_args(config, dest, "--allow-dead-letters"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert _summary(out.stdout)["dead_lettered"] == 1
    assert "--allow-dead-letters" in run_cli(cli_env, "drain", "--help").stdout


# --- progress and summary tell the truth ---------------------------------------------------------

@pytest.mark.cluster
def test_last_progress_of_a_batch_drain_shows_what_is_left(accumulo, conn_a):
    from connector.spark import DrainJob, run_batch

    config = _small_queue(conn_a, entries=40)
    job = DrainJob(source=accumulo["a"].gateway_options(), dest=accumulo["b"].gateway_options(), queue=config,
                   dest_table=unique_table("d"), settings=DrainSettings(create_dest_table=True))
    depths: list[int] = []
    report = run_batch(None, job, lambda r: depths.append(r.queue_depth))
    assert report.exported == 40 and depths and depths[-1] == 0, depths


def test_progress_bar_keeps_the_count_whole_on_80_columns():
    from rich.console import Console

    from connector.cli.progress import DrainProgressView
    from connector.jobs import DrainReport
    from connector.queue import DrainStats

    buf = io.StringIO()
    view = DrainProgressView(Console(file=buf, width=80, force_terminal=True), stream=False)
    view(DrainReport(totals=DrainStats(entries=8000, exported=8000, deleted=8000), rounds=1))
    view.close()
    last = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", buf.getvalue()).split("\r")[-1]
    assert "8,000/8,000" in last, last


@pytest.mark.cluster
@pytest.mark.spark
def test_spark_drain_says_spark_is_starting_and_reports_the_whole_time(conn_a, cli_env):
    config = _small_queue(conn_a, entries=30)
    out = run_cli(cli_env, *_drain_args(config, unique_table("d"), "--engine", "spark"))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith("starting Spark"), lines
    assert not [line for line in lines if line.startswith("drained 0 entries")], lines
    summary = _summary(out.stdout)
    assert summary["exported"] == 30 and summary["total_seconds"] >= summary["seconds"] > 0


# --- queue status after a batch drain -----------------------------------------------------------

@pytest.mark.cluster
def test_batch_drain_clears_the_bucket_marks(accumulo, conn_a):
    from connector.spark import DrainJob, run_batch

    config = _small_queue(conn_a, entries=40)
    assert queue_status(conn_a, config).marked  # the producer marked the buckets it wrote to
    job = DrainJob(source=accumulo["a"].gateway_options(), dest=accumulo["b"].gateway_options(), queue=config,
                   dest_table=unique_table("d"), settings=DrainSettings(create_dest_table=True))
    run_batch(None, job)
    status = queue_status(conn_a, config)
    assert status.empty and status.marked == ()


# --- SIGTERM stops a stream as Ctrl-C does, with a summary ---------------------------------------

def _sigterm_stream(conn_a, env: dict, config: QueueConfig, *args: str) -> tuple[int, str, str]:
    proc = _cli_popen(env, *args)
    try:
        _wait(lambda: queue_status(conn_a, config).entries == 0)
        time.sleep(3)  # the stream has reported its progress at least once after the queue emptied
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stdout, stderr


@pytest.mark.cluster
def test_sigterm_stops_a_local_stream_with_its_summary(conn_a, cli_env):
    config = _small_queue(conn_a, entries=20)
    code, stdout, stderr = _sigterm_stream(conn_a, cli_env, config, *_drain_args(
        config, unique_table("d"), "--stream", "--engine", "local", "--trigger-seconds", "0.5"))
    assert code == 0, stderr[-3000:]
    assert "stopping after the running micro-batch" in stderr
    assert _summary(stdout)["exported"] == 20


@pytest.mark.cluster
@pytest.mark.spark
def test_sigterm_stops_a_spark_stream_with_its_summary(conn_a, cli_env):
    config = _small_queue(conn_a, entries=20)
    code, stdout, stderr = _sigterm_stream(conn_a, cli_env, config, *_drain_args(
        config, unique_table("d"), "--stream", "--trigger-seconds", "0.5"))
    assert code == 0, stderr[-3000:]
    assert "stopping after the running micro-batch" in stderr
    assert _summary(stdout)["exported"] == 20


@pytest.mark.cluster
@pytest.mark.spark
def test_sigterm_stops_a_combine_stream_with_its_summary(conn_a, cli_env):
    counts = CombineConfig(table=unique_table("wc"), cid="wc", num_buckets=4)
    with CombineQueue(conn_a, counts) as q:
        q.init()
        q.update_all([("a", 1), ("b", 2), ("a", 3)])
    proc = _cli_popen(cli_env, "combine", "run", "--cluster", "A", "--table", counts.table, "--queue", "wc",
                      "--stream", "--interval", "0.5")
    try:
        _wait(lambda: CombineQueue(conn_a, counts).status().updates == 0)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    assert _summary(stdout)["updates"] == 3


@pytest.mark.cluster
@pytest.mark.spark
def test_sigterm_while_spark_starts_ends_a_combine_stream_with_its_summary(conn_a, cli_env):
    counts = CombineConfig(table=unique_table("wc"), cid="wc", num_buckets=4)
    CombineQueue(conn_a, counts).init()
    proc = _cli_popen(cli_env, "combine", "run", "--cluster", "A", "--table", counts.table, "--queue", "wc",
                      "--stream")
    try:
        first = proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)  # systemd stopping a service that is still starting
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert first.startswith("starting Spark"), first + stderr[-3000:]
    assert proc.returncode == 0, stderr[-3000:]
    assert _summary(stdout)["rounds"] == 0


# --- queue init, add and status speak plainly ----------------------------------------------------

@pytest.mark.cluster
def test_queue_init_add_and_status_speak_plainly(conn_a, cli_env):
    q = ["--cluster", "A", "--table", unique_table("q"), "--queue", "pl"]
    init = run_cli(cli_env, "queue", "init", *q, "--buckets", "16", "--buckets-per-tablet", "4")
    assert init.returncode == 0, init.stderr
    assert "16 buckets, in 4 tablets of up to 4 buckets" in init.stdout, init.stdout
    lines = [json.dumps({"key": f"k{i % 3}", "value": {"new": []}, "seq": 1}) for i in range(5)]
    add = run_cli(cli_env, "queue", "add", *q, stdin="\n".join(lines))
    assert add.returncode == 0, add.stderr
    assert "added 5 lines to queue pl as 3 entries" in add.stdout, add.stdout
    status = run_cli(cli_env, "queue", "status", *q, "--json")
    st = json.loads(status.stdout)
    assert st["entries"] == 3 and st["lag_seconds"] >= 0
    assert all(b["lag_seconds"] >= 0 for b in st["buckets"].values())
    text = run_cli(cli_env, "queue", "status", *q).stdout
    assert "waiting" in text and "buckets marked as holding new entries" in text, text


# --- errors name the problem, the cluster and the table, and no Java -----------------------------

@pytest.mark.cluster
def test_bad_table_names_and_namespaces_are_refused_before_anything_runs(conn_a, cli_env):
    config = _small_queue(conn_a, entries=1)
    bad = run_cli(cli_env, *_drain_args(config, "bad-name!"))
    assert bad.returncode == 2
    assert "--dest-table 'bad-name!' is not a valid table name on the destination cluster 'B'" in bad.stderr
    assert "java" not in bad.stderr.lower() and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    init = run_cli(cli_env, "queue", "init", "--cluster", "A", "--table", "a-b", "--queue", "x", "--buckets", "2")
    assert init.returncode == 2 and "--table 'a-b' is not a valid table name on cluster 'A'" in init.stderr
    nons = run_cli(cli_env, *_drain_args(config, "nosuchns.t"))
    assert nons.returncode == 2 and "namespace 'nosuchns' does not exist on the destination cluster 'B'" in nons.stderr
    assert "java" not in nons.stderr.lower(), nons.stderr
    combine = run_cli(cli_env, "combine", "init", "--cluster", "A", "--table", "nosuchns.wc", "--queue", "c",
                      "--buckets", "2")
    assert combine.returncode == 2 and "namespace 'nosuchns' does not exist on cluster 'A'" in combine.stderr


@pytest.mark.cluster
def test_an_entry_too_large_names_the_limit_not_an_internal_setting(conn_a, cli_env):
    q = ["--cluster", "A", "--table", unique_table("q"), "--queue", "big"]
    assert run_cli(cli_env, "queue", "init", *q, "--buckets", "2").returncode == 0
    lines = json.dumps({"key": "small", "value": "x", "seq": 1}) + "\n" + json.dumps(
        {"key": "big", "value": "v" * (20 << 20), "seq": 2}) + "\n"
    out = run_cli(cli_env, "queue", "add", *q, stdin=lines)
    assert out.returncode == 2
    assert "stdin line 2" in out.stderr and "too large for one queue entry" in out.stderr
    assert "max_frame_bytes" in out.stderr and "max_mutation_bytes" not in out.stderr
    assert "nothing was added" in out.stderr
    assert json.loads(run_cli(cli_env, "queue", "status", *q, "--json").stdout)["entries"] == 0


# --- checks as strong as the guides say ---------------------------------------------------------

@pytest.mark.cluster
def test_add_checks_lines_against_the_stored_translator_and_drain_uses_it(conn_a, conn_b, cli_env):
    q = ["--cluster", "A", "--table", unique_table("q"), "--queue", "tr"]
    init = run_cli(cli_env, "queue", "init", *q, "--buckets", "4", "--translator", "difference")
    assert init.returncode == 0, init.stderr
    good = json.dumps({"key": "w", "value": {"new": [{"row": "w", "cf": "c", "cq": "", "value": "1"}]}, "seq": 5})
    bad = json.dumps({"key": "x", "value": {"new": [{"row": "r"}]}, "seq": 6})
    out = run_cli(cli_env, "queue", "add", *q, stdin=f"{good}\n{bad}\n")
    assert out.returncode == 2, out.stderr
    assert "stdin line 2" in out.stderr and "lacks cf, cq" in out.stderr and "nothing was added" in out.stderr
    assert run_cli(cli_env, "queue", "add", *q, stdin=good).returncode == 0
    other = run_cli(cli_env, "queue", "init", *q, "--translator", "cells")
    assert other.returncode == 2 and "initialised with translator 'difference'" in other.stderr
    dest = unique_table("d")
    drain = run_cli(cli_env, "drain", "--source", "A", "--dest", "B", *q[2:], "--dest-table", dest,
                    "--create-dest-table")
    assert drain.returncode == 0, drain.stderr[-3000:]
    assert [(c.row, c.value) for c in conn_b.scan(dest)] == [(b"w", b"1")]


@pytest.mark.cluster
def test_add_to_a_queue_never_initialised_is_refused(conn_a, cli_env):
    table = unique_table("q")
    conn_a.create_table(table)
    line = json.dumps({"key": "k", "value": {"new": []}, "seq": 1})
    out = run_cli(cli_env, "queue", "add", "--cluster", "A", "--table", table, "--queue", "raw", "--buckets", "4",
                  stdin=line)
    assert out.returncode == 2 and "was never initialised" in out.stderr and "queue init" in out.stderr
    assert not list(conn_a.scan(table))


# --- combine get ---------------------------------------------------------------------------------

@pytest.mark.cluster
def test_combine_get_prints_combined_values(conn_a, cli_env):
    counts = CombineConfig(table=unique_table("wc"), cid="wc", num_buckets=4)
    with CombineQueue(conn_a, counts) as q:
        q.init()
        q.update_all([("apple", 1), ("apple", 3), ("pear", 2)])
    combine_all(conn_a, counts, "sum")
    args = ["combine", "get", "--cluster", "A", "--table", counts.table, "--queue", "wc"]
    out = run_cli(cli_env, *args, "--key", "apple", "--key", "fig", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"apple": 4, "fig": None}
    text = run_cli(cli_env, *args, "--key", "pear")
    assert text.stdout == "pear\t2\n", text.stdout


# --- benchmark figures (docs/benchmarks.md) say under which conditions they were measured -----------

def test_benchmark_figures_state_their_conditions():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    section = page[page.index("## Figures"):]
    header = next(line for line in section.splitlines() if line.startswith("| benchmark |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert "conditions" in columns, header
    rows = [line for line in section.splitlines() if line.startswith("| `bench_")]
    assert len(rows) >= 8
    at = columns.index("conditions")
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert "idle" in cells[at], row
    assert '"Idle" means' in section and "warm caches" in section


@pytest.mark.cluster
def test_batch_drain_warns_when_another_drain_of_the_queue_is_running(conn_a, cli_env):
    config = _small_queue(conn_a, entries=5)
    with conn_a.batch_writer(config.table) as w:  # the live progress row of another drain's round
        w.add_mutation(Mutation(config.layout.progress_row("otherrun", 0)).put("p", "stats", b'{"exported": 3}'))
    out = run_cli(cli_env, *_drain_args(config, unique_table("d")))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "another drain of queue 'dl' is running" in out.stderr and "repeat work" in out.stderr
    assert _summary(out.stdout)["other_drains_seen"] == 1


# --- no implicit destination tables (issue 36, finding 10) ----------------------------------------

def _one_error_line(out) -> str:
    """The one error line on stderr (after the client's warnings about retried calls, if any)."""
    lines = [line for line in out.stderr.strip().splitlines() if not line.startswith(("starting Spark", "WARNING "))]
    assert len(lines) == 1 and lines[0].startswith("accumulo-export: error: "), out.stderr[-3000:]
    return lines[0]


@pytest.mark.cluster
def test_a_misspelt_destination_table_is_refused_naming_the_closest_and_nothing_is_drained(scenario, cli_env):
    """A misspelt --dest-table used to become a new table, the queue drained into it and its entries deleted
    (exit 0). A drain, a bootstrap and a registration now refuse it in one line naming the closest existing
    table (exit 2, the queue untouched); --create-dest-table creates it."""
    from examples.inverted_count_index import actual_index, expected_index

    from .conftest import drain_args

    scenario.produce(60, seed=71)
    depth = scenario.depth()
    typo = scenario.index.replace("index", "indx", 1)
    q = ["--table", scenario.queue.table, "--queue", scenario.queue.qid]
    drain = [typo if a == scenario.index else a for a in drain_args(scenario)]
    commands = {
        "drain": [*drain, "--engine", "local"],
        "bootstrap": ["bootstrap", "--source", "A", *q, "--producer-table", scenario.counts, "--dest", "B",
                      "--dest-table", typo, "--snapshot", "examples.inverted_count_index:snapshot"],
        "destinations add": ["queue", "destinations", "add", "--cluster", "A", *q, "--dest", "B",
                             "--dest-table", typo],
    }
    for name, command in commands.items():
        out = run_cli(cli_env, *command)
        assert out.returncode == 2, (name, out.returncode, out.stderr[-3000:])
        line = _one_error_line(out)
        assert f"destination table {typo!r} does not exist" in line and f"did you mean {scenario.index!r}" in line, \
            (name, line)
        assert "--create-dest-table" in line, line
        assert not scenario.conn_b.table_exists(typo), name
    assert scenario.depth() == depth, "the refused drain deleted entries"
    assert run_cli(cli_env, "queue", "destinations", "list", "--cluster", "A", *q).stdout.startswith("no destination")

    out = run_cli(cli_env, *commands["drain"], "--create-dest-table")
    assert out.returncode == 0, out.stderr[-3000:]
    assert scenario.depth() == 0
    assert set(actual_index(scenario.conn_b, typo)) == expected_index(scenario.conn_a, scenario.counts)
    registered = unique_table("registered")
    out = run_cli(cli_env, "queue", "destinations", "add", "--cluster", "A", *q, "--dest", "B", "--dest-table",
                  registered, "--create-dest-table")
    assert out.returncode == 0 and scenario.conn_b.table_exists(registered), out.stderr[-3000:]


# --- exit statuses: 2 is a usage error and nothing else --------------------------------------------

@pytest.mark.cluster
def test_a_cluster_that_does_not_answer_is_a_failed_run_not_a_usage_error(accumulo, tmp_path):
    """Every error of ours used to exit 2, the usage error's status: a cluster not answering now exits 5 (run
    it again later), a table that does not exist still 2 (fix the command)."""
    import os
    import socket

    from connector.accumulo.options import GatewayOptions
    from connector.clusters_config import CONFIG_ENV, write_clusters

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "clusters.toml"
    write_clusters(config, {"A": accumulo["a"].gateway_options(),
                            "down": GatewayOptions("127.0.0.1", port, secret_file=accumulo["a"].secret_file)})
    env = dict(os.environ, **{CONFIG_ENV: str(config), "PYSPARK_PYTHON": sys.executable})
    with accumulo["a"].connect() as conn:
        config = _small_queue(conn, entries=3)
    queue = ["--table", config.table, "--queue", config.qid]
    down = run_cli(env, "queue", "status", "--cluster", "down", *queue)
    assert down.returncode == 5, (down.returncode, down.stderr)
    assert "cluster 'down'" in _one_error_line(down)
    drain = run_cli(env, "drain", "--source", "A", "--dest", "down", *queue, "--dest-table", "x", "--engine", "local")
    assert drain.returncode == 5 and "destination cluster 'down'" in _one_error_line(drain), drain.stderr
    missing = run_cli(env, "queue", "status", "--cluster", "A", "--table", unique_table("nosuch"), "--queue", "q")
    assert missing.returncode == 2 and "does not exist" in _one_error_line(missing), missing.stderr


def test_tx_seq_prints_the_seq_a_commit_made_now_gets():
    """The timestamp for a write by hand to a destination (docs/operations.md: Writing to a destination by hand)."""
    import os

    from connector import current_seq

    before = current_seq()
    out = run_cli(dict(os.environ), "tx", "seq")
    assert out.returncode == 0, out.stderr
    assert before <= int(out.stdout) <= current_seq()
