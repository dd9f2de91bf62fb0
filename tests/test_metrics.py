"""``--metrics-port`` (issue 20, item 2): scraped while a drain or a combine runs, on the real clusters, through
the CLI in a subprocess (the process an operator runs), with Spark ``local[2]`` where the command uses Spark."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from prometheus_client.parser import text_string_to_metric_families

from connector.accumulo import Mutation, Range
from connector.cli.metrics import COMBINE_COUNTERS, DRAIN_COUNTERS, Metrics, _combine_counts
from connector.combine.config import CombineConfig
from connector.combine.producer import CombineQueue
from connector.combine.status import combine_lag, combine_status
from connector.export import AccumuloExporter
from connector.export.core import CellChange, SequencedExport
from connector.queue import ExportQueue, QueueConfig, QueueLag, drain_queue, queue_lag, queue_status

from .conftest import ROOT, run_cli, unique_table

SLOW = "tests.test_metrics:slow_translator"


def slow_translator(export: SequencedExport) -> Iterator[CellChange]:
    """A translator slow enough (20 ms an export) that scrapes see entries wait; refuses the key "bad"."""
    time.sleep(0.02)
    if export.key == "bad":
        raise ValueError("refused on purpose")
    yield CellChange(str(export.key).encode(), b"f", b"q", value=json.dumps(export.value).encode())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples | None:
    """name, labels -> value of every sample on the endpoint; None when nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str) -> float | None:
    return samples.get((name, ()))


def bucket_lags(samples: Samples) -> dict[str, float]:
    return {dict(labels)["bucket"]: v for (name, labels), v in samples.items()
            if name == "accumulo_export_bucket_lag_seconds"}


def watch(proc: subprocess.Popen, port: int, done: Callable[[Samples], bool], seconds: float = 300) -> list[Samples]:
    """Scrape every 0.3 s until ``done(samples)`` or the process ends; every scrape that answered."""
    seen: list[Samples] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        samples = scrape(port)
        if samples is not None:
            seen.append(samples)
            if done(samples):
                return seen
        time.sleep(0.3)
    return seen


def popen(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "connector.cli", *args], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[str, str]:
    try:
        if proc.poll() is None:
            proc.send_signal(sig)
        return proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()


def fill_queue(conn, entries: int, buckets: int = 8, bad: bool = False) -> QueueConfig:
    config = QueueConfig(table=unique_table("mq"), qid="m", num_buckets=buckets)
    with ExportQueue(conn, config) as q:
        q.init()
        for i in range(entries):
            q.add(f"k{i}", {"n": i}, seq=i + 1)
        if bad:
            q.add("bad", {"n": -1}, seq=1)
    return config


def drain_cmd(config: QueueConfig, port: int, *extra: str) -> list[str]:
    return ["drain", "--source", "A", "--dest", "B", "--table", config.table, "--queue", config.qid,
            "--dest-table", unique_table("md"), "--create-dest-table", "--translator", SLOW, "--metrics-port",
            str(port), *extra]


def drained(samples: Samples, exported: int) -> bool:
    return (value(samples, "accumulo_export_entries_exported_total") == exported
            and value(samples, "accumulo_export_queue_depth") == 0)


def check_stream_scrapes(seen: list[Samples], exported: int, buckets: int) -> None:
    """While entries waited: per-bucket lag > 0; at the end: the counters, and every lag back to 0."""
    waiting = [s for s in seen if value(s, "accumulo_export_queue_depth")]
    assert waiting, "no scrape saw entries waiting"
    assert any(v > 0 for s in waiting for v in bucket_lags(s).values())
    assert all(0 < len(bucket_lags(s)) <= 10 for s in waiting)  # the bounded label set
    assert max(value(s, "accumulo_export_lag_seconds_max") or 0 for s in waiting) > 0
    assert max(value(s, "accumulo_export_lagging_buckets") or 0 for s in waiting) == buckets
    last = seen[-1]
    assert drained(last, exported), last
    assert value(last, "accumulo_export_cells_written_total") == exported
    assert value(last, "accumulo_export_bytes_read_total") > 0
    assert value(last, "accumulo_export_dead_letters_total") == 1
    assert value(last, "accumulo_export_batches_total") >= 1
    assert value(last, "accumulo_export_batch_duration_seconds_count") >= 1
    assert value(last, "accumulo_export_lag_seconds_max") == 0
    assert value(last, "accumulo_export_lagging_buckets") == 0
    assert bucket_lags(last) and set(bucket_lags(last).values()) == {0.0}  # fell to 0, not vanished
    labels = [dict(k[1]) for k in last if k[0] == "accumulo_export_command_info"]
    assert labels and set(labels[0]) == {"command", "table", "queue", "dest_table"}


