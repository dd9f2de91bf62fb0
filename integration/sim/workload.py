"""The simulation's workload: processes running the real connector code against two simulated clusters.

NEEDS FROM THE WORLD (integration/sim/accumulo.py, gateway.py, transport.py, helper D1's files), used through
:func:`_new_cluster` and :func:`_connect` only, so that a change of their names is one edit here:
- ``SimAccumulo()`` a cluster; ``SimGateway(cluster)`` (or a function ``gateway(cluster)``) its proxy handler;
- ``sim_connection(gateway, name=..., before_call=..., after_call=...)``: a ``Connection``; ``before_call(method)``
  runs before a call is applied (the scheduler's turn and crash), ``after_call(method)`` after it is applied
  (the scheduler raises the lost answer's ``TTransportException`` there);
- the cluster's server clock reads ``time.time()`` when a call is applied (virtual in a run);
- ``unreadableVisibilities`` answering as the real gateway does once the summarizer is configured
  (``configured``: 1, ``files``: the count), else verify and bootstrap refuse the producer table; until it does,
  :func:`_summaries_configured` wraps it.

One schedule: a setup process (no faults) creates the producer table, the queue and the tombstone-mode
destination, draws the schedule's :class:`Swarm` (which kinds of process it runs and how many, fault rates,
slow processes that stall past a purge's grace, rows, values, rounds and pauses), then starts its mix of
processes, each a few steps of real connector code on its own
connections (``sim_connection``): producers (``RowTransactions.run``, with or without their relayer, some of
them waiting for their commit with ``wait_for_seq``), one-shot relays (``relay_table``, as ``tx relay`` or a
batch drain's first step), drains (``relay_sources`` then ``drain_queue``, once or as a stream of rounds; the
translator refuses values marked ``x`` now and then: dead letters), requeues of dead letters, purges of the
destination's tombstones (short grace: virtual time), ``verify --repair``, B's own full compactions, and stray
cells written on B (what a repair has to fix). Sizes are small: three rows, a handful of steps per process. Some
schedules pair a purge and a ``verify --repair`` (with stray cells): both loop for as long as producers commit, so
that repairs run beside purges' graces while drains write tombstones below the watermark.

The ingredients are only drawn, never arranged: which processes run, how many steps, which rows and values,
and the scheduler's interleaving and faults all come from the seed. No scenario is written for a finding; the
swarm only makes each schedule lopsided in its own way, so that rare combinations are common in some.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import importlib.util
import inspect
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from thriftpy2.transport import TTransportException

from connector.accumulo import Connection, Mutation, Range
from connector.accumulo import writer as _writer
from connector.accumulo.options import GatewayOptions
from connector.errors import ConnectorError
from connector.export import AccumuloExporter, SequencedExport
from connector.export.difference import difference
from connector.jobs import LocalEngine, run_drain
from connector.jobs.bootstrap import BootstrapJob, run_bootstrap
from connector.jobs.drain import DrainJob, stream_drain
from connector.queue import DrainSettings, ExportQueue, QueueConfig
from connector.queue.dead_letters import requeue_dead_letters
from connector.queue.destinations import Destination as Registration
from connector.queue.destinations import drain_exporter, register_destination
from connector.queue.drain import drain_queue
from connector.snapshot.bootstrap import BootstrapSettings
from connector.snapshot.functions import snapshot_source
from connector.snapshot.purge import purge_destination
from connector.snapshot.state import LEASE_SECONDS, BootstrapState, destination_id
from connector.snapshot.verify import Destination, verify_destination
from connector.transactions import RowTransactions, queue_watermark, relay_table, wait_for_seq
from connector.transactions.relay import relay_sources

from .scheduler import (
    CODE_UNDER_TEST,
    Choices,
    Crash,
    InlineExecutor,
    Scheduler,
    SimEvent,
    SimFailure,
    SimLock,
    threading_shim,
)

PRODUCER_TABLE = "rows"
DEST_TABLE = "dst"
QUEUE = QueueConfig(table="exports", qid="sq", num_buckets=2)
ROWS = ("r1", "r2", "r3")
#: a producer's values; None deletes the row's cell; an "x" value is refused by the drain's translator now and then
VALUES = ("1", "2", "x3", None)
FAMILY, QUALIFIER = b"f", b"v"
STRAY_PREFIX = "zz-stray"
SNAPSHOT = "integration.sim.workload:snapshot"
#: The bound writers are held to (``connector/accumulo/writer.py``), scaled down in a schedule, in virtual
#: seconds: the writers' timeout, the drains' and relays' hold, and what follows from them. The purge's argument
#: (DESIGN.md, "The purge's bound") rests on their sums alone, so short ones test it as well as the real ones, and a
#: schedule's stalls, pauses, retries and slow processes (a second to a minute) reach past them: purges run, with
#: graces the code accepts, beside writers held too long. Each is set wherever a module of the code has it.
SCALED_BOUNDS = {"WRITER_TIMEOUT_SECONDS": 2.0, "EXPORT_HOLD_SECONDS": 3.0, "RELAY_HOLD_SECONDS": 3.0,
                 "LATE_WRITE_SECONDS": 5.0, "MIN_PURGE_GRACE_SECONDS": 10.0, "DEFAULT_GRACE_SECONDS": 10.0}
#: a purge's grace (virtual seconds): from the shortest the code under test accepts, if it has a shortest (a tree
#: without the bound: short ones)
GRACES = ((1.0, 5.0, 30.0) if not hasattr(_writer, "MIN_PURGE_GRACE_SECONDS")
          else tuple(SCALED_BOUNDS["MIN_PURGE_GRACE_SECONDS"] * k for k in (1.0, 1.5, 3.0)))
#: calls never stalled: the bound assumes that a writer sends what it checked the hold of at once (a process
#: paused between the two writes late, past any bound: DESIGN.md says so); a stall before a ``flush`` is a
#: writer waiting for its rows, which the gateway's timeout bounds (the simulated gateway enforces it)
UNSTALLED = frozenset({"update"})


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


def _summaries_configured(gateway: Any) -> None:
    """Until the simulated gateway says so itself: a table with the visibility summarizer has every file
    summarized (the simulation writes no visibility labels)."""
    answer = gateway.unreadableVisibilities

    def unreadable(secret: str, table: str) -> dict[str, int]:
        counts = dict(answer(secret, table))
        if "configured" not in counts:
            from connector.accumulo.summaries import SUMMARIZER_PROPERTY
            props = gateway.cluster.properties(table)
            counts["configured"] = int(SUMMARIZER_PROPERTY in props)
        return counts
    gateway.unreadableVisibilities = unreadable


def _takes_args(cls: Any) -> bool:
    try:
        return len(_parameters(cls)) > 0
    except (TypeError, ValueError):
        return False


@functools.cache
def _parameters(fn: Any) -> tuple[str, ...]:
    """The names of ``fn``'s parameters, once per callable (a signature costs ~20 us: connections are many)."""
    return tuple(inspect.signature(fn).parameters)


