"""CLI sessions end to end: progress, quiet output, help, dead letters, README snippets that run as written,
and nothing left behind. On the real clusters."""

from __future__ import annotations

import json
import os
import re
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


def _code_blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.slow  # 52 s in a fresh `make test`
def test_readme_snippets_run_as_written(accumulo, cli_env, tmp_path):
    # ```python and ```sh blocks run here; ```py and ```shell ones are shown only (they need what the test
    # lacks: a Spark Connect server, a Kerberized site)
    blocks = _code_blocks("python")
    assert len(blocks) >= 2
    for n, code in enumerate(blocks):
        script = tmp_path / f"readme_{n}.py"
        script.write_text(code)
        out = subprocess.run([sys.executable, str(script)], env=cli_env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, f"README python block {n}:\n{code}\n{out.stderr[-3000:]}"
    env = dict(cli_env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{cli_env['PATH']}", PYTHONPATH=str(ROOT))
    outputs = []
    for shell in _code_blocks("sh"):
        if "accumulo-export" not in shell:
            continue  # `make ...` lines
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", shell], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, f"README sh block:\n{shell}\n{out.stderr[-3000:]}"
        outputs.append(out.stdout)
    assert '"exported": 1' in outputs[0]
    assert '"exported": 1' in outputs[1]  # the same update through a packed queue
    assert "apple\t4" in outputs[2] and "pear\t2" in outputs[2]  # combine get
    with accumulo["b"].connect() as conn:
        assert {(c.row, c.value) for c in conn.scan("index")} >= {(b"word", b"4"), (b"w", b"1")}
        assert {(c.row, c.cf, c.value) for c in conn.scan("packed_index")} == {(b"w", b"count", b"1")}
        # the combine sequence ends with the counts on B
        assert {(c.row, c.cf, c.value) for c in conn.scan("wcounts")} == {(b"apple", b"count", b"4"),
                                                                          (b"pear", b"count", b"2")}


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