# --- the lag scans ---------------------------------------------------------------------------------------

@pytest.mark.cluster
def test_queue_lag_agrees_with_queue_status(conn_a):
    config = fill_queue(conn_a, 300, buckets=16)
    lag, status = queue_lag(conn_a, config, batch_size=50), queue_status(conn_a, config)
    assert lag.entries == status.entries == 300
    assert lag.oldest_ms == {b.bucket: b.oldest_written_ms for b in status.buckets}
    assert all(seconds > 0 for seconds in lag.lag_seconds(time.time() + 1).values())
    with ExportQueue(conn_a, config) as q:  # a row of other data after the queue's range is not counted
        q.add_mutations([Mutation(b"m:~other").put(b"e", b"v", b"x")])
    assert queue_lag(conn_a, config).entries == 300
    conn_a.delete_table(config.table)
    empty = fill_queue(conn_a, 0)
    lag = queue_lag(conn_a, empty)
    assert (lag.entries, lag.oldest_ms) == (0, {})
    conn_a.delete_table(empty.table)


@pytest.mark.cluster
def test_combine_lag_counts_queued_updates_per_bucket(conn_a):
    config = CombineConfig(table=unique_table("mc"), cid="mc", num_buckets=4)
    with CombineQueue(conn_a, config) as q:
        q.init()
        q.update_all([(f"k{i % 30}", 1) for i in range(100)])
    lag, status = combine_lag(conn_a, config), combine_status(conn_a, config)
    assert lag.entries == status.updates == 100
    assert sorted(lag.oldest_ms) == [b.bucket for b in status.buckets if b.updates]
    conn_a.delete_table(config.table)


# --- the drain -------------------------------------------------------------------------------------------

@pytest.mark.cluster
def test_in_process_stream_is_scraped_while_it_drains(conn_a, cli_env):
    config = fill_queue(conn_a, 300, bad=True)
    port = free_port()
    proc = popen(cli_env, *drain_cmd(config, port, "--stream", "--engine", "local", "--trigger-seconds", "0.5",
                                     "--allow-dead-letters"))
    seen = watch(proc, port, lambda s: drained(s, 300) and set(bucket_lags(s).values()) == {0.0})
    stdout, stderr = stop(proc)
    assert proc.returncode == 0, stderr[-3000:]
    check_stream_scrapes(seen, 300, 8)
    assert json.loads(stdout.strip().splitlines()[-1])["exported"] == 300
    assert scrape(port) is None  # the server stopped with the command


@pytest.mark.cluster
@pytest.mark.spark
def test_spark_stream_is_scraped_while_it_drains(conn_a, cli_env):
    config = fill_queue(conn_a, 300, bad=True)
    port = free_port()
    proc = popen(cli_env, *drain_cmd(config, port, "--stream", "--trigger-seconds", "0.5", "--allow-dead-letters"))
    # exports are counted while a micro-batch runs, the micro-batch itself once it ended: wait for both (a CI
    # run's last scrape came between the two)
    seen = watch(proc, port, lambda s: drained(s, 300) and set(bucket_lags(s).values()) == {0.0}
                 and value(s, "accumulo_export_batches_total") >= 1)
    stdout, stderr = stop(proc)
    assert proc.returncode == 0, stderr[-3000:]
    check_stream_scrapes(seen, 300, 8)
    assert scrape(port) is None


@pytest.mark.cluster
@pytest.mark.spark
def test_a_spark_stream_counts_a_long_micro_batch_while_it_runs(conn_a, cli_env):
    """Issue 27: exports are counted as the Spark stream's tasks do them, not only when the micro-batch ends
    (its tasks keep progress rows, which its report then replaces): /metrics and the progress lines rise during
    a long first micro-batch, and nothing is counted twice."""
    entries = 600
    config = fill_queue(conn_a, entries)
    port = free_port()
    # the slow translator (20 ms an export) and small export batches: a micro-batch of several seconds
    proc = popen(cli_env, *drain_cmd(config, port, "--stream", "--trigger-seconds", "0.5", "--buffer-bytes", "300"))
    seen = watch(proc, port, lambda s: drained(s, entries))
    stdout, stderr = stop(proc)
    assert proc.returncode == 0, stderr[-3000:]
    assert seen and drained(seen[-1], entries), seen[-1:]
    during = [value(s, "accumulo_export_entries_exported_total") for s in seen
              if value(s, "accumulo_export_batches_total") == 0]
    assert any(0 < n < entries for n in during), during  # counted before the first micro-batch ended
    lines = [line for line in stderr.splitlines() if line.startswith("drained ")]
    counts = [int(line.split()[1].replace(",", "")) for line in lines]
    assert any(0 < n < entries and "micro-batches 0" in line for n, line in zip(counts, lines, strict=True)), lines
    assert counts == sorted(counts) and max(counts) <= entries, lines  # never back, never twice
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["exported"] == summary["deleted"] == entries, summary
    progress = config.layout.progress_prefix("")[:-1]
    assert list(conn_a.scan(config.table, Range.prefix(progress))) == []  # the stream removed its rows


