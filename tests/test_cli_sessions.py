"""CLI sessions end to end: progress, quiet output, help, dead letters, the snippets of the README and the guides
that run as written,
and nothing left behind. On the real clusters."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connector.accumulo import Mutation
from connector.queue import queue_status

from .conftest import ROOT, drain_args, run_cli

pytestmark = pytest.mark.spark
SPARK_NOISE = re.compile(r"WARN|log4j|Using incubator|NativeCodeLoader|py4j|Traceback|SparkContext")


def _cli_popen(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "connector.cli", *args], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_drain_shows_live_progress_in_whole_lines_and_no_spark_noise(scenario, cli_env):
    scenario.produce(4000, seed=41)
    out = run_cli(cli_env, *drain_args(scenario), "--buffer-bytes", "2048", "--engine", "spark")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stderr.strip().splitlines()
    live = [line for line in lines if line.startswith("drained ")]
    assert live, out.stderr
    for line in live:  # whole, unwrapped lines with every counter
        assert re.fullmatch(r"drained [\d,]+ entries, [\d,]+/s lately \([\d,]+/s over the run\), queue depth [\d,]+, "
                            r"dead-lettered [\d,]+, "
                            r"rounds \d+", line), line
    assert not [line for line in lines if SPARK_NOISE.search(line)], out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["exported"] == 4000 and summary["rounds"] >= 1 and summary["remaining"] == 0
    scenario.verify()


def test_stream_stops_quietly_on_ctrl_c_and_leaves_no_temporary_folders(scenario, cli_env, tmp_path):
    scenario.produce(300, seed=43)
    env = dict(cli_env, TMPDIR=str(tmp_path))
    proc = _cli_popen(env, *drain_args(scenario), "--stream", "--trigger-seconds", "0.5")
    deadline = time.monotonic() + 180
    while scenario.depth() and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(3)  # at least one progress report after the queue emptied
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert not [line for line in lines if SPARK_NOISE.search(line)], stderr[-3000:]
    assert lines[0].startswith("starting Spark") and lines[1].startswith("streaming drain started")
    assert "stopping" in lines[-1]
    assert any(line.startswith("drained 300 entries") for line in lines), stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["micro_batches"] >= 1 and summary["exported"] == 300
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(("drain-", "accumulo-export-spark"))]
    scenario.verify()


def test_a_small_batch_drain_runs_without_spark(scenario, cli_env):
    scenario.produce(50, seed=45)
    out = run_cli(dict(cli_env, PYSPARK_SUBMIT_ARGS="--this-would-fail-if-spark-started"), *drain_args(scenario))
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1])["exported"] == 50
    scenario.verify()


def test_help_explains_config_secrets_and_examples():
    out = run_cli(dict(os.environ), "--help")
    assert out.returncode == 0
    for needed in ("ACCUMULO_EXPORT_CONFIG", "clusters.toml", "secret_file", "secret_env", "examples:",
                   "queue dead-letters"):
        assert needed in out.stdout, needed
    assert "``" not in out.stdout and ":mod:" not in out.stdout
    drain = run_cli(dict(os.environ), "drain", "--help").stdout
    assert "{difference,replicator,cells,value[=CF[:CQ]],module:callable}" in drain
    assert "(default: 1048576)" in drain and "(default: None)" not in drain


def test_status_into_a_closed_pipe_is_not_an_error(scenario, cli_env):
    scenario.produce(500, seed=47)
    q = ["--cluster", "A", "--table", scenario.queue.table, "--queue", scenario.queue.qid]
    shell = f"{sys.executable} -m connector.cli queue status {' '.join(q)} | head -n 1"
    out = subprocess.run(["bash", "-c", shell], env=cli_env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith(f"queue {scenario.queue.qid}:") and out.stderr == ""


def test_dead_letters_are_listed_and_requeued(spark, scenario, cli_env):
    from connector.spark import run_batch

    scenario.produce(100, seed=53)
    poison = scenario.queue.layout.entry_row(b'"poison"', 3)
    with scenario.conn_a.batch_writer(scenario.queue.table) as w:
        w.add_mutation(Mutation(poison).put("e", "v", b'{"new": [{"row": "x"}]}'))
    assert run_batch(spark, scenario.job()).dead_lettered == 1
    q = ["--cluster", "A", "--table", scenario.queue.table, "--queue", scenario.queue.qid]
    listed = run_cli(cli_env, "queue", "dead-letters", *q, "--json")
    assert listed.returncode == 0, listed.stderr
    (letter,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert "lacks cf, cq" in letter["reason"] and letter["value"] == '{"new": [{"row": "x"}]}'
    requeued = run_cli(cli_env, "queue", "dead-letters", *q, "--requeue")
    assert requeued.returncode == 0 and "re-queued 1" in requeued.stdout
    status = queue_status(scenario.conn_a, scenario.queue)
    assert status.entries == 1 and status.dead_letters == 0


def _run_page(page: Path, env: dict[str, str], folder: Path) -> dict[str, str]:
    """Run a page's ```python and ```sh blocks in order, in ``folder``; each block's stdout by its code. A block
    that starts a process in the background writes its pid into a ``*.pid`` file: stopped here if the page
    fails before it stops it."""
    from integration.docs import code_blocks

    folder.mkdir()
    outputs: dict[str, str] = {}
    try:
        for n, (language, code) in enumerate(code_blocks(page)):
            if language == "python":
                script = folder / f"block_{n}.py"
                script.write_text(code)
                command = [sys.executable, str(script)]
            elif language == "sh":
                command = ["bash", "-euo", "pipefail", "-c", code]
            else:
                continue  # ```py, ```shell and the rest are shown only
            out = subprocess.run(command, env=env, cwd=folder, capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, f"{page.name} {language} block {n}:\n{code}\n{out.stderr[-3000:]}"
            outputs[code] = out.stdout
    except BaseException:  # the page stops what it started only when it gets that far
        for pid_file in folder.glob("*.pid"):
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
        raise
    return outputs


def _output(outputs: dict[str, str], command: str) -> str:
    """The stdout of the one block that holds ``command``."""
    (found,) = [out for code, out in outputs.items() if command in code]
    return found


def _pages_with_snippets() -> list[str]:
    from integration.docs import code_blocks, pages

    return [p.relative_to(ROOT).as_posix() for p in pages()
            if any(language in ("python", "sh") for language, _ in code_blocks(p))]


PAGES = _pages_with_snippets()


@pytest.mark.slow  # a minute or two for the whole set, in a fresh `make test`
@pytest.mark.parametrize("name", PAGES)
def test_doc_snippets_run_as_written(name, accumulo, cli_env, tmp_path):
    """The ```python and ```sh blocks of the README and of every guide run as written, in order, each page in a
    folder of its own (as a user who follows it); ```py and ```shell blocks are shown only (they need what the
    test lacks: a Spark cluster or Connect server, a Kerberized site, a terminal's set-up, ``make``)."""
    from examples.inverted_count_index import actual_index, expected_index

    assert {"README.md", "docs/draining.md", "docs/producing.md", "docs/tutorial.md"} <= set(PAGES)
    env = dict(cli_env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{cli_env['PATH']}", PYTHONPATH=str(ROOT))
    outputs = _run_page(ROOT / name, env, tmp_path / "page")
    with accumulo["a"].connect() as conn_a, accumulo["b"].connect() as conn_b:
        if name == "README.md":
            drained = json.loads(_output(outputs, "accumulo-export drain").splitlines()[-1])
            assert drained["exported"] == 3 and drained["remaining"] == 0, drained
            assert "0 differences" in _output(outputs, "accumulo-export verify")
            assert "is on every destination of queue front" in _output(outputs, "accumulo-export wait")
            assert sorted(actual_index(conn_b, "word_index")) == sorted(expected_index(conn_a, "words")) == [
                (b"00000001", b"pear"), (b"00000002", b"apple")]
        elif name == "docs/draining.md":
            assert '"exported": 1' in _output(outputs, "queue init   --cluster A --table exports --queue idx")
            assert {(c.row, c.value) for c in conn_b.scan("index")} >= {(b"word", b"4"), (b"w", b"1")}
        elif name == "docs/producing.md":
            assert '"exported": 1' in _output(outputs, "--queue packed_idx")  # the update through a packed queue
            assert {(c.row, c.cf, c.value) for c in conn_b.scan("packed_index")} == {(b"w", b"count", b"1")}
            combined = _output(outputs, "combine get")
            assert "apple\t4" in combined and "pear\t2" in combined
            # the combine sequence ends with the counts on B
            assert {(c.row, c.cf, c.value) for c in conn_b.scan("wcounts")} == {(b"apple", b"count", b"4"),
                                                                             (b"pear", b"count", b"2")}
        elif name == "docs/tutorial.md":
            first = json.loads(_output(outputs, "--dest-table tut_index --create-dest-table").splitlines()[-1])
            assert first["exported"] >= 2000 and first["remaining"] == 0, first
            assert "count 1 on B, written at seq" in _output(outputs, "count_once_more") and "(the commit's: True)" \
                in _output(outputs, "count_once_more")
            assert "0 differences" in _output(outputs, "accumulo-export verify")
            stopped = json.loads(_output(outputs, "kill ").strip().splitlines()[-1])
            assert stopped["micro_batches"] >= 1 and stopped["exported"] >= 1000, stopped
            expected = sorted(expected_index(conn_a, "tut_counts"))
            assert (b"00000001", b"tutorial") in expected and len(expected) > 50
            assert sorted(actual_index(conn_b, "tut_index")) == sorted(actual_index(conn_b, "tut_index_v2")) == \
                expected


@pytest.mark.cluster  # starts clusters of its own, without the fixture
def test_make_cluster_cleans_up_on_sigterm(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "integration.harness", "--clusters", "e"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        config_line = ""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            if "export ACCUMULO_EXPORT_CONFIG=" in line:
                config_line = line.strip()
                break
        assert config_line, proc.stderr.read() if proc.poll() is not None else "no config line"
        config = config_line.split("=", 1)[1]
        status = run_cli(dict(os.environ, ACCUMULO_EXPORT_CONFIG=config), "queue", "init", "--cluster", "E",
                         "--table", "t", "--queue", "q", "--buckets", "3")
        assert status.returncode == 0, status.stderr
        # every JVM (launcher and server processes) keeps its VFS cache under our folder, not in /tmp
        caches = list(tmp_path.rglob("accumulo-vfs-cache-*"))
        assert len(caches) >= 2, caches
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert list(tmp_path.iterdir()) == []  # state folder (secret files), cluster data and JVM temp files


def test_a_sigterm_while_the_spark_stream_starts_stops_it_once_started(scenario, spark, monkeypatch):
    """A SIGTERM that arrives while the query starts (Spark's Python workers warming up) used to be raised in
    the middle of a py4j call: the gateway connection broke and the stream ended with Py4JNetworkError, exit 1
    (a chaos run's finding). It is held until the query has started, which is then stopped cleanly."""
    import argparse
    import io

    from rich.console import Console

    import connector.spark.drain_job as drain_job
    from connector.cli.common import Terminated, handle_sigterm
    from connector.cli.drain_stream import stream_with_spark
    from connector.cli.progress import DrainProgressView

    warm = drain_job.warm_python_workers

    def sigterm_then_warm(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs at once, here in the main thread
        return warm(*args, **kwargs)

    monkeypatch.setattr(drain_job, "warm_python_workers", sigterm_then_warm)
    scenario.produce(50, seed=61)
    previous = signal.getsignal(signal.SIGTERM)
    handle_sigterm()
    folders: list[str] = []
    try:
        view = DrainProgressView(Console(file=io.StringIO()), stream=True)
        report, stop = stream_with_spark(argparse.Namespace(), scenario.job(), spark, view, folders)
    finally:
        signal.signal(signal.SIGTERM, previous)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    assert isinstance(stop, Terminated)
    assert not [q for q in spark.streams.active], "the query was stopped"
    assert report.dead_lettered == 0
