"""``make demo``: the main job on embedded clusters, end to end, with transactional producers and a
destination built from A's rows while they commit.

Starts clusters A and B. Producer processes of the inverted count index run row transactions on A (shared
words, Zipf-hot, so processes collide on hot words; each transaction commits a word's new count and its export
together): first a history, whose exports went to an older index (drained, then gone from the queue). Then a
new index on B: Spark's streaming drain into it starts, the producers commit again (one is SIGKILLed mid-run
and restarted), and meanwhile ``accumulo-export bootstrap`` fills the new index from A's committed rows; it is
SIGKILLed once and run again, and resumes. Finally ``accumulo-export verify`` compares the index with what A's
rows imply, and the demo checks it against the index recomputed from A as well, the queue and outboxes empty.
Prints the stream's rate and latency beside the running producers, the bootstrap and the verify (exit code 0
only if verified).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connector import (  # noqa: E402
    Connection,
    DrainJob,
    DrainReport,
    DrainSettings,
    ExportQueue,
    LocalEngine,
    QueueConfig,
    RowTransactions,
    outbox_status,
    queue_status,
    relay_table,
    run_drain,
    spark_session,
    start_stream,
    wait_for_seq,
)
from connector.clusters_config import CONFIG_ENV, write_clusters  # noqa: E402
from connector.queue.status import queue_lag  # noqa: E402
from connector.snapshot.state import BootstrapState  # noqa: E402
from connector.spark.drain_job import collect_stream_reports, stop_stream  # noqa: E402
from connector.transactions.relay import pending_outbox  # noqa: E402
from examples.inverted_count_index import (  # noqa: E402
    COUNT_QUALIFIER,
    COUNTS_FAMILY,
    actual_index,
    count_update,
    expected_index,
)
from integration.harness import clusters  # noqa: E402

COUNTS = "counts"
_FIELDS = re.compile(r"(\w+)=([\d.]+)")


class ProducerProcess:
    """One producer process (``python -m examples.inverted_count_index``) and what it printed."""

    def __init__(self, name: str, module: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.last: dict[str, float] = {}  # fields of the last progress or done line
        self.done = False
        self.stderr = ""
        self._out = threading.Thread(target=self._read, daemon=True)
        self._out.start()
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._err.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(("progress ", "done ")):
                self.last = {k: float(v) for k, v in _FIELDS.findall(line)}
                self.done = line.startswith("done ")

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    @property
    def committed(self) -> int:
        return int(self.last.get("committed", 0))

    @property
    def conflicts(self) -> int:
        return int(self.last.get("conflicts", 0))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._out.join(10)

    def wait(self) -> int:
        code = self.proc.wait()
        self._out.join(10)
        self._err.join(10)
        return code


@dataclass
class Kill:
    """What SIGKILLing a producer mid-run left: its name, when, what it had reported (``fields`` of its last
    progress line), and ``left``: outbox cells committed before the kill still unrelayed 2 s later."""

    name: str
    after_s: float
    fields: dict[str, float]
    remaining: int
    left: int = 0

    @property
    def committed(self) -> int:
        return int(self.fields.get("committed", 0))

    @property
    def conflicts(self) -> int:
        return int(self.fields.get("conflicts", 0))

    def line(self) -> str:
        return (f"SIGKILLed producer {self.name} {self.after_s:.1f}s after its start (it had reported {self.committed} "
                f"committed transactions); restarted it for the remaining {self.remaining}; {self.left} outbox "
                "cells it committed were unrelayed 2s later")


def kill_one_and_restart(procs: list[ProducerProcess], index: int, after_s: float, share: int,
                         restart: Callable[[int], ProducerProcess], conn: Connection, table: str) -> Kill | None:
    """Once ``procs[index]`` has been committing for ``after_s`` seconds (since its first progress line),
    SIGKILL it wherever it is (reading, committing or relaying), start ``restart(remaining)`` in
    its place (``share`` minus what it reported) and count the outbox cells of ``table`` committed before the
    kill that are still there 2 s later (live producers flush the deletes of their own relayed cells within a
    second). None (after killing every producer) if it ended first."""
    victim = procs[index]
    deadline = time.monotonic() + 600
    first_commit: float | None = None
    while not victim.done and victim.proc.poll() is None and time.monotonic() < deadline:
        if victim.committed and first_commit is None:
            first_commit = time.monotonic()
        if first_commit is not None and time.monotonic() - first_commit >= after_s:
            break
        time.sleep(0.05)
    if victim.done or victim.proc.poll() is not None or not victim.committed:
        print(f"producer {victim.name} finished (or failed) before it could be killed after {after_s}s: use more "
              f"transactions\n{victim.stderr[-2000:]}", file=sys.stderr)
        for p in procs:
            p.kill()
        return None
    kill_s = time.monotonic() - victim.started
    victim.kill()
    kill_us = time.time_ns() // 1000
    kill = Kill(victim.name, kill_s, dict(victim.last), share - victim.committed)
    procs[index] = restart(kill.remaining)
    time.sleep(2.0)
    kill.left = sum(1 for _row, _q, ts, _v in pending_outbox(conn, table) if ts <= kill_us)
    return kill


def cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "connector", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


class LagSampler:
    """Samples, every half second while the stream runs beside the producers, how long the oldest entry of the
    queue has waited: the most any entry waited from its commit to the moment the stream took it."""

    def __init__(self, conn: Connection, queue: QueueConfig) -> None:
        self.conn, self.queue = conn, queue
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            lag = queue_lag(self.conn, self.queue).lag_seconds()
            self.samples.append(max(lag.values(), default=0.0))

    def stop(self) -> tuple[float, float]:
        """(p50, p99) of the samples, seconds."""
        self._stop.set()
        self._thread.join(5)
        ordered = sorted(self.samples) or [0.0]
        return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def bootstrap_killed_once(env: dict[str, str], args: list[str], conn: Connection, queue: QueueConfig) -> tuple[
        str, dict[str, object]]:
    """Run ``accumulo-export bootstrap``, SIGKILL it once it finished a range, run it again; returns what the
    kill left and the second run's JSON summary."""
    first = cli(env, "bootstrap", *args, "--json")
    state = BootstrapState(conn, queue, f"B/{args[args.index('--dest-table') + 1]}")
    deadline = time.monotonic() + 300
    while not state.done() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    done = len(state.done())
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = cli(env, "bootstrap", *args, "--json")
    out, err = second.communicate(timeout=900)
    if second.returncode != 0:
        raise RuntimeError(f"bootstrap failed:\n{err[-3000:]}")
    return f"SIGKILLed after {done} ranges", json.loads(out.strip().splitlines()[-1])