@pytest.mark.cluster
def test_a_batch_drain_serves_until_it_ends(conn_a, cli_env):
    config = fill_queue(conn_a, 400)
    port = free_port()
    proc = popen(cli_env, *drain_cmd(config, port, "--engine", "local"))
    seen = watch(proc, port, lambda s: False)  # until the command ends
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr[-3000:]
    assert json.loads(stdout.strip().splitlines()[-1])["exported"] == 400
    # live counters (the tasks' progress rows) while the round ran, before the command ended
    assert any(0 < (value(s, "accumulo_export_entries_exported_total") or 0) < 400 for s in seen), seen[-1:]
    assert any(value(s, "accumulo_export_queue_depth") for s in seen)
    assert scrape(port) is None


@pytest.mark.cluster
def test_a_taken_port_is_a_clear_error_and_nothing_runs(conn_a, cli_env):
    config = fill_queue(conn_a, 20)
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run_cli(cli_env, *drain_cmd(config, port, "--engine", "local"))
    assert out.returncode == 2
    assert out.stderr.strip() == (f"accumulo-export: error: --metrics-port {port}: the port is in use (another "
                                  "drain's or combine's metrics?): choose another port; nothing was run")
    assert queue_status(conn_a, config).entries == 20
    bad = run_cli(cli_env, *drain_cmd(config, 70000, "--engine", "local"))
    assert bad.returncode == 2 and "--metrics-port: must be a TCP port (1-65535), got 70000" in bad.stderr


# --- the combine -----------------------------------------------------------------------------------------

@pytest.mark.cluster
@pytest.mark.spark
def test_combine_stream_and_batch_are_scraped(conn_a, cli_env):
    config = CombineConfig(table=unique_table("mc"), cid="mc", num_buckets=4)
    with CombineQueue(conn_a, config) as q:
        q.init()
        q.update_all([(f"k{i % 30}", 1) for i in range(200)])
    base = ["--cluster", "A", "--table", config.table, "--queue", config.cid]
    port = free_port()
    proc = popen(cli_env, "combine", "run", *base, "--stream", "--interval", "0.5", "--metrics-port", str(port))
    seen = watch(proc, port, lambda s: value(s, "accumulo_export_updates_combined_total") == 200
                 and value(s, "accumulo_export_queue_depth") == 0 and set(bucket_lags(s).values()) == {0.0})
    stdout, stderr = stop(proc)
    assert proc.returncode == 0, stderr[-3000:]
    waiting = [s for s in seen if value(s, "accumulo_export_queue_depth")]
    assert waiting and any(v > 0 for s in waiting for v in bucket_lags(s).values())
    last = seen[-1]
    assert value(last, "accumulo_export_updates_combined_total") == 200
    assert value(last, "accumulo_export_keys_changed_total") == 30
    assert value(last, "accumulo_export_batches_total") >= 1
    assert value(last, "accumulo_export_batch_duration_seconds_count") >= 1
    assert value(last, "accumulo_export_lag_seconds_max") == 0
    assert scrape(port) is None

    # batch mode: served while it runs (Spark's start-up included), closed when it ends
    with CombineQueue(conn_a, config) as q:
        q.update_all([("k1", 5)])
    proc = popen(cli_env, "combine", "run", *base, "--engine", "spark", "--metrics-port", str(port))
    seen = watch(proc, port, lambda s: False)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr[-3000:]
    assert seen and value(seen[0], "accumulo_export_updates_combined_total") == 0
    assert any(value(s, "accumulo_export_queue_depth") == 1 for s in seen)
    assert json.loads(stdout.strip().splitlines()[-1])["updates"] == 1
    assert scrape(port) is None
    conn_a.delete_table(config.table)


# --- what the drain counts, and the bounded label set -----------------------------------------------------