def _connect(gateway: Any, name: str, before: Callable[[str], None] | None,
             after: Callable[[str], None] | None) -> Connection:
    import importlib
    sim_connection = importlib.import_module("integration.sim.transport").sim_connection
    params = _parameters(sim_connection)
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
    known: int | None = None  # the order in which producers learnt their commits' seqs (None: never returned)


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
    refusing: bool = True  # the drains' translator refuses "x" values now and then
    bootstrap_began: set[str] = field(default_factory=set)  # the second destination's bootstraps, by cluster label
    bootstrap_done: set[str] = field(default_factory=set)  # ... and those that finished
    swarm: Swarm | None = None  # drawn by setup
    slow: set[str] = field(default_factory=set)  # the processes that stall often and long (swarm)
    known: int = 0  # commits whose seq a producer learnt so far
    writer_owner: dict[str, str] = field(default_factory=dict)  # B's writer id -> the process that made it

    def __post_init__(self) -> None:
        self.a, self.gateway_a = _new_cluster("A")
        self.b, self.gateway_b = _new_cluster("B")
        for gateway in (self.gateway_a, self.gateway_b):
            _summaries_configured(gateway)
        from .oracle import watch_repairs, watch_tombstones
        watch_tombstones(self)
        watch_repairs(self)

    # connections: one per process and cluster, scheduled (``connect``) or not (``peek``: the oracle's eyes)
    def connect(self, cluster: str) -> Connection:
        gw = self.gateway_a if cluster == "A" else self.gateway_b
        return _connect(gw, cluster, self._before_call, self.sched.after_call)

    def _before_call(self, method: str) -> None:
        """The scheduler's turn and faults, then, for a slow process, now and then a long stall (a process
        paused for longer than a purge's grace: a GC pause, a stopped VM)."""
        self.sched.before_call(method)
        me = self.sched.current()
        if (me is not None and me.process.faults and me.process.name in self.slow and self.swarm is not None
                and method not in UNSTALLED and self.chance(self.swarm.slow_rate, f"slow {me.process.name}")):
            pause = self.pick(SLOW_STALLS, "slow seconds")
            self.sched.note(f"SLOW: paused {pause:g} s before {method}")
            self.sched.sleep(pause)

    def options(self, cluster: str, named: bool = True) -> GatewayOptions:
        """How jobs name a cluster; :func:`simulated_world` makes ``connect()`` of these a simulated connection
        of the calling process."""
        return GatewayOptions(host=f"sim-{cluster.lower()}", port=1, name=cluster if named else "")

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


