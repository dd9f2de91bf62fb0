"""The chaos run: sets up the queue, the producers' table, the gateway pools and the first destination, then
runs the schedule's phases, each followed by a quiet point, and logs every action.

Every process is a real OS process in a session of its own (:mod:`integration.chaos.processes`); what runs
and what may be killed:

- three producer slots (``producer``): clocks ahead, behind and right (:mod:`integration.chaos.producer`);
  a killed one starts again after the action's ``restart_after``.
- the in-process stream (``stream-local``) into the primary destination, always wanted (restarted after a
  kill), and the Spark stream (``stream-spark``, local[2], with a checkpoint) in the phases that want it.
- one-shot processes: batch drains, bootstraps, ``verify --repair``, full compactions, ``tx relay``, each
  possibly SIGKILLed ``kill_after`` seconds after its start.
- the standalone gateways of A and B (``gateway``): a killed one comes back on its port after a while; at
  least one gateway of each cluster stays up.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from connector.clusters_config import CONFIG_ENV
from connector.queue import QueueConfig
from connector.transactions import RowTransactions
from integration.harness import Clusters

from . import processes
from .commands import Commands
from .destinations import MAX_REGISTERED, Dest, Destinations
from .gateways import GatewayPools
from .processes import RUN_MARKER, Proc, marked_processes
from .quiet import quiet_point
from .report import Log
from .schedule import Action, Phase, ProducerSpec, Schedule

ROOT = Path(__file__).resolve().parents[2]

#: at most this many of a one-shot kind run at once (2 cores): an action beyond it is skipped as busy
LIMITS = {"drain": 2, "verify": 1, "compact": 2, "relay": 1, "bootstrap": 1, "purge": 1}
#: commands stopped by SIGTERM end with one of these (-15: SIGTERM came before the command's handler was set)
STOPPED = (0, 130, 143, -15)
#: kinds that run until told to stop: ending otherwise is an error (and they start again)
LONG_RUNNING = ("producer", "stream-local", "stream-spark")


@dataclass(frozen=True)
class ChaosOptions:
    """What the run works on (the schedule says what happens to it)."""

    words: int = 2000
    buckets: int = 32
    producer_rate: float = 20.0
    keep_going: bool = False  # go on after a failed quiet point (else: stop there)


class ChaosRun:
    def __init__(self, clusters: Clusters, schedule: Schedule, run_dir: Path, options: ChaosOptions = ChaosOptions(),
                 out: TextIO = sys.stdout) -> None:
        self.clusters, self.schedule, self.run_dir, self.options = clusters, schedule, run_dir, options
        self.logs = run_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.log_file = open(run_dir / "chaos.log", "a")  # noqa: SIM115 - closed in run()
        self.log = Log(out, self.log_file)
        tag = f"chaos{schedule.seed % 100000}"
        self.cmd = Commands(queue_table=f"{tag}_queue", qid="cidx", buckets=options.buckets, counts=f"{tag}_counts",
                            words=options.words, producer_rate=options.producer_rate)
        self.queue = QueueConfig(table=self.cmd.queue_table, qid=self.cmd.qid, num_buckets=options.buckets)
        self.dests = Destinations(f"{tag}_index")
        self.pools = GatewayPools(clusters)
        self.procs: list[Proc] = []
        self.names = itertools.count(1)
        self.producer_seeds = itertools.count(schedule.seed * 1000 + 1)
        self.slots: dict[str, Proc | None] = {p.name: None for p in schedule.producers}
        self.timers: list[tuple[float, int, str, Callable[[], None]]] = []
        self.timer_ids = itertools.count()
        self.phase: Phase | None = None
        self.conn_a = clusters["a"].connect()  # the harness's own checks: the launcher's gateways, never killed
        self.conn_b = clusters["b"].connect()
        config = run_dir / "clusters.toml"
        self.env = dict(os.environ, **{CONFIG_ENV: str(config), "PYTHONPATH": str(ROOT),
                                       "PYSPARK_PYTHON": sys.executable, "TMPDIR": str(self._dir("tmp")),
                                       "SPARK_LOCAL_DIRS": str(self._dir("spark-local"))})
        self.env.pop("SPARK_MASTER", None)
        self.marker = f"{schedule.seed}-{os.getpid()}-{time.time_ns()}"
        self.env[RUN_MARKER] = self.marker  # every process of the run, and all they start, carry it

    def _dir(self, name: str) -> Path:
        path = self.run_dir / name
        path.mkdir(exist_ok=True)
        return path

    # --- the run -------------------------------------------------------------------------------------------

    def run(self) -> bool:
        """Set up, run every phase and its quiet point, print the summary; True when the run passed."""
        s = self.schedule
        self.log(f"chaos seed {s.seed}: {s.minutes:g} minutes of faults in {len(s.phases)} phases; run folder "
                 f"{self.run_dir}; times are seconds after unix time {self.log.began_wall:.1f}")
        for line in s.describe().splitlines():
            self.log(f"  {line}")
        try:
            self.setup()
            for phase in s.phases:
                self.fault_phase(phase)
                result = quiet_point(self, phase.index)
                if not result.ok and not self.options.keep_going:
                    self.log("stopping at the first failed quiet point (--keep-going goes on)")
                    break
        except BaseException as exc:
            self.log.error(f"the harness stopped: {type(exc).__name__}: {exc}")
            raise
        finally:
            self.teardown()
            summary = self.log.summary(s.seed, s.minutes, len(s.phases))
            print(summary, file=self.log.out, flush=True)
            print(summary, file=self.log_file, flush=True)
            self.log_file.close()
        return self.log.passed

    def setup(self) -> None:
        self.log("starting the gateway pools (2 standalone gateways for each of A and B)")
        self.pools.start()
        self.pools.write_config(Path(self.env[CONFIG_ENV]))
        proc = self.run_to_end("queue-init", self.cmd.queue_init(), 120)
        if proc.returncode != 0:
            raise RuntimeError(f"queue init failed: {proc.last_error()}")
        RowTransactions(self.conn_a, self.cmd.counts).init()
        step = max(1, self.options.words // 8)  # 8 tablets: a bootstrap has ranges to resume
        splits = [f"word{i:05d}".encode() for i in range(step, self.options.words, step)]
        self.conn_a.add_splits(self.cmd.counts, splits)
        self.conn_b.create_table(self.dests.primary.table, exist_ok=True)
        self.log(f"queue {self.cmd.qid} in {self.cmd.queue_table} ({self.options.buckets} buckets), producers' table "
                 f"{self.cmd.counts} ({self.options.words} words), first destination {self.dests.primary.table}")

    def teardown(self) -> None:
        self.timers.clear()
        for p in self.procs:
            if p.alive() and p.kind in ("stream-local", "stream-spark", "producer"):
                p.sigterm()
        for p in self.procs:
            if p.alive() and p.wait(60) is None:
                p.sigkill()
            if p.alive():
                p.sigkill()
        self.pools.stop()
        self.conn_a.close()
        self.conn_b.close()
        self.check_nothing_left()

    def check_nothing_left(self) -> None:
        """Fail the run if a process it started, or one they started, is still alive once every command has
        ended (a Spark JVM whose driver was SIGKILLed while it started, say); then kill it."""
        deadline = time.monotonic() + 15  # a JVM told by its parent's death takes a moment to exit
        while (left := marked_processes(self.marker)) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid, command in left.items():
            self.log.error(f"a process of this run outlived it: pid {pid}: {command}")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def fault_phase(self, phase: Phase) -> None:
        self.phase = phase
        self.log.phase = phase.index
        self.log(f"phase {phase.index}: {phase.seconds:.0f}s of faults, {len(phase.actions)} actions")
        began = time.monotonic()
        for spec in self.schedule.producers:
            self.start_producer(spec)
        self.ensure_streams()
        for action in phase.actions:
            self.after(began + action.at - time.monotonic(), action.what, lambda a=action: self.act(a))
        end = began + phase.seconds
        while time.monotonic() < end:
            self.run_timers()
            self.reap()
            time.sleep(0.1)
        self.log.phase = -1
        if self.timers:
            self.log(f"faults stop: {len(self.timers)} pending restarts and kills dropped (the quiet point "
                     "restarts what should run)")
        self.timers.clear()

    # --- timers ------------------------------------------------------------------------------------------

    def after(self, delay: float, label: str, fn: Callable[[], None]) -> None:
        heapq.heappush(self.timers, (time.monotonic() + max(0.0, delay), next(self.timer_ids), label, fn))

    def run_timers(self) -> None:
        while self.timers and self.timers[0][0] <= time.monotonic():
            _, _, _, fn = heapq.heappop(self.timers)
            fn()

    # --- processes ---------------------------------------------------------------------------------------

    def start(self, kind: str, argv: list[str], label: str = "", **meta: object) -> Proc:
        name = f"{kind}#{next(self.names)}"
        proc = processes.start(kind, name, argv, self.env, self.logs, ROOT, **meta)
        self.procs.append(proc)
        self.log.starts[kind] += 1
        self.log(f"start {name} pid {proc.pid}" + (f" {label}" if label else ""))
        return proc

    def run_to_end(self, kind: str, argv: list[str], timeout: float, label: str = "") -> Proc:
        """Start a process and wait for its end (SIGKILLed after ``timeout`` s, as a failure)."""
        proc = self.start(kind, argv, label)
        if proc.wait(timeout) is None:
            proc.sigkill()
            self.log.error(f"{proc.name} did not end within {timeout:.0f}s: SIGKILLed ({proc.tail(2)!r})")
        proc.reported = True
        return proc

    def running(self, kind: str) -> list[Proc]:
        return [p for p in self.procs if p.kind == kind and p.alive() and not p.killed and not p.stopping]

    def kill(self, proc: Proc, why: str) -> None:
        age = proc.age()
        n = proc.sigkill()
        self.log.kills[proc.kind] += 1
        self.log(f"SIGKILL {proc.name} ({why}) after {age:.1f}s" + (f", {n} processes" if n > 1 else ""))

    def kill_later(self, proc: Proc, delay: float | None) -> None:
        if delay is None:
            return

        def fire() -> None:
            if proc.alive() and not proc.killed:
                self.kill(proc, f"kill_after {delay:.1f}s")
            elif not proc.killed:
                self.log(f"{proc.name} ended before its kill_after {delay:.1f}s")

        self.after(delay, f"kill {proc.name}", fire)

    def reap(self) -> None:
        """Log the end of every process that ended, and act on it (restarts, a finished bootstrap)."""
        for p in self.procs:
            if p.reported or p.alive():
                continue
            p.reported = True
            rc = p.returncode
            if p.killed:
                self.ended_killed(p)
                continue
            if p.stopping and rc in STOPPED:
                self.log(f"{p.name} stopped (exit {rc})")
                continue
            if rc == 0 and p.kind not in LONG_RUNNING:
                self.log(f"{p.name} exit 0 after {p.age():.1f}s{self.result_of(p)}")
                self.ended_well(p)
                continue
            if p.kind in ("bootstrap", "purge", "verify") and ("lease" in p.tail(20)
                                                                or "is unfinished" in p.tail(20)):
                # one lease per destination table: a bootstrap, a purge and a repair of it refuse each other (and a
                # killed one's lease holds a minute); a purge also refuses an unfinished bootstrap
                self.log(f"{p.name} refused: {p.last_error()[:200]}")
            else:
                self.log.error(f"{p.name} exit {rc} after {p.age():.1f}s: {p.last_error()}")
            self.ended_badly(p)

    @staticmethod
    def result_of(p: Proc) -> str:
        """The interesting fields of a command's JSON summary line, if it printed one."""
        for line in reversed(p.tail(40).splitlines()):
            if line.startswith("{"):
                try:
                    data = json.loads(line)
                except ValueError:
                    return ""
                keys = ("exported", "deleted", "relayed", "differences", "repaired", "in_flight", "final_check",
                        "resumed_ranges", "ranges", "cells")
                return ": " + " ".join(f"{k}={data[k]}" for k in keys if k in data)
        return ""

    def ended_killed(self, p: Proc) -> None:
        if p.kind == "bootstrap":
            dest = p.meta["dest"]
            assert isinstance(dest, Dest)
            self.retry_bootstrap(dest, float(p.meta.get("retry_after", 5.0)))  # type: ignore[arg-type]

    def ended_well(self, p: Proc) -> None:
        if p.kind == "bootstrap":
            dest = p.meta["dest"]
            assert isinstance(dest, Dest)
            if not dest.retired:
                dest.bootstrapped = dest.ready = True
                self.log(f"destination {dest.table} is built: checked at every quiet point from now on")

    def ended_badly(self, p: Proc) -> None:
        if p.kind == "bootstrap":
            dest = p.meta["dest"]
            assert isinstance(dest, Dest)
            self.retry_bootstrap(dest, 10.0)
        elif p.kind == "producer" and self.phase is not None and self.log.phase > 0:
            spec = p.meta["spec"]
            assert isinstance(spec, ProducerSpec)
            self.after(5.0, "restart producer", lambda: self.start_producer(spec))
        elif p.kind in ("stream-local", "stream-spark") and self.log.phase > 0:
            self.after(5.0, f"restart {p.kind}", self.ensure_streams)

    # --- what runs all the time ----------------------------------------------------------------------------

    def start_producer(self, spec: ProducerSpec) -> None:
        current = self.slots[spec.name]
        if current is not None and current.alive() and not current.killed:
            return
        self.slots[spec.name] = self.start("producer", self.cmd.producer(spec, next(self.producer_seeds)),
                                           f"({spec.name}, clock {spec.skew_seconds:+.0f}s)", spec=spec)

    def ensure_streams(self) -> None:
        """The in-process stream into the primary destination runs; the Spark stream runs if the phase wants it."""
        primary = self.dests.primary.table
        if not self.running("stream-local"):
            self.start("stream-local", self.cmd.stream_local(primary), f"into {primary}", dest=primary)
        want_spark = self.phase is not None and self.phase.spark_stream and self.log.phase > 0
        spark = self.running("stream-spark")
        if want_spark and not spark:
            checkpoint = str(self._dir(f"checkpoint-{primary}"))
            self.start("stream-spark", self.cmd.stream_spark(primary, checkpoint), f"into {primary}", dest=primary)
        elif not want_spark:
            for p in spark:
                self.log(f"SIGTERM {p.name}: this phase runs no Spark stream")
                p.sigterm()

    # --- the schedule's actions ----------------------------------------------------------------------------

    def act(self, a: Action) -> None:
        self.log.actions += 1
        handler = getattr(self, "do_" + a.what.replace("-", "_"))
        handler(a)

    def skip(self, a: Action, why: str) -> None:
        self.log.skipped += 1
        self.log(f"{a.what}: skipped ({why})")

    def _victim(self, a: Action, kind: str) -> Proc | None:
        """The running process of ``kind`` that action ``a`` picks; None (the action skipped) when none runs."""
        victims = self.running(kind)
        if not victims:
            self.skip(a, f"no {kind} running")
            return None
        return victims[a.pick % len(victims)]

    def _kill_kind(self, a: Action, kind: str, restart: Callable[[], None]) -> None:
        victim = self._victim(a, kind)
        if victim is not None:
            self.kill(victim, a.what)
            self.after(a.restart_after, f"restart {kind}", restart)

    def do_kill_producer(self, a: Action) -> None:
        victim = self._victim(a, "producer")
        if victim is None:
            return
        spec = victim.meta["spec"]
        assert isinstance(spec, ProducerSpec)
        self.kill(victim, a.what)
        self.after(a.restart_after, "restart producer", lambda: self.start_producer(spec))

    def do_kill_stream_local(self, a: Action) -> None:
        self._kill_kind(a, "stream-local", self.ensure_streams)

    def do_kill_stream_spark(self, a: Action) -> None:
        self._kill_kind(a, "stream-spark", self.ensure_streams)

    def do_kill_bootstrap(self, a: Action) -> None:
        victim = self._victim(a, "bootstrap")
        if victim is None:
            return
        victim.meta["retry_after"] = a.restart_after
        self.kill(victim, a.what)

    def do_kill_gateway(self, a: Action) -> None:
        if self.pools.live_count(a.cluster) < 2:
            self.skip(a, f"only one gateway of {a.cluster.upper()} is up")
            return
        index, g = self.pools.gateway(a.cluster, a.pick)
        if not self.pools.alive(g):
            index, g = self.pools.gateway(a.cluster, a.pick + 1)
        g.kill()
        self.log.kills["gateway"] += 1
        self.log(f"SIGKILL gateway {a.cluster.upper()}#{index} ({g.address})")

        def restart() -> None:
            if not self.pools.alive(g):
                g.start(timeout=180)
                self.log(f"gateway {a.cluster.upper()}#{index} back on {g.address}")

        self.after(a.restart_after, "restart gateway", restart)

    def _busy(self, kind: str) -> bool:
        return len(self.running(kind)) >= LIMITS[kind]

    def do_drain(self, a: Action) -> None:
        if self._busy("drain"):
            return self.skip(a, "busy")
        primary = self.dests.primary.table
        proc = self.start("drain", self.cmd.drain(primary, a.buffer_bytes), f"into {primary}", dest=primary)
        self.kill_later(proc, a.kill_after)

    def do_verify(self, a: Action) -> None:
        targets = self.dests.checked()
        if self._busy("verify") or not targets:
            return self.skip(a, "busy" if targets else "no destination ready")
        dest = targets[a.pick % len(targets)]
        proc = self.start("verify", self.cmd.verify(dest.table), f"--repair of {dest.table}", dest=dest)
        self.kill_later(proc, a.kill_after)

    def _compact(self, a: Action, cluster: str, table: str) -> None:
        if self._busy("compact") or any(p.meta.get("table") == table for p in self.running("compact")):
            return self.skip(a, "busy")
        proc = self.start("compact", self.cmd.compact(cluster, table), f"full compaction of {cluster}/{table}",
                          table=table)
        self.kill_later(proc, a.kill_after)

    def do_compact_a(self, a: Action) -> None:
        self._compact(a, "A", self.cmd.queue_table)

    def do_compact_b(self, a: Action) -> None:
        live = [d for d in self.dests.all if not d.retired]
        if not live:
            return self.skip(a, "no destination fed")
        dest = live[a.pick % len(live)]
        if not self.conn_b.table_exists(dest.table):  # a new primary's first drain creates it
            return self.skip(a, f"{dest.table} not created yet")
        self._compact(a, "B", dest.table)

    def do_purge(self, a: Action) -> None:
        targets = self.dests.checked()
        if self._busy("purge") or not targets:
            return self.skip(a, "busy" if targets else "no destination ready")
        dest = targets[a.pick % len(targets)]
        self.kill_later(self.start("purge", self.cmd.purge(dest.table), f"tombstones of {dest.table}", dest=dest),
                        a.kill_after)

    def do_relay(self, a: Action) -> None:
        if self._busy("relay"):
            return self.skip(a, "busy")
        self.kill_later(self.start("relay", self.cmd.relay()), a.kill_after)

    def do_register(self, a: Action) -> None:
        if self.dests.unbootstrapped():
            return self.skip(a, "a destination is still being built")
        registered = self.dests.registered()
        if len(registered) >= MAX_REGISTERED:
            oldest = registered[0]
            proc = self.run_to_end("register", self.cmd.unregister(oldest.table), 120, f"remove {oldest.table}")
            if proc.returncode != 0:
                self.log.error(f"queue destinations remove {oldest.table} failed: {proc.last_error()}")
                return
            oldest.retired = True
            self.log(f"unregistered {oldest.table}: no longer fed, no longer checked")
        dest = self.dests.new_registered(a.method)
        proc = self.run_to_end("register", self.cmd.register(dest.table), 120, f"add {dest.table}")
        if proc.returncode != 0:
            self.log.error(f"queue destinations add {dest.table} failed: {proc.last_error()}")
            dest.retired = True
            return
        self.start_bootstrap(dest, a.kill_after, a.restart_after)

    def do_new_primary(self, a: Action) -> None:
        if self.dests.unbootstrapped():
            return self.skip(a, "a destination is still being built")
        old, new = self.dests.new_primary(a.method)
        self.log(f"new primary destination {new.table} replaces {old.table}: every drain into {old.table} stops")
        for kind in ("stream-local", "stream-spark", "drain"):
            for p in self.running(kind):
                self.kill(p, f"drains into {old.table} stop")
        for p in self.procs:  # stopping ones too: nothing may export to the old table only, once the new is read
            if p.kind in ("stream-local", "stream-spark", "drain") and p.alive():
                self.kill(p, f"drains into {old.table} stop")
        self.ensure_streams()
        self.start_bootstrap(new, a.kill_after, a.restart_after)

    # --- bootstraps -----------------------------------------------------------------------------------------

    def start_bootstrap(self, dest: Dest, kill_after: float | None = None, retry_after: float = 5.0) -> Proc | None:
        if dest.retired or dest.ready:
            return None
        if any(p.meta.get("dest") is dest for p in self.procs if p.kind == "bootstrap" and p.alive()):
            return None
        dest.attempts += 1
        proc = self.start("bootstrap", self.cmd.bootstrap(dest.table, dest.method),
                          f"into {dest.table} ({'registered' if dest.registered else 'new primary'}, "
                          f"--method {dest.method}, attempt {dest.attempts})", dest=dest, retry_after=retry_after)
        self.kill_later(proc, kill_after)
        return proc

    def retry_bootstrap(self, dest: Dest, delay: float) -> None:
        if self.log.phase > 0:  # in a quiet point, the quiet point runs it again
            self.after(delay, f"bootstrap {dest.table}", lambda: self.start_bootstrap(dest))