class StreamSupervisor:
    """The streaming drain, restarted from its checkpoint if it stops with an error (a Python worker that did
    not start in time on a loaded machine, say), as a service manager would restart it."""

    def __init__(self, spark: object, job: DrainJob, folder: str) -> None:
        self.spark, self.job, self.folder = spark, job, folder
        self.restarts = 0
        self._stop = threading.Event()
        self.query = self._start()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _start(self) -> Any:
        return start_stream(self.spark, self.job, f"{self.folder}/checkpoint", f"{self.folder}/reports")

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            if not self.query.isActive and not self._stop.is_set():
                failure = str(self.query.exception() or "stopped").splitlines()[0][:200]
                print(f"the stream stopped ({failure}); restarting it from its checkpoint", flush=True)
                self.restarts += 1
                self.query = self._start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        stop_stream(self.query)


def read_your_writes(conn_a: Connection, b: Any, queue: QueueConfig) -> tuple[bool, str]:
    """Commit one more transaction, wait for its seq to reach B (``wait_for_seq``), and read the change back
    from B: an application's read-your-writes across clusters."""
    word = "read-your-writes"
    with RowTransactions(conn_a, COUNTS) as txs:
        def change(tx: Any) -> None:
            old = int(tx.get(COUNTS_FAMILY, COUNT_QUALIFIER, default=b"0"))
            tx.put(COUNTS_FAMILY, COUNT_QUALIFIER, str(old + 1).encode())
            tx.export(queue, word, count_update(word, old or None, old + 1))

        started = time.monotonic()
        seq = txs.run(word, change)
        assert seq is not None
        wait_for_seq(conn_a, queue, seq, timeout=120)
        waited = time.monotonic() - started
    with b.connect() as conn_b:
        found = [c for c in conn_b.scan("count_index") if c.cq == word.encode()]
    shown = f"count {int(found[0].row)} at seq {found[0].ts}" if found else "NOT FOUND"
    return bool(found) and found[0].ts == seq, (f"committed seq {seq}, waited {waited:.2f}s for it to reach B "
                                                f"(wait_for_seq), read it back from B: {shown}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=12_000, help="transactions before the new index exists")
    parser.add_argument("--transactions", type=int, default=16_000, help="transactions while it is built")
    parser.add_argument("--words", type=int, default=10_000)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--batch", type=int, default=20, help="transactions per run_all call in a producer")
    parser.add_argument("--skew", type=float, default=1.0, help="Zipf exponent of the words' popularity")
    parser.add_argument("--kill-after", type=float, default=4.0,
                        help="seconds after its first commits at which one producer is SIGKILLed")
    opts = parser.parse_args()

    print("starting embedded clusters A and B (first run builds the gateway) ...", flush=True)
    t0 = time.monotonic()
    with clusters(("a", "b")) as running:
        a, b = running["a"], running["b"]
        print(f"clusters up in {time.monotonic() - t0:.0f}s", flush=True)
        config_file = running.state_dir / "clusters.toml"
        write_clusters(config_file, {"A": a.gateway_options(), "B": b.gateway_options()})
        os.environ[CONFIG_ENV] = str(config_file)
        env = dict(os.environ, PYTHONPATH=str(ROOT))

        queue = QueueConfig(table="exports", qid="cidx", num_buckets=opts.buckets)
        conn_a = a.connect()
        ExportQueue(conn_a, queue).init()
        RowTransactions(conn_a, COUNTS).init()
        conn_a.add_splits(COUNTS, [f"word{i:05d}".encode() for i in range(opts.words // 8, opts.words,
                                                                            opts.words // 8)])

        def start(name: str, seed: int, transactions: int) -> ProducerProcess:
            return ProducerProcess(name, "examples.inverted_count_index", [
                "--cluster", "A", "--table", COUNTS, "--queue-table", queue.table, "--qid", queue.qid,
                "--buckets", str(queue.num_buckets), "--words", str(opts.words), "--transactions", str(transactions),
                "--seed", str(seed), "--batch", str(opts.batch), "--skew", str(opts.skew),
                "--progress-seconds", "0.5"], env)

        # --- the history: committed rows whose exports went to an older index ----------------------------------
        print(f"history: {opts.history} transactions, drained into an older index ...", flush=True)
        history = [start(f"h{i}", 100 + i, opts.history // opts.producers) for i in range(opts.producers)]
        if any(p.wait() != 0 for p in history):
            print("a history producer failed", file=sys.stderr)
            return 1
        relay_table(conn_a, COUNTS)
        run_drain(LocalEngine(), DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue,
                                          dest_table="count_index_old",
                                          settings=DrainSettings(create_dest_table=True)))
        print(f"  {len(expected_index(conn_a, COUNTS)):,} words counted on A; the queue is empty", flush=True)

        # --- the new index: the stream first, then producers and the bootstrap at once ------------------------
        spark = spark_session(app_name="accumulo-export demo")
        job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue, dest_table="count_index",
                       settings=DrainSettings(trigger_seconds=0.5, create_dest_table=True))
        folder = tempfile.mkdtemp(prefix="demo-stream-")
        query = StreamSupervisor(spark, job, folder)
        print("streaming drain into the new index started", flush=True)
        per = opts.transactions // opts.producers
        t_produce = time.monotonic()
        lag = LagSampler(conn_a, queue)
        procs = [start(f"p{i}", i, per) for i in range(opts.producers)]
        boot_args = ["--source", "A", "--table", queue.table, "--queue", queue.qid, "--producer-table", COUNTS,
                     "--dest", "B", "--dest-table", "count_index",
                     "--snapshot", "examples.inverted_count_index:snapshot", "--settle-seconds", "300"]
        boot: dict[str, object] = {}
        booter = threading.Thread(target=lambda: boot.update(zip(
            ("kill", "summary"), bootstrap_killed_once(env, boot_args, conn_a, queue), strict=True)), daemon=True)
        booter.start()
        kill = kill_one_and_restart(procs, 0, opts.kill_after, per,
                                    lambda left: start("p0'", 1000 + opts.producers, left), conn_a, COUNTS)
        if kill is None:
            return 1
        print(kill.line(), flush=True)
        failed = [p for p in procs if p.wait() != 0]
        produce_s = time.monotonic() - t_produce
        for p in failed:
            print(f"producer {p.name} failed:\n{p.stderr[-3000:]}", file=sys.stderr)
        lag_p50, lag_p99 = lag.stop()
        stream = DrainReport()
        collect_stream_reports(f"{folder}/reports", stream)
        exported_live = stream.exported
        booter.join(900)
        deadline = time.monotonic() + 300
        while (queue_status(conn_a, queue).entries or not outbox_status(conn_a, COUNTS).empty) and \
                time.monotonic() < deadline:
            relay_table(conn_a, COUNTS)  # the producers are done: whatever waits is left over
            time.sleep(1.0)
        ryw_ok, ryw = read_your_writes(conn_a, b, queue)  # while the stream still runs
        query.stop()
        spark.stop()
        collect_stream_reports(f"{folder}/reports", stream)
        conflicts = kill.conflicts + sum(p.conflicts for p in procs)
        verify = subprocess.run([sys.executable, "-m", "connector", "verify", *boot_args, "--json"], cwd=ROOT,
                                env=env, capture_output=True, text=True)
        checked = json.loads(verify.stdout.strip().splitlines()[-1]) if verify.stdout.strip() else {}

        conn_b = b.connect()
        expected = expected_index(conn_a, COUNTS)
        actual = actual_index(conn_b, "count_index")
        left = queue_status(conn_a, queue).entries
        outbox = outbox_status(conn_a, COUNTS)
        summary = boot.get("summary") or {}
        verified = (not failed and sorted(expected) == sorted(actual) and len(actual) == len(set(actual))
                    and left == 0 and outbox.empty and verify.returncode == 0 and bool(summary) and ryw_ok)
        print("\n=== demo report ===")
        print(f"producers             {opts.producers} processes on {opts.words} shared words (Zipf {opts.skew}), "
              f"{opts.batch} transactions per run_all; {kill.name} SIGKILLed {kill.after_s:.1f}s after its start, "
              f"at {kill.committed}+ commits, and restarted" + (f"; {len(failed)} FAILED" if failed else ""))
        print(f"history               {opts.history} transactions before the new index existed (their exports "
              "went to the older index)")
        print(f"transactions          {per * opts.producers} committed in {produce_s:.1f}s "
              f"({per * opts.producers / produce_s:,.0f}/s) while the index was built, {conflicts} conflicts retried")
        print(f"stream beside them    {exported_live:,} entries exported while the producers ran (one per commit "
              f"of theirs, and a repeat now and then; the rest of the {per * opts.producers:,} commits' entries after "
              f"they stopped), {exported_live / produce_s:,.0f} entries/s, {query.restarts} restarts; the oldest "
              f"waiting entry's age, sampled every 0.5 s: p50 {lag_p50:.2f}s, p99 {lag_p99:.2f}s")
        check = summary.get("final_check") or {}
        print(f"bootstrap             {boot.get('kill', 'not run')}; the rerun resumed {summary.get('resumed_ranges')} "
              f"of the {summary.get('ranges')} tablets of A it reads and wrote {summary.get('cells')} cells; final "
              f"check: {check.get('differences')} differences, {check.get('repaired')} repaired, "
              f"{check.get('in_flight')} cells in flight (the stream exported them between its two passes)")
        print(f"verify                {checked.get('differences')} differences, {checked.get('expected_cells')} cells "
              f"expected; {checked.get('matched_ranges')} of the {checked.get('ranges')} tablets of B matched by "
              f"digest (exit status {verify.returncode})")
        print(f"index cells on B      {len(actual)} (expected {len(expected)}, stale "
              f"{len(set(actual) - expected)}, missing {len(expected - set(actual))})")
        print(f"queue left            {left}; outbox left {outbox.cells} cells")
        print(f"read-your-writes      {ryw}")
        print(f"verified              {'yes' if verified else 'NO'}")
        return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