#: the world whose choices the drains' translator draws from (one schedule runs at a time)
_current: World | None = None
FLAKY = "integration.sim.workload:flaky_translator"
SECOND_TABLE = "dst2"


def flaky_translator(export: SequencedExport) -> Any:
    """The difference translator, refusing (now and then, as drawn) an export whose new value is marked "x": a
    translator bug fixed later (at the swarm's ``fixed_at``, or before the final drains); its entries are
    dead-lettered, then requeued."""
    world = _current
    new = export.value.get("new") if isinstance(export.value, dict) else None
    swarm = world.swarm if world is not None else None
    fixed = swarm is not None and swarm.fixed_at is not None and world is not None and world.sched.now >= swarm.fixed_at
    if world is not None and world.refusing and not fixed and new and str(new[0].get("value", "")).startswith("x") \
            and world.chance(swarm.refuse if swarm else 0.5, "refuse"):
        raise ValueError(f"refused value {new[0]['value']!r}")
    return difference(export)


# --- the processes -------------------------------------------------------------------------------------------


#: the kinds of process a schedule's mix is drawn from
KINDS: list[tuple[str, Callable[[World], None]]] = []  # filled below, once the functions exist
#: virtual seconds a slow process stalls at a call (up to past the longest short grace)
SLOW_STALLS = (1.0, 5.0, 20.0, 60.0)


@dataclass
class Swarm:
    """What a schedule's world is made of, drawn from its seed before anything runs (swarm testing: each
    schedule enables its own subset of process kinds, weights and fault rates, so that combinations a uniform
    mix makes rare, such as many requeues beside waits, or a slow relay beside purges and compactions, are
    common in some schedules). Each draw's first option (the value 0, which shrinking tends to) is the plain
    mix: every kind, weight 1, the default rates."""

    weights: dict[str, int]
    processes: int  # extra processes beside the deployment (two producers and a stream)
    crash_rate: float
    stall_rate: float
    lost_rate: float
    refuse: float  # the chance the translator refuses an "x" value
    wait: float  # the chance a producer waits for its commit
    slow: float  # the chance a process is slow
    slow_rate: float  # a slow process's chance of a long stall at each call
    rounds: int  # how many rounds a looping process (requeue, relay, purge, compact, waiter) may run
    pauses: tuple[float, ...]  # the pauses between its rounds
    rows: tuple[str, ...] = ROWS  # the rows producers write (fewer: more commits meet on one row)
    values: tuple[str | None, ...] = VALUES  # what they write (None: a delete), repeated for weight
    fixed_at: float | None = None  # when (virtual seconds) the translator's bug is fixed (None: at the final drains)
    #: a purge and a ``verify --repair`` started beside the deployment (its stream then runs to the end), each
    #: looping (the swarm's pauses between rounds) for as long as a producer commits, with a stray cell now and then
    #: and a requeue of dead letters: a repair runs beside a purge's grace, with tombstones below the watermark and
    #: cells to repair
    paired: bool = False

    @classmethod
    def draw(cls, world: World) -> Swarm:
        weights = {name: world.pick([1, 0, 0, 3], f"weight {name}") for name, _ in KINDS}
        if not any(weights.values()):
            weights = {name: 1 for name, _ in KINDS}
        return cls(weights=weights, processes=2 + world.draw(10, "processes"),
                   crash_rate=world.pick([0.003, 0.0, 0.01], "crash rate"),
                   stall_rate=world.pick([0.03, 0.01, 0.1], "stall rate"),
                   lost_rate=world.pick([0.02, 0.0, 0.05], "lost rate"),
                   refuse=world.pick([0.5, 0.2, 0.9, 0.0], "refuse rate"),
                   wait=world.pick([0.3, 0.1, 0.8], "wait rate"),
                   slow=world.pick([0.0, 0.2, 0.5], "slow share"),
                   slow_rate=world.pick([0.03, 0.1], "slow rate"),
                   rounds=world.pick([4, 2, 8], "rounds"),
                   pauses=world.pick([(0.0, 0.5, 2.0), (0.2, 1.0, 5.0), (1.0, 5.0, 20.0)], "pauses"),
                   rows=ROWS[:world.pick([3, 1, 2], "rows")],
                   values=world.pick([VALUES, VALUES + (None, None), VALUES + ("x3", "x3")], "values"),
                   fixed_at=world.pick([None, 30.0, 90.0], "translator fixed at"),
                   paired=world.pick([False, True, False], "paired purge and verify"))

    def kind(self, world: World) -> tuple[str, Callable[[World], None]]:
        pool = [(name, fn) for name, fn in KINDS for _ in range(self.weights[name])]
        return world.pick(pool, "kind")  # type: ignore[no-any-return]

    def describe(self) -> str:
        kinds = ",".join(f"{n}x{w}" if w > 1 else n for n, w in self.weights.items() if w)
        return (f"{self.processes} processes of {kinds}; crash {self.crash_rate:g} stall {self.stall_rate:g} "
                f"lost {self.lost_rate:g} refuse {self.refuse:g} wait {self.wait:g} slow {self.slow:g}"
                f"@{self.slow_rate:g} rounds {self.rounds} pauses {self.pauses} rows {len(self.rows)} values "
                f"{'/'.join(str(v) for v in self.values)} fixed at {self.fixed_at}"
                + ("; a purge and a verify paired" if self.paired else ""))