@pytest.mark.cluster
@pytest.mark.parametrize("translator", ["replicator", SLOW])
def test_the_drain_counts_the_cells_it_writes(conn_a, conn_b, translator):
    config = QueueConfig(table=unique_table("mq"), qid="m", num_buckets=4)
    with ExportQueue(conn_a, config) as q:
        q.init()
        for i in range(50):  # two cells an export with the replicator; one with the slow translator
            q.add(f"k{i}", [{"op": "set", "row": f"r{i}", "cf": "f", "cq": cq, "value": "v"} for cq in ("a", "b")],
                  seq=i + 1)
    dest = unique_table("md")
    with AccumuloExporter(conn_b, dest, translator).ensure_table() as exporter:
        stats = drain_queue(conn_a, config, exporter)
    assert stats.exported == 50
    assert stats.cells == len(list(conn_b.scan(dest))) == (100 if translator == "replicator" else 50)
    conn_a.delete_table(config.table)
    conn_b.delete_table(dest)


@dataclass
class _Totals:
    updates: int = 0
    exports: int = 0
    leftovers: int = 0
    changed: int = 0
    deleted: int = 0
    failed: int = 0
    conflicts: int = 0


@dataclass
class _Report:  # a CombineReport's shape: a pure-logic test of the bookkeeping, no server involved
    totals: _Totals = field(default_factory=_Totals)
    rounds: int = 0
    history: list = field(default_factory=list)
    relayed: int = 0


def _collected(metrics: Metrics) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in metrics.collect() for s in family.samples}


def test_counters_never_go_back_and_each_round_is_timed_once():
    metrics = Metrics("combine", {}, COMBINE_COUNTERS, _combine_counts)
    metrics._server = object()  # observing is off without a server; the bookkeeping is what is tested
    metrics.observe(_Report(_Totals(updates=10), 1, [{"seconds": 0.5}]))
    metrics.observe(_Report(_Totals(updates=7), 1, [{"seconds": 0.5}]))  # an older report, seen late
    metrics.observe(_Report(_Totals(updates=25), 3, [{"seconds": 0.5}, {"seconds": 2.0}, {"seconds": 3.0}]))
    got = _collected(metrics)
    assert value(got, "accumulo_export_updates_combined_total") == 25
    assert value(got, "accumulo_export_batches_total") == 3
    assert metrics.registry.get_sample_value("accumulo_export_batch_duration_seconds_count") == 3
    assert metrics.registry.get_sample_value("accumulo_export_batch_duration_seconds_sum") == 5.5


def test_per_bucket_lag_keeps_the_top_buckets_and_shows_emptied_ones_at_zero():
    metrics = Metrics("drain", {}, DRAIN_COUNTERS, lambda r: {}, top=3)
    now_ms = int(time.time() * 1000)
    metrics._apply_lag(QueueLag(50, {b: now_ms - 1000 * (b + 1) for b in range(8)}))  # bucket 7 lags most
    lags = bucket_lags(_collected(metrics))
    assert sorted(lags) == ["5", "6", "7"] and min(lags.values()) >= 6
    metrics._apply_lag(QueueLag(3, {1: now_ms - 500}))  # 5-7 emptied: the two that lagged most fall to 0
    lags = bucket_lags(_collected(metrics))
    assert lags["6"] == lags["7"] == 0.0 and lags["1"] > 0 and len(lags) == 3
    assert value(_collected(metrics), "accumulo_export_lagging_buckets") == 1
    metrics._apply_lag(QueueLag(0, {}))
    assert bucket_lags(_collected(metrics)) == {"1": 0.0, "6": 0.0, "7": 0.0}
    assert value(_collected(metrics), "accumulo_export_lag_seconds_max") == 0


def test_the_relay_counter_is_read_at_every_scrape():
    """The relay adds to a report on a thread of its own, between progress reports: a scrape shows what it
    relayed so far, and the other counters only what the last progress report said."""
    from connector.cli.metrics import LIVE_COUNTERS

    metrics = Metrics("combine", {}, COMBINE_COUNTERS, _combine_counts, live=LIVE_COUNTERS)
    metrics._server = object()
    report = _Report(_Totals(updates=4), 1, [{"seconds": 0.5}])
    metrics.observe(report)
    report.relayed, report.totals = 3, _Totals(updates=9)  # the relay counted; no progress report since
    got = _collected(metrics)
    assert value(got, "accumulo_export_outbox_cells_relayed_total") == 3
    assert value(got, "accumulo_export_updates_combined_total") == 4
