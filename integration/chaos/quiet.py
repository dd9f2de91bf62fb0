"""A quiet point: the faults stop, everything settles the way an operator would settle it, and the oracle
checks the result.

1. Producers stop (SIGTERM: each finishes its running ``run_all`` and relays what its relayer holds).
2. Killed gateways come back; the one-shot processes still running (batch drains, ``verify --repair``,
   compactions, relays) run to their end; the in-process stream runs.
3. Every destination still being built is bootstrapped until a bootstrap of it ends well (a killed one's
   lease expires after 60 s: a rerun refused meanwhile is tried again).
4. ``tx relay`` (what killed producers left in their outboxes), then a batch drain to the end.
5. Until the queue and the outboxes are empty (relaying again while an outbox holds cells), at most
   ``SETTLE_SECONDS``.
6. The checks (:mod:`integration.chaos.oracle`, apart from the connector's verify): the queue holds no entry
   and no dead letter (every entry was well formed), the producers' outboxes are empty, and every destination
   that is built equals what A's rows imply, cell for cell, with no cell newer than its row.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from . import history, oracle
from .report import QuietResult

if TYPE_CHECKING:
    from .run import ChaosRun

#: the longest a quiet point waits for the queue and the outboxes to empty after its drain
SETTLE_SECONDS = 180.0
#: the longest a quiet point waits for one-shot processes, and for the bootstraps to finish
ONE_SHOT_SECONDS = 300.0
BOOTSTRAP_SECONDS = 600.0


def quiet_point(run: ChaosRun, index: int) -> QuietResult:
    log = run.log
    log.phase = -1
    began = time.monotonic()
    result = QuietResult(index)
    log(f"quiet point {index}: faults stopped")
    run.timers.clear()
    _stop_producers(run, result)
    _restart_gateways(run)
    _finish_one_shots(run, result)
    run.ensure_streams()
    _finish_bootstraps(run, result)
    _drain_to_empty(run, result)
    _check(run, result)  # even when something above failed: what differs on B says how bad it is
    result.seconds = time.monotonic() - began
    log.quiet.append(result)
    verdict = "ok" if result.ok else "FAILED: " + " | ".join(result.problems)
    log(f"quiet point {index} {verdict} ({result.seconds:.0f}s)")
    return result


def _stop_producers(run: ChaosRun, result: QuietResult) -> None:
    producers = run.running("producer")
    for p in producers:
        p.sigterm()
    for p in producers:
        if p.wait(60) is None:
            result.problems.append(f"{p.name} did not stop within 60 s of SIGTERM")
            run.kill(p, "did not stop")
    run.reap()
    run.log(f"{len(producers)} producers stopped")


def _restart_gateways(run: ChaosRun) -> None:
    for cluster, index, g in run.pools.dead():
        g.start(timeout=180)
        run.log(f"gateway {cluster.upper()}#{index} back on {g.address}")


def _finish_one_shots(run: ChaosRun, result: QuietResult) -> None:
    waiting = [p for p in run.procs if p.alive() and p.kind in ("drain", "verify", "compact", "relay", "purge",
                                                                  "register")]
    if waiting:
        run.log(f"waiting for {', '.join(p.name for p in waiting)} to end")
    for p in waiting:
        if p.kind == "purge":  # its grace is 10 minutes at least: stopped as a stream stops its own purger, a purge
            p.sigterm()        # in its grace deletes nothing (connector/snapshot/purge.py), one deleting finishes
    deadline = time.monotonic() + ONE_SHOT_SECONDS
    for p in waiting:
        if p.wait(max(1.0, deadline - time.monotonic())) is None:
            result.problems.append(f"{p.name} still running after {ONE_SHOT_SECONDS:.0f} s: {p.tail(1)!r}")
            run.kill(p, "did not end")
    run.reap()


def _finish_bootstraps(run: ChaosRun, result: QuietResult) -> None:
    deadline = time.monotonic() + BOOTSTRAP_SECONDS
    while (pending := run.dests.unbootstrapped()) and time.monotonic() < deadline:
        run.ensure_streams()  # the final check waits for a drain to export the queue's older entries
        dest = pending[0]
        running = [p for p in run.procs if p.kind == "bootstrap" and p.alive() and p.meta.get("dest") is dest]
        proc = running[0] if running else run.start_bootstrap(dest)
        if proc is None:
            break
        proc.wait(max(1.0, deadline - time.monotonic()))
        run.reap()
        if not dest.ready and time.monotonic() < deadline:
            time.sleep(10.0)  # a killed bootstrap's lease: the next try may be refused until it expires
    for dest in run.dests.unbootstrapped():
        result.problems.append(f"no bootstrap of {dest.table} ended well within {BOOTSTRAP_SECONDS:.0f} s "
                               f"({dest.attempts} attempts)")
    for p in run.procs:
        if p.kind == "bootstrap" and p.alive():
            run.kill(p, "quiet point over")


def _drain_to_empty(run: ChaosRun, result: QuietResult) -> None:
    relay = run.run_to_end("relay", run.cmd.relay(), ONE_SHOT_SECONDS, "what killed producers left")
    _expect_ok(run, relay, result)
    truth = oracle.read_truth(run.conn_a, run.cmd.counts)
    if truth.outbox_cells and relay.returncode == 0:  # nothing commits now: a relay must leave nothing
        result.problems.append(f"tx relay left {truth.outbox_cells} outbox cells of stopped and killed producers "
                               f"(the newest {truth.outbox_ahead_seconds():+.0f}s from this machine's clock)")
        run.log(f"PROBLEM {result.problems[-1]}")
    primary = run.dests.primary.table
    drain = run.run_to_end("drain", run.cmd.drain(primary, 1 << 20), ONE_SHOT_SECONDS, f"to empty into {primary}")
    _expect_ok(run, drain, result)
    deadline = time.monotonic() + SETTLE_SECONDS
    empty_twice = 0
    last_relay = time.monotonic()
    while time.monotonic() < deadline:
        truth = oracle.read_truth(run.conn_a, run.cmd.counts)
        left = oracle.read_queue(run.conn_a, run.cmd.queue_table, run.cmd.qid)
        if truth.outbox_cells == 0 and left.entries == 0:
            empty_twice += 1
            if empty_twice >= 2:
                return
        else:
            empty_twice = 0
            if truth.outbox_cells and time.monotonic() - last_relay > 10:
                relay = run.run_to_end("relay", run.cmd.relay(), ONE_SHOT_SECONDS,
                                       f"{truth.outbox_cells} outbox cells left")
                _expect_ok(run, relay, result)
                last_relay = time.monotonic()
        time.sleep(1.0)
    truth = oracle.read_truth(run.conn_a, run.cmd.counts)
    left = oracle.read_queue(run.conn_a, run.cmd.queue_table, run.cmd.qid)
    if truth.outbox_cells or left.entries:  # (empty just now: the checks below look again)
        result.problems.append(f"not empty {SETTLE_SECONDS:.0f} s after the drain: {left.entries} queue entries "
                               f"(e.g. {left.examples}), {truth.outbox_cells} outbox cells")


def _expect_ok(run: ChaosRun, proc, result: QuietResult) -> None:  # noqa: ANN001 - a Proc
    if proc.returncode != 0:
        result.problems.append(f"{proc.name} exit {proc.returncode}: {proc.last_error()}")
        run.log(f"{proc.name} exit {proc.returncode}: {proc.last_error()}")
    else:
        run.log(f"{proc.name} exit 0 after {proc.age():.1f}s{run.result_of(proc)}")


def _check(run: ChaosRun, result: QuietResult) -> None:
    truth = oracle.read_truth(run.conn_a, run.cmd.counts)
    left = oracle.read_queue(run.conn_a, run.cmd.queue_table, run.cmd.qid)
    run.log(f"A: {truth.rows} rows, {len(truth.implied)} index cells implied; queue {left.entries} entries, "
            f"{left.dead_letters} dead letters; outboxes {truth.outbox_cells} cells")
    if left.entries:
        result.problems.append(f"queue holds {left.entries} entries (e.g. {left.examples})")
    if left.dead_letters:
        result.problems.append(f"{left.dead_letters} dead letters (every entry was well formed)")
    if truth.outbox_cells:
        result.problems.append(f"outboxes hold {truth.outbox_cells} cells")
    for dest in run.dests.checked():
        comparison = oracle.compare(truth, run.conn_b, dest.table)
        line = comparison.describe()
        kind = "registered" if dest.registered else "primary"
        result.checked.append(f"{kind} {line}")
        run.log(f"check {kind} {line}")
        if not comparison.exact:
            result.problems.append(line)
            for why in _explain(run, comparison):
                run.log(f"  {why}")
                result.checked.append(f"  {why}")


def _explain(run: ChaosRun, comparison: oracle.Comparison, examples: int = 5) -> list[str]:
    """For a few differing cells, the producers' commits of their word that put or should have removed them."""
    commits = history.read_history(run.logs)
    lines = []
    for (row, _cf, word, _cv), ts in comparison.unexpected[:examples]:
        lines.append("unexpected: " + history.explain(commits, word.decode(), int(row), ts, run.log.began_wall))
    for row, _cf, word, _cv in comparison.missing[:examples]:
        lines.append("missing: " + history.explain(commits, word.decode(), int(row), None, run.log.began_wall))
    for (row, _cf, word, _cv), ts, _v in comparison.future[:examples]:
        lines.append("newer than A: " + history.explain(commits, word.decode(), int(row), ts, run.log.began_wall))
    return lines
