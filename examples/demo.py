"""``make demo``: the main job on embedded clusters, end to end, with transactional producers.

Starts clusters A and B; runs producer processes of the inverted count index on A (row transactions on
shared words, Zipf-hot, so processes collide on hot words; each transaction commits a word's new count and
its export together); SIGKILLs one producer mid-run and starts it again to finish the remaining work; relays
what the killed one left in its outboxes; drains the export queue into B with Spark; verifies B against the
index recomputed from A, the queue and the outbox empty; prints a short report (exit code 0 only if verified).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connector import (  # noqa: E402
    Connection,
    DrainJob,
    ExportQueue,
    QueueConfig,
    RowTransactions,
    outbox_status,
    queue_status,
    relay_table,
    run_batch,
    spark_session,
)
from connector.clusters_config import CONFIG_ENV, write_clusters  # noqa: E402
from connector.transactions.relay import pending_outbox  # noqa: E402
from examples.inverted_count_index import actual_index, expected_index  # noqa: E402
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=24_000)
    parser.add_argument("--words", type=int, default=10_000)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--batch", type=int, default=100, help="transactions per run_all call in a producer")
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

        per = opts.transactions // opts.producers

        def start(name: str, seed: int, transactions: int) -> ProducerProcess:
            return ProducerProcess(name, "examples.inverted_count_index", [
                "--cluster", "A", "--table", COUNTS, "--queue-table", queue.table, "--qid", queue.qid,
                "--buckets", str(queue.num_buckets), "--words", str(opts.words), "--transactions", str(transactions),
                "--seed", str(seed), "--batch", str(opts.batch), "--skew", str(opts.skew),
                "--progress-seconds", "0.5"], env)

        print(f"producing {per * opts.producers} transactions on {opts.words} shared words with "
              f"{opts.producers} producer processes ...", flush=True)
        t_produce = time.monotonic()
        procs = [start(f"p{i}", i, per) for i in range(opts.producers)]

        kill = kill_one_and_restart(procs, 0, opts.kill_after, per,
                                    lambda left: start("p0'", 1000 + opts.producers, left), conn_a, COUNTS)
        if kill is None:
            return 1
        print(kill.line(), flush=True)

        failed = [p for p in procs if p.wait() != 0]
        produce_s = time.monotonic() - t_produce
        for p in failed:
            print(f"producer {p.name} failed:\n{p.stderr[-3000:]}", file=sys.stderr)
        conflicts = kill.conflicts + sum(p.conflicts for p in procs)

        before_relay = outbox_status(conn_a, COUNTS)
        relayed = relay_table(conn_a, COUNTS)
        depth = queue_status(conn_a, queue).entries  # one entry per committed transaction
        print(f"{depth} transactions committed in {produce_s:.1f}s ({depth / produce_s:,.0f}/s, {conflicts} "
              f"conflicts retried); the final relay moved {relayed.relayed} outbox cells", flush=True)

        spark = spark_session(app_name="accumulo-export demo")
        job = DrainJob(source=a.gateway_options(), dest=b.gateway_options(), queue=queue,
                       dest_table="count_index")
        t_drain = time.monotonic()
        report = run_batch(spark, job, progress=lambda r: print(
            f"  round {r.rounds}: {r.exported} exported, {r.rate:,.0f} entries/s", flush=True))
        drain_s = time.monotonic() - t_drain
        spark.stop()

        conn_b = b.connect()
        expected = expected_index(conn_a, COUNTS)
        actual = actual_index(conn_b, "count_index")
        left = queue_status(conn_a, queue).entries
        outbox = outbox_status(conn_a, COUNTS)
        verified = (not failed and sorted(expected) == sorted(actual) and len(actual) == len(set(actual))
                    and left == 0 and outbox.empty)
        print("\n=== demo report ===")
        print(f"producers             {opts.producers} processes on {opts.words} shared words (Zipf {opts.skew}), "
              f"{opts.batch} transactions per run_all; {kill.name} SIGKILLed {kill.after_s:.1f}s after its start, "
              f"at {kill.committed}+ commits, and restarted"
              + (f"; {len(failed)} FAILED" if failed else ""))
        print(f"transactions          {depth} committed in {produce_s:.1f}s ({depth / produce_s:,.0f}/s), "
              f"{conflicts} conflicts retried")
        print(f"kill left             {kill.left} outbox cells unrelayed 2s after the kill; {before_relay.cells} "
              f"still there when the producers had finished (the others were relayed by producers committing on "
              f"their rows); relay_table relayed {relayed.relayed}")
        print(f"entries exported      {report.exported} of {depth} queued (dead-lettered {report.dead_lettered})")
        print(f"drain throughput      {report.exported / drain_s:,.0f} entries/s ({drain_s:.1f}s, "
              f"{report.rounds} Spark rounds)")
        print(f"latency               last commit -> queue empty and B complete: {drain_s:.1f}s")
        print(f"index cells on B      {len(actual)} (expected {len(expected)}, stale "
              f"{len(set(actual) - expected)}, missing {len(expected - set(actual))})")
        print(f"queue left            {left}")
        print(f"outbox left           {outbox.cells} cells ({outbox.malformed} malformed)")
        print(f"verified              {'yes' if verified else 'NO'}")
        return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