def start(world: World, name: str, fn: Callable[[World], None]) -> None:
    """A process of the mix; slow or not, as drawn."""
    assert world.swarm is not None
    if world.chance(world.swarm.slow, "slow"):
        world.slow.add(name)
    world.sched.process(name, fn, world)


def setup(world: World) -> None:
    """Tables and queue, then the swarm's mix of processes (started from here, inside the run)."""
    a, b = world.peek("A"), world.peek("B")
    ExportQueue(a, QUEUE).init()
    with RowTransactions(a, PRODUCER_TABLE) as txs:
        txs.init()
    a.compact_table(PRODUCER_TABLE, wait=True)  # so that verify knows every file has the visibility summary
    AccumuloExporter(b, DEST_TABLE, "difference").ensure_table(create=True)
    swarm = world.swarm = Swarm.draw(world)
    world.sched.crash_rate, world.sched.stall_rate, world.sched.lost_rate = (
        swarm.crash_rate, swarm.stall_rate, swarm.lost_rate)
    world.did(f"swarm: {swarm.describe()}")
    # the deployment: two producers and a stream; then the swarm's mix of everything else
    for i in range(2):
        start(world, f"producer{i}", producer)
    start(world, "stream", stream)
    for i in range(swarm.processes):
        name, fn = swarm.kind(world)
        start(world, f"{name}{i + 2}", fn)
    if swarm.paired:
        n = swarm.processes + 2
        start(world, f"purge{n}", functools.partial(purge, paired=True))
        start(world, f"verify{n + 1}", functools.partial(verify, paired=True))
        start(world, f"stray{n + 2}", functools.partial(stray_cell, paired=True))
        # dead letters would pin the watermark below every tombstone for the rest of the run: a requeue loops too
        start(world, f"requeue{n + 3}", functools.partial(requeue, paired=True))
        if world.chance(0.5, "slow paired verify"):  # a repair paused for seconds: a purge's grace passes meanwhile
            world.slow.add(f"verify{n + 1}")


def rounds(world: World, label: str) -> range:
    """The rounds of a looping process: 1 up to the swarm's bound."""
    assert world.swarm is not None
    return range(1 + world.draw(world.swarm.rounds, label))


def while_producers(world: World, label: str) -> Iterator[int]:
    """The rounds of a paired process: one, then more for as long as a producer runs (bounded by its rounds)."""
    i = 0
    while i == 0 or any(not p.done for p in world.sched.processes if p.name.startswith("producer")):
        world.sched.note(f"{label}: round {i + 1}")
        yield i
        i += 1


def pause(world: World) -> None:
    """A pause between rounds, from the swarm's set."""
    assert world.swarm is not None
    time.sleep(world.pick(world.swarm.pauses, "pause"))


def guarded(name: str, world: World, fn: Callable[[], None]) -> None:
    """Run one step; the connector's own errors are outcomes (a refusal, a timeout, a lost connection), any
    other exception is a bug the oracle reports."""
    try:
        fn()
    except Crash:
        raise
    except (ConnectorError, TTransportException) as exc:
        # a transport error escaping as itself (not a ConnectorError): the secret check of a new socket whose
        # answer was lost, on the paths that read a reply themselves (Connection.raw_client); it surfaces, so
        # it is an outcome here, counted
        world.did(f"{name}: {type(exc).__name__}: {str(exc)[:120]}")
    except Exception as exc:  # noqa: BLE001 - reported as a failure of the run
        me = world.sched.current()
        if me is not None and me.process.crashed:  # raised by cleanup code the crash unwound through (a finally,
            # an __exit__ finding the state the crash left): a dead process runs no code at all
            raise Crash(f"{me.process.name} crashed") from exc
        world.unexpected.append((name, f"{type(exc).__name__}: {exc}"))


