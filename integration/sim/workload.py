"""The simulation's workload: processes running the real connector code against two simulated clusters.

NEEDS FROM THE WORLD (integration/sim/accumulo.py, gateway.py, transport.py, helper D1's files), used through
:func:`_new_cluster` and :func:`_connect` only, so that a change of their names is one edit here:
- ``SimAccumulo()`` a cluster; ``SimGateway(cluster)`` (or a function ``gateway(cluster)``) its proxy handler;
- ``sim_connection(gateway, name=..., before_call=..., after_call=...)``: a ``Connection``; ``before_call(method)``
  runs before a call is applied (the scheduler's turn and crash), ``after_call(method)`` after it is applied
  (the scheduler raises the lost answer's ``TTransportException`` there);
- the cluster's server clock reads ``time.time()`` when a call is applied (virtual in a run).

One schedule: a setup process (no faults) creates the producer table, the queue and the tombstone-mode
destination, then starts a random mix of processes, each a few steps of real connector code on its own
connections (``sim_connection``): producers (``RowTransactions.run``, with or without their relayer, some of
them waiting for their commit with ``wait_for_seq``), one-shot relays (``relay_table``, as ``tx relay`` or a
batch drain's first step), drains (``relay_sources`` then ``drain_queue``, once or as a stream of rounds; the
translator refuses values marked ``x`` now and then: dead letters), requeues of dead letters, purges of the
destination's tombstones (short grace: virtual time), ``verify --repair``, B's own full compactions, and stray
cells written on B (what a repair has to fix). Sizes are small: three rows, a handful of steps per process.

The ingredients are only drawn, never arranged: which processes run, how many steps, which rows and values,
and the scheduler's interleaving and faults all come from the seed.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from connector.accumulo import Connection, Mutation, Range
from connector.errors import ConnectorError
from connector.export import AccumuloExporter, SequencedExport
from connector.export.difference import difference
from connector.queue import ExportQueue, QueueConfig
from connector.queue.dead_letters import requeue_dead_letters
from connector.queue.drain import drain_queue
from connector.snapshot.functions import snapshot_source
from connector.snapshot.purge import purge_destination
from connector.snapshot.verify import Destination, verify_destination
from connector.transactions import RowTransactions, relay_table, wait_for_seq
from connector.transactions.relay import relay_sources

from .scheduler import Choices, Crash, InlineExecutor, Scheduler, SimFailure, threading_shim

PRODUCER_TABLE = "rows"
DEST_TABLE = "dst"
QUEUE = QueueConfig(table="exports", qid="sq", num_buckets=2)
ROWS = ("r1", "r2", "r3")
#: a producer's values; None deletes the row's cell; an "x" value is refused by the drain's translator now and then
VALUES = ("1", "2", "x3", None)
FAMILY, QUALIFIER = b"f", b"v"
STRAY_PREFIX = "zz-stray"
SNAPSHOT = "integration.sim.workload:snapshot"


def cell(row: str, value: str) -> dict[str, str]:
    return {"row": row, "cf": "f", "cq": "v", "value": value}


def update(row: str, old: str | None, new: str | None) -> dict[str, list[dict[str, str]]]:
    """The export of a row's change: its destination cell is the row's value (the difference translator)."""
    return {"old": [cell(row, old)] if old else [], "new": [cell(row, new)] if new else []}


def snapshot(row: bytes, cells: Any) -> list[tuple[str, dict[str, Any]]]:
    """What a row implies ("nothing -> this row"), for verify and bootstrap."""
    value = next((c.value.decode() for c in cells if (c.cf, c.cq) == (FAMILY, QUALIFIER)), None)
    return [(row.decode(), update(row.decode(), None, value))] if value else []


# --- the world (helper D1's modules) -------------------------------------------------------------------------


def _new_cluster(name: str) -> tuple[Any, Any]:
    """A simulated cluster and its gateway."""
    import importlib
    sim_accumulo = importlib.import_module("integration.sim.accumulo")
    sim_gateway = importlib.import_module("integration.sim.gateway")
    cluster = sim_accumulo.SimAccumulo(name) if _takes_args(sim_accumulo.SimAccumulo) else sim_accumulo.SimAccumulo()
    make = getattr(sim_gateway, "SimGateway", None) or getattr(sim_gateway, "Gateway", None) or sim_gateway.gateway
    return cluster, make(cluster)


def _takes_args(cls: Any) -> bool:
    try:
        return len(inspect.signature(cls).parameters) > 0
    except (TypeError, ValueError):
        return False


def _connect(gateway: Any, name: str, before: Callable[[str], None] | None,
             after: Callable[[str], None] | None) -> Connection:
    import importlib
    sim_connection = importlib.import_module("integration.sim.transport").sim_connection
    params = inspect.signature(sim_connection).parameters
    kwargs: dict[str, Any] = {"name": name}
    if before is not None:
        kwargs["before_call"] = before
    if after is not None:
        for key in ("after_call", "after", "lose_answer"):
            if key in params:
                kwargs[key] = after
                break
    return sim_connection(gateway, **kwargs)


# --- what the oracle needs to know ---------------------------------------------------------------------------


@dataclass
class Commit:
    """A producer's commit as the producer knows it: ``seq`` None when its outcome is unknown (a crash or an
    error after the commit may have applied)."""

    row: str
    value: str | None
    seq: int | None


@dataclass
class Violation:
    invariant: str
    detail: str


@dataclass
class World:
    """Two clusters, the run's scheduler, and what the oracle is told as the run goes."""

    sched: Scheduler
    a: Any = None
    b: Any = None
    gateway_a: Any = None
    gateway_b: Any = None
    commits: list[Commit] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    unexpected: list[tuple[str, str]] = field(default_factory=list)  # (process, error) of errors nobody expects
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.a, self.gateway_a = _new_cluster("A")
        self.b, self.gateway_b = _new_cluster("B")

    # connections: one per process and cluster, scheduled (``connect``) or not (``peek``: the oracle's eyes)
    def connect(self, cluster: str) -> Connection:
        gw = self.gateway_a if cluster == "A" else self.gateway_b
        return _connect(gw, cluster, self.sched.before_call, self.sched.after_call)

    def peek(self, cluster: str) -> Connection:
        return _connect(self.gateway_a if cluster == "A" else self.gateway_b, cluster, None, None)

    def draw(self, n: int, label: str) -> int:
        return self.sched.choices.draw(n, label)

    def pick(self, options: Any, label: str) -> Any:
        return self.sched.choices.pick(options, label)

    def chance(self, p: float, label: str) -> bool:
        return self.sched.choices.chance(p, label)

    def did(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        self.sched.note(what)


class FlakyTranslator:
    """The difference translator, refusing (now and then, as drawn) an export whose new value is marked "x": a
    translator bug fixed later; its entries are dead-lettered and requeued."""

    def __init__(self, world: World, refusing: bool = True) -> None:
        self.world, self.refusing = world, refusing

    def __call__(self, export: SequencedExport) -> Any:
        new = export.value.get("new") if isinstance(export.value, dict) else None
        if self.refusing and new and str(new[0].get("value", "")).startswith("x") \
                and self.world.chance(0.5, "refuse"):
            raise ValueError(f"refused value {new[0]['value']!r}")
        return difference(export)


# --- the processes -------------------------------------------------------------------------------------------


def setup(world: World) -> None:
    """Tables and queue, then the random mix of processes (started from here, inside the run)."""
    a, b = world.peek("A"), world.peek("B")
    ExportQueue(a, QUEUE).init()
    RowTransactions(a, PRODUCER_TABLE).init()
    AccumuloExporter(b, DEST_TABLE, "difference").ensure_table(create=True)
    for i in range(2):
        world.sched.process(f"producer{i}", producer, world)
    kinds = [("relay", one_shot_relay), ("drain", drain_once), ("stream", stream), ("requeue", requeue),
             ("purge", purge), ("verify", verify), ("compact", compact_b), ("stray", stray_cell),
             ("waiter", waiter), ("producer", producer)]
    for i in range(2 + world.draw(5, "processes")):
        name, fn = world.pick(kinds, "kind")
        world.sched.process(f"{name}{i + 2}", fn, world)


def guarded(name: str, world: World, fn: Callable[[], None]) -> None:
    """Run one step; the connector's own errors are outcomes (a refusal, a timeout, a lost connection), any
    other exception is a bug the oracle reports."""
    try:
        fn()
    except Crash:
        raise
    except ConnectorError as exc:
        world.did(f"{name}: {type(exc).__name__}")
    except Exception as exc:  # noqa: BLE001 - reported as a failure of the run
        world.unexpected.append((name, f"{type(exc).__name__}: {exc}"))


def producer(world: World) -> None:
    conn = world.connect("A")
    delay = world.pick([None, 0.05, 1.0, 3600.0], "relay delay")
    txs = RowTransactions(conn, PRODUCER_TABLE, relay_delay=delay)
    try:
        for _ in range(1 + world.draw(4, "commits")):
            row, value = world.pick(ROWS, "row"), world.pick(VALUES, "value")
            commit = Commit(row, value, None)
            world.commits.append(commit)

            def change(tx: Any, row: str = row, value: str | None = value) -> None:
                old = tx.get(FAMILY, QUALIFIER, default=None)
                old_value = old.decode() if old else None
                if value is None:
                    tx.delete(FAMILY, QUALIFIER)
                else:
                    tx.put(FAMILY, QUALIFIER, value.encode())
                tx.export(QUEUE, row, update(row, old_value, value))

            def run(commit: Commit = commit, change: Any = change) -> None:
                try:
                    commit.seq = txs.run(commit.row, change)
                except ConnectorError as exc:
                    seqs = getattr(exc, "seqs", None)
                    if seqs:
                        commit.seq = seqs[0]
                    raise
                world.did(f"commit {commit.row}={commit.value} seq {commit.seq}")

            guarded("producer", world, run)
            if commit.seq is not None and world.chance(0.3, "wait"):
                guarded("wait", world, functools.partial(wait_and_check, world, conn, commit.seq))
            time.sleep(world.pick([0.0, 0.1, 1.0, 3.0], "pause"))
    finally:
        guarded("producer close", world, lambda: txs.close(timeout=5.0))


def waiter(world: World) -> None:
    """Waits for the latest commit the producers reported (a reader of its own writes in another process)."""
    conn = world.connect("A")
    for _ in range(1 + world.draw(3, "waits")):
        time.sleep(world.pick([0.1, 0.5, 2.0], "pause"))
        known = [c.seq for c in world.commits if c.seq is not None]
        if known:
            guarded("wait", world, functools.partial(wait_and_check, world, conn, max(known)))


def wait_and_check(world: World, conn: Connection, seq: int) -> None:
    """wait_for_seq, then at once (no other process runs meanwhile) the oracle's look at B."""
    wait_for_seq(conn, QUEUE, seq, timeout=world.pick([1.0, 5.0], "wait timeout"), poll=0.2)
    world.did(f"wait {seq} returned")
    from .oracle import check_wait
    check_wait(world, seq)


def one_shot_relay(world: World) -> None:
    conn = world.connect("A")
    for _ in range(1 + world.draw(3, "relays")):
        time.sleep(world.pick([0.0, 0.5, 2.0], "pause"))
        guarded("relay", world, lambda: world.did(f"relay_table relayed {relay_table(conn, PRODUCER_TABLE).relayed}"))


def _drain(world: World, a: Connection, exporter: AccumuloExporter) -> None:
    relay_sources(a, QUEUE.table, QUEUE.layout.config_row)  # a batch drain's first step
    stats = drain_queue(a, QUEUE, exporter, max_passes=2)
    world.did(f"drain exported {stats.entries}")


def drain_once(world: World) -> None:
    a, b = world.connect("A"), world.connect("B")
    exporter = AccumuloExporter(b, DEST_TABLE, FlakyTranslator(world))
    time.sleep(world.pick([0.0, 0.5, 2.0], "pause"))
    guarded("drain", world, lambda: _drain(world, a, exporter))


def stream(world: World) -> None:
    a, b = world.connect("A"), world.connect("B")
    exporter = AccumuloExporter(b, DEST_TABLE, FlakyTranslator(world))
    for _ in range(2 + world.draw(6, "rounds")):
        guarded("stream", world, lambda: _drain(world, a, exporter))
        time.sleep(world.pick([0.2, 1.0], "trigger"))


def requeue(world: World) -> None:
    conn = world.connect("A")
    for _ in range(1 + world.draw(3, "requeues")):
        time.sleep(world.pick([0.0, 0.5, 2.0], "pause"))
        guarded("requeue", world, lambda: world.did(f"requeued {requeue_dead_letters(conn, QUEUE)}"))


def purge(world: World) -> None:
    a, b = world.connect("A"), world.connect("B")
    time.sleep(world.pick([0.0, 1.0, 3.0], "pause"))
    grace = world.pick([0.5, 2.0, 5.0], "grace")

    def run() -> None:
        report = purge_destination(a, QUEUE, b, DEST_TABLE, "B", grace=grace)
        world.did(f"purge deleted {report.deleted} below {report.horizon}")
    guarded("purge", world, run)


def verify(world: World) -> None:
    a, b = world.connect("A"), world.connect("B")
    time.sleep(world.pick([0.0, 1.0, 3.0], "pause"))

    def run() -> None:
        source = snapshot_source(a, PRODUCER_TABLE, SNAPSHOT)
        report = verify_destination(a, PRODUCER_TABLE, source, QUEUE, Destination(b, DEST_TABLE, "difference"),
                                    repair=True, settle_seconds=world.pick([0.5, 3.0], "settle"))
        world.did(f"verify differences {report.differences} repaired {report.count('repaired')}")
    guarded("verify", world, run)


def compact_b(world: World) -> None:
    b = world.connect("B")
    for _ in range(1 + world.draw(3, "compactions")):
        time.sleep(world.pick([0.2, 1.0, 3.0], "pause"))
        def run() -> None:
            b.compact_table(DEST_TABLE, wait=True)
            world.did("full compaction of B")
        guarded("compact", world, run)


def stray_cell(world: World) -> None:
    """A cell on B that no row of A implies (someone wrote into the destination): verify must remove it."""
    b = world.connect("B")
    time.sleep(world.pick([0.0, 1.0], "pause"))

    def run() -> None:
        row = f"{STRAY_PREFIX}{world.draw(3, 'stray row')}"
        ts = world.pick([1, int(world.sched.wall() * 1_000_000)], "stray ts")
        with b.batch_writer(DEST_TABLE) as writer:
            writer.add_mutations([Mutation(row).put(FAMILY, QUALIFIER, b"stray", timestamp=ts)])
        world.did(f"stray cell {row}@{ts}")
    guarded("stray", world, run)


def quiesce(world: World) -> None:
    """After the mix: relay, requeue and drain (nothing refused, no faults) until nothing waits."""
    a, b = world.peek("A"), world.peek("B")
    exporter = AccumuloExporter(b, DEST_TABLE, FlakyTranslator(world, refusing=False))
    for _ in range(5):
        relay_table(a, PRODUCER_TABLE)
        requeue_dead_letters(a, QUEUE)
        drain_queue(a, QUEUE, exporter)
        from connector.transactions import queue_watermark
        if queue_watermark(a, QUEUE).waiting == 0:
            return
    world.violations.append(Violation("quiescence", "the queue did not empty after five final drains"))


Shown = dict[tuple[bytes, bytes, bytes], tuple[bytes, int]]


def visible(conn: Connection, table: str, row: str | None = None) -> Shown:
    """What a scan of ``table`` shows: (row, cf, cq) -> (value, ts)."""
    rng = Range.exact_row(row.encode()) if row is not None else None
    return {(c.row, c.cf, c.cq): (c.value, c.ts) for c in conn.scan(table, rng)}



# --- one schedule ------------------------------------------------------------------------------------------------

#: fault rates at each call of a process (a crash, a lost answer)
CRASH_RATE, LOST_RATE = 0.01, 0.02


@dataclass
class Outcome:
    """One schedule's end: the invariants it broke (none: it passed), its choices and what it did."""

    seed: int
    violations: list[Violation]
    choices: list[int]
    labels: list[str]
    turns: int
    trace: list[Any]
    counts: dict[str, int]

    @property
    def failed(self) -> bool:
        return bool(self.violations)


@contextlib.contextmanager
def simulated_threads(sched: Scheduler) -> Iterator[None]:
    """The code under test's threads, events, locks and pools become the scheduler's while a run lasts."""
    import connector.jobs.local
    import connector.jobs.rounds
    import connector.queue.drain
    import connector.queue.marks
    import connector.snapshot.state
    import connector.snapshot.verify
    import connector.transactions.relay
    import connector.transactions.relayer
    shim = threading_shim(sched)
    patches: list[tuple[Any, str, Any]] = [
        (connector.transactions.relayer, "threading", shim), (connector.transactions.relay, "threading", shim),
        (connector.snapshot.state, "threading", shim), (connector.snapshot.verify, "threading", shim),
        (connector.snapshot.verify, "ThreadPoolExecutor", InlineExecutor),
        (connector.queue.marks, "ThreadPoolExecutor", InlineExecutor),
        (connector.jobs.local, "ThreadPoolExecutor", InlineExecutor), (connector.jobs.local, "threading", shim),
        (connector.jobs.rounds, "threading", shim),
        (connector.queue.drain, "prefetched", lambda batches, depth=4: batches)]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    for module, name, value in patches:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def run_schedule(seed: int, replay: Sequence[int] | None = None, *, trace: bool = False,
                 watchdog: float = 10.0) -> Outcome:
    """Run one schedule (the seed's, or the choices ``replay`` gives) and check it."""
    from .oracle import check_final
    choices = Choices(seed, replay)
    sched = Scheduler(choices, crash_rate=CRASH_RATE, lost_rate=LOST_RATE, watchdog=watchdog, trace=trace)
    world = World(sched)
    with simulated_threads(sched):
        sched.process("setup", setup, world, faults=False)
        try:
            sched.run()
            if not world.violations:
                sched.process("quiesce", quiesce, world, faults=False)
                sched.run()
                for proc in sched.processes:
                    if proc.name == "quiesce" and proc.error is not None:
                        world.unexpected.append(("quiesce", f"{type(proc.error).__name__}: {proc.error}"))
                check_final(world)
        except SimFailure as exc:
            world.violations.append(Violation("simulation", str(exc)))
        for proc in sched.processes:
            if proc.error is not None and proc.name != "quiesce":
                world.unexpected.append((proc.name, f"{type(proc.error).__name__}: {proc.error}"))
                world.violations.append(Violation("error", f"{proc.name} raised {type(proc.error).__name__}: "
                                                           f"{proc.error}"))
    return Outcome(seed, world.violations, list(choices.record), list(choices.labels), sched.stats.turns,
                   sched.stats.trace, world.counts)