def producer(world: World) -> None:
    conn = world.connect("A")
    delay = world.pick([None, 0.05, 1.0, 3600.0], "relay delay")
    txs = RowTransactions(conn, PRODUCER_TABLE, relay_delay=delay)
    try:
        for _ in rounds(world, "commits"):
            swarm = world.swarm
            row = world.pick(swarm.rows if swarm else ROWS, "row")
            value = world.pick(swarm.values if swarm else VALUES, "value")
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
                    world.known += 1
                    commit.known = world.known
                except ConnectorError as exc:
                    seqs = getattr(exc, "seqs", None)
                    if seqs:
                        commit.seq = seqs[0]
                    raise
                world.did(f"commit {commit.row}={commit.value} seq {commit.seq}")

            guarded("producer", world, run)
            if commit.seq is not None and world.chance(world.swarm.wait if world.swarm else 0.3, "wait"):
                guarded("wait", world, functools.partial(wait_and_check, world, conn, commit.seq))
            pause(world)
    finally:
        guarded("producer close", world, lambda: txs.close(timeout=5.0))


def waiter(world: World) -> None:
    """Waits for the latest commit the producers reported (a reader of its own writes in another process)."""
    conn = world.connect("A")
    for _ in rounds(world, "waits"):
        pause(world)
        known = [c.seq for c in world.commits if c.seq is not None]
        if known:
            guarded("wait", world, functools.partial(wait_and_check, world, conn, max(known)))


def wait_and_check(world: World, conn: Connection, seq: int) -> None:
    """wait_for_seq, then at once (no other process runs meanwhile) the oracle's look at B, for the commits
    known before the wait began."""
    known = world.known
    wait_for_seq(conn, QUEUE, seq, timeout=world.pick([1.0, 5.0, 30.0], "wait timeout"), poll=0.2)
    world.did(f"wait {seq} returned")
    from .oracle import check_wait
    check_wait(world, seq, known)


def one_shot_relay(world: World) -> None:
    """``accumulo-export tx relay``: every outbox cell found, relayed."""
    conn = world.connect("A")
    for _ in rounds(world, "relays"):
        pause(world)
        guarded("relay", world, lambda: world.did(f"relay_table relayed {relay_table(conn, PRODUCER_TABLE).relayed}"))


def drain_job(world: World, **settings: Any) -> DrainJob:
    return DrainJob(source=world.options("A"), dest=world.options("B"), queue=QUEUE, dest_table=DEST_TABLE,
                    settings=DrainSettings(translator=FLAKY, **settings))


def batch_drain(world: World) -> None:
    """A batch drain (``accumulo-export drain``): relays what outboxes hold, then drains the cut."""
    pause(world)

    def run() -> None:
        report = run_drain(LocalEngine(1), drain_job(world), max_rounds=3)
        world.did(f"batch drain exported {report.totals.entries}")
    guarded("drain", world, run)


def queue_drain(world: World) -> None:
    """A drain of the queue's buckets directly (``connector.queue``), into the destination and every registered
    one, with the relay a drain does first."""
    a = world.connect("A")
    exporter = drain_exporter(world.options("A"), QUEUE, world.options("B"), DEST_TABLE, FLAKY, "tombstone")
    pause(world)

    def run() -> None:
        relay_sources(a, QUEUE.table, QUEUE.layout.config_row)
        world.did(f"queue drain exported {drain_queue(a, QUEUE, exporter, max_passes=2).entries}")
    guarded("qdrain", world, run)


def stream(world: World) -> None:
    """A streaming drain (``drain --stream``) for a while; another thread of the process stops it."""
    stop = SimEvent(world.sched)
    # None: until the rest of the mix is done (always beside a paired purge and verify: they need its tombstones)
    seconds = None if world.swarm and world.swarm.paired else world.pick([5.0, 20.0, 60.0, None], "stream seconds")

    def stopper() -> None:
        if seconds is not None:
            time.sleep(seconds)
        else:
            while not all(p.done for p in world.sched.processes
                          if p.name != "setup" and not p.name.startswith("stream")):
                time.sleep(1.0)
        stop.set()
    me = world.sched.current()
    assert me is not None
    world.sched.thread(me.process, f"{me.process.name}/stop", stopper)

    def run() -> None:
        report = stream_drain(LocalEngine(1), drain_job(world, trigger_seconds=world.pick([0.2, 1.0], "trigger"),
                                                        relay_seconds=1.0, sweep_seconds=2.0), stop=stop)  # type: ignore[arg-type]
        world.did(f"stream exported {report.totals.entries}")
    background = _background_purge(world)
    try:
        guarded("stream", world, run)
    finally:
        if background is not None:  # as `drain --stream` stops its purge with the stream
            background.stop()
            for (_, outcome), n in sorted(background.outcomes.items()):
                world.did(f"background purge {outcome} x{n}")


def _background_purge(world: World) -> Any:
    """The purge a stream runs on its own now and then (``--purge-every``), when the code has one, started as
    ``drain --stream`` starts it, with a grace the code accepts; None when the schedule's stream runs without."""
    if importlib.util.find_spec("connector.snapshot.auto_purge") is None:
        return None
    period = world.pick([0.0, 12.0, 30.0], "purge every")
    if not period:
        return None
    from connector.snapshot.auto_purge import BackgroundPurge
    return BackgroundPurge(world.options("A"), QUEUE, world.options("B"), DEST_TABLE, period=period,
                           grace=world.pick(GRACES, "background grace")).start()


def requeue(world: World, paired: bool = False) -> None:
    conn = world.connect("A")
    for _ in while_producers(world, "requeues") if paired else rounds(world, "requeues"):
        pause(world)
        guarded("requeue", world, lambda: world.did(f"requeued {requeue_dead_letters(conn, QUEUE)}"))


def purge(world: World, paired: bool = False) -> None:
    """``accumulo-export purge-tombstones --dest B`` now and then, with a grace the code accepts (virtual seconds);
    ``paired``: from the start, for as long as producers commit."""
    a, b = world.connect("A"), world.connect("B")
    if not paired:
        time.sleep(world.pick([0.0, 15.0, 45.0, 120.0], "purge starts"))  # later: when drains have written tombstones
    for _ in while_producers(world, "purges") if paired else rounds(world, "purges"):
        pause(world)
        grace = world.pick(GRACES, "grace")

        def run(grace: float = grace) -> None:
            report = purge_destination(a, QUEUE, b, DEST_TABLE, "B", grace=grace)
            world.did(f"purge deleted {report.deleted} below {report.horizon}")
        guarded("purge", world, run)


def verify(world: World, paired: bool = False) -> None:
    """``accumulo-export verify --repair``, now and then; ``paired``: for as long as producers commit."""
    a, b = world.connect("A"), world.connect("B")
    for _ in while_producers(world, "verifies") if paired else rounds(world, "verifies"):
        pause(world)

        def run() -> None:
            source = snapshot_source(a, PRODUCER_TABLE, SNAPSHOT)
            report = verify_destination(a, PRODUCER_TABLE, source, QUEUE, Destination(b, DEST_TABLE, "difference"),
                                        repair=True, settle_seconds=world.pick([0.5, 3.0], "settle"))
            world.did(f"verify differences {report.differences} repaired {report.count('repaired')}")
        guarded("verify", world, run)


def bootstrap(world: World) -> None:
    """Register a second destination and bootstrap it (live or bulk), through a named or an unnamed gateway."""
    a, b = world.connect("A"), world.connect("B")
    dest = world.options("B", named=world.chance(0.5, "named"))
    pause(world)

    def run() -> None:
        world.bootstrap_began.add(dest.label)
        name = destination_id(dest.label, SECOND_TABLE)
        AccumuloExporter(b, SECOND_TABLE, "difference").ensure_table(create=True)
        register_destination(a, QUEUE, Registration(name, dest, SECOND_TABLE, "difference"))
        report = run_bootstrap(LocalEngine(1), BootstrapJob(
            source=world.options("A"), dest=dest, queue=QUEUE, table=PRODUCER_TABLE, dest_table=SECOND_TABLE,
            settings=BootstrapSettings(snapshot=SNAPSHOT, translator="difference", create_dest_table=True,
                                       method=world.pick(["live", "bulk"], "method"), settle_seconds=5.0)))
        world.bootstrap_done.add(dest.label)
        world.did(f"bootstrap wrote {report.totals.exports} exports")
    guarded("bootstrap", world, run)


def compact_b(world: World) -> None:
    """B's own full compactions (they drop delete markers and what they hide)."""
    b = world.connect("B")
    for _ in rounds(world, "compactions"):
        pause(world)

        def run() -> None:
            b.compact_table(DEST_TABLE, wait=True)
            world.did("full compaction of B")
        guarded("compact", world, run)


def tablet_servers(world: World) -> None:
    """What the tablet servers do on their own, now and then: minor compactions, partial major compactions (they
    keep delete markers), and a writer's rows sent before its flush (a BatchWriter's buffer filling up)."""
    for _ in range(2 + world.draw(5, "server actions")):
        pause(world)
        cluster, gateway = world.pick([(world.a, world.gateway_a), (world.b, world.gateway_b)], "cluster")
        action = world.pick(["minor", "partial", "send"], "server action")
        if action == "send":
            pending = gateway.pending_writers()
            if pending:
                writer = world.pick(pending, "writer")
                sent = gateway.apply_some(writer, 1 + world.draw(3, "rows"))
                world.did(f"{cluster.name}: writer {writer} sent {sent} rows before its flush")
            continue
        tables = sorted(cluster.tables)
        table = world.pick(tables, "table")
        if action == "minor":
            cluster.flush(table)
            world.did(f"{cluster.name}: minor compaction of {table}")
        else:
            cluster.compact_some(table, lambda n: range(1 + world.draw(n - 1, "files")))  # never all: partial
            world.did(f"{cluster.name}: partial compaction of {table}")


def stray_cell(world: World, paired: bool = False) -> None:
    """A cell on B that no row of A implies (someone wrote into the destination): verify must remove it;
    ``paired``: now and then, for as long as producers commit."""
    b = world.connect("B")
    for _ in while_producers(world, "strays") if paired else range(1):
        pause(world)

        def run() -> None:
            row = f"{STRAY_PREFIX}{world.draw(3, 'stray row')}"
            ts = world.pick([1, int(world.sched.wall() * 1_000_000)], "stray ts")
            with b.batch_writer(DEST_TABLE) as writer:
                writer.add_mutations([Mutation(row).put(FAMILY, QUALIFIER, b"stray", timestamp=ts)])
            world.did(f"stray cell {row}@{ts}")
        guarded("stray", world, run)
        if paired:
            time.sleep(world.pick([5.0, 20.0], "stray pause"))  # a stray now and then, not a flood


KINDS[:] = [("relay", one_shot_relay), ("drain", batch_drain), ("qdrain", queue_drain), ("stream", stream),
            ("requeue", requeue), ("purge", purge), ("verify", verify), ("compact", compact_b), ("stray", stray_cell),
            ("waiter", waiter), ("producer", producer), ("bootstrap", bootstrap), ("tserver", tablet_servers)]


def quiesce(world: World) -> None:
    """After the mix: relay, requeue and drain (nothing refused, no faults) until nothing waits; the second
    destination, if a bootstrap of it began and none finished, is bootstrapped again (an operator's rerun; the
    lease of one that died expires first), and drained after."""
    world.refusing = False
    a = world.peek("A")
    settled = _drain_to_quiescence(world, a)
    unfinished = [name for name in sorted(world.bootstrap_began) if name not in world.bootstrap_done
                  or BootstrapState(a, QUEUE, destination_id(name, SECOND_TABLE)).plan() is not None]
    if unfinished:
        time.sleep(LEASE_SECONDS + 1)  # the lease of a bootstrap or purge that died expires
    for name in unfinished:
        run_bootstrap(LocalEngine(1), BootstrapJob(
            source=world.options("A"), dest=world.options("B", named=name == "B"), queue=QUEUE,
            table=PRODUCER_TABLE, dest_table=SECOND_TABLE,
            settings=BootstrapSettings(snapshot=SNAPSHOT, translator="difference", create_dest_table=True,
                                       settle_seconds=5.0)))
        world.bootstrap_done.add(name)
    if unfinished:
        settled = _drain_to_quiescence(world, a)
    if not settled:
        world.violations.append(Violation("quiescence", "the queue did not empty after five final drains"))


def _drain_to_quiescence(world: World, a: Connection) -> bool:
    for _ in range(5):
        relay_table(a, PRODUCER_TABLE)
        requeue_dead_letters(a, QUEUE)
        run_drain(LocalEngine(1), drain_job(world))
        if queue_watermark(a, QUEUE).waiting == 0:
            return True
    return False


Shown = dict[tuple[bytes, bytes, bytes], tuple[bytes, int]]


def visible(conn: Connection, table: str, row: str | None = None) -> Shown:
    """What a scan of ``table`` shows: (row, cf, cq) -> (value, ts)."""
    rng = Range.exact_row(row.encode()) if row is not None else None
    return {(c.row, c.cf, c.cq): (c.value, c.ts) for c in conn.scan(table, rng)}



# --- one schedule ------------------------------------------------------------------------------------------------

#: fault rates at each call of a process (a crash, a stall, a lost answer)
CRASH_RATE, STALL_RATE, LOST_RATE = 0.003, 0.03, 0.02


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


class PerProcess(dict):  # type: ignore[type-arg]
    """A module's process-wide cache, kept apart for each simulated process (all of them live in this one)."""

    def __init__(self, sched: Scheduler) -> None:
        super().__init__()
        self.sched = sched

    def _key(self, key: Any) -> Any:
        me = self.sched.current()
        return (id(me.process) if me is not None else None, key)

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._key(key), default)

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(self._key(key), value)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self._key(key))

    def pop(self, key: Any, *default: Any) -> Any:
        return super().pop(self._key(key), *default)


@contextlib.contextmanager
def simulated_world(world: World) -> Iterator[None]:
    """While a run lasts: the code under test's threads, events, locks and pools are the scheduler's; a
    ``GatewayOptions`` of the world connects to its simulated cluster, as the calling process; the caches a
    real process keeps for itself are kept per simulated process."""
    import importlib
    sched = world.sched
    shim = threading_shim(sched)
    # every module of the code under test that uses ``threading`` or a pool gets the scheduler's: a real wait
    # (an Event's, a lock's) would block every simulated thread, and the world would stand still while it lasts
    for module in ("connector.snapshot.auto_purge",):
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
    code = [m for key, m in list(sys.modules.items()) if key.startswith(CODE_UNDER_TEST) and m is not None]
    patches: list[tuple[Any, str, Any]] = [(m, "threading", shim) for m in code
                                           if getattr(m, "threading", None) is threading]
    patches += [(m, "ThreadPoolExecutor", InlineExecutor) for m in code
                if getattr(m, "ThreadPoolExecutor", None) is concurrent.futures.ThreadPoolExecutor]
    patches.append((importlib.import_module("connector.queue.drain"), "prefetched", lambda batches, depth=4: batches))
    # process-wide locks (some held across calls: a real lock would hang the run)
    for module, name in (("connector.export.shared", "_exporters_lock"), ("connector.accumulo.options", "_cache_lock"),
                         ("connector.queue.destinations", "_views_lock"), ("connector.queue.feeders", "_lock"),
                         ("connector.queue.compaction", "_requests_lock"), ("connector.accumulo.extensions", "_lock")):
        if hasattr(importlib.import_module(module), name):
            patches.append((importlib.import_module(module), name, SimLock(sched)))
    if hasattr(importlib.import_module("connector.queue.feeders"), "_recorded"):
        patches.append((importlib.import_module("connector.queue.feeders"), "_recorded", set()))
    for module, name in (("connector.accumulo.options", "_connections"), ("connector.export.shared", "_exporters"),
                         ("connector.queue.destinations", "_views")):
        patches.append((importlib.import_module(module), name, PerProcess(sched)))
    for loaded in [m for key, m in sys.modules.items() if key.startswith("connector.") and m is not None]:
        patches.extend((loaded, bound, value) for bound, value in SCALED_BOUNDS.items() if hasattr(loaded, bound))
    destinations = importlib.import_module("connector.queue.destinations")
    patches.append((destinations, "process_name", lambda: f"sim-{_process_name(sched)}"))

    def connect(options: GatewayOptions) -> Connection:
        if not options.host.startswith("sim-"):
            raise SimFailure(f"a connection to {options.host} outside the simulation")
        return world.connect(options.host.removeprefix("sim-").upper())
    patches.append((GatewayOptions, "connect", connect))
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    for module, name, value in patches:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _process_name(sched: Scheduler) -> str:
    me = sched.current()
    return me.process.name if me is not None else "driver"


def run_schedule(seed: int, replay: Sequence[int] | None = None, *, trace: bool = False,
                 watchdog: float = 10.0) -> Outcome:
    """Run one schedule (the seed's, or the choices ``replay`` gives) and check it."""
    from .oracle import check_final
    choices = Choices(seed, replay)
    sched = Scheduler(choices, crash_rate=CRASH_RATE, stall_rate=STALL_RATE, lost_rate=LOST_RATE, watchdog=watchdog,
                      trace=trace, unstalled=UNSTALLED)
    global _current
    world = _current = World(sched)
    with simulated_world(world):
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
                world.violations.append(Violation("error", f"{proc.name} raised {type(proc.error).__name__}: "
                                                           f"{proc.error}"))
    return Outcome(seed, world.violations, list(choices.record), list(choices.labels), sched.stats.turns,
                   sched.stats.trace, world.counts)
