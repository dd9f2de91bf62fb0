"""A deterministic cooperative scheduler: the simulation's processes take turns at every client call and sleep.

Each simulated thread is a greenlet on the thread that calls :meth:`Scheduler.run`, so handing the baton on is a
switch of Python stacks, never a switch of OS threads. A thread hands the baton back at every client call
(:meth:`Scheduler.before_call`, the transport's hook), at every ``time.sleep`` and whenever it waits on a
:class:`SimEvent` or joins a :class:`SimThread`; the scheduler then picks the next runnable thread with a choice
drawn from :class:`Choices`. Time is virtual while a run lasts: ``time.monotonic``, ``time.time``, ``time.sleep``
(and their ``_ns`` forms, ``perf_counter``) called from a simulated thread read and advance the scheduler's clock;
any other thread keeps the real ones. ``threading.local`` storage is kept per simulated thread (:class:`SimLocal`),
as it is per thread in a real process.

Faults, drawn from the same choices at a call: a **crash** (the process dies at the call: :class:`Crash`, a
``BaseException``, unwinds every thread of it, no call of it is applied any more, its memory is gone), a
**stall** (the call waits some virtual seconds before it is applied: a paused process, a slow network) and a
**lost answer** (the call is applied, then the client sees a transport error: :meth:`after_call` raises it).

Every choice (which thread runs, whether a fault happens, whatever the workload draws) goes through one
:class:`Choices`, which records the list of values; a run given that list replays exactly, and a shortened or
simplified list still runs (values past its end are 0, the simplest: the first runnable thread, no fault). A
thread that blocks on something the scheduler cannot see (a real lock, a real ``threading.Event``) would hang
the run: a real-time watchdog interrupts it (a signal to the main thread) and reports it as :class:`Deadlock`,
naming the thread and where it blocked.
"""

from __future__ import annotations

import _signal
import os
import random
import secrets
import signal
import sys
import threading
import time
import traceback
import types
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import greenlet
from thriftpy2.transport import TTransportException

#: the virtual wall clock's start (time.time() in a run), and the monotonic clock's
EPOCH = 1_800_000_000.0
MONOTONIC_START = 1_000_000.0  # a host up for 11 days: code may take 0.0 for "long ago"
#: virtual seconds each turn takes, so that a loop of calls without a sleep still sees time pass
TURN_COST = 0.001
#: virtual seconds a stalled call waits before it is applied (a paused process, a slow network)
STALLS = (0.5, 2.0, 10.0, 30.0)
#: how far a draw's value range goes for a yes/no chance (probabilities are multiples of 1/CHANCE_RANGE)
CHANCE_RANGE = 1000
#: the signal the watchdog sends the main thread to interrupt a simulated thread blocked outside the scheduler
WATCHDOG_SIGNAL = signal.SIGUSR2
_real_monotonic = time.monotonic  # the watchdog's clock, whatever a run patches
_get_ident = threading.get_ident
_INF = float("inf")
_RealLocal = threading.local
#: the modules of the code under test, whose module-level ``threading.local`` objects a run makes per simulated
#: thread (one made during a run is a :class:`SimLocal` wherever it is made)
CODE_UNDER_TEST = ("connector.",)


class Crash(BaseException):
    """The process died here: raised in each of its threads, never caught by the code under test's
    ``except Exception``; no call of the process is applied after it."""


class SimFailure(Exception):
    """The simulation itself could not go on (not an invariant of the code under test)."""


class Deadlock(SimFailure):
    """A thread blocked on something the scheduler cannot see, or every thread waits for another."""


class _Interrupted(BaseException):
    """Raised by the watchdog's signal in a simulated thread blocked outside the scheduler."""


class Choices:
    """Every choice of a run, drawn from ``random.Random(seed)`` or replayed from a list.

    ``draw(n)`` gives a value in ``[0, n)``; a choice with one option draws nothing. Replaying, a value past the
    list's end is 0 and a value too large is clamped, so any edited list still runs (the shrinker relies on
    that). ``record`` holds the values drawn, ``labels`` what each was for."""

    def __init__(self, seed: int, replay: Sequence[int] | None = None) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._below = self._rng._randbelow  # type: ignore[attr-defined]  # what randrange(n) returns for an n > 0, without its argument checks
        #: what _below draws from, for draw() to inline it (the same values); None if _below is another
        self._bits = self._rng.getrandbits if getattr(self._below, "__func__", None) is getattr(
            random.Random, "_randbelow_with_getrandbits", ()) else None
        self._replay = list(replay) if replay is not None else None
        self.record: list[int] = []
        self.labels: list[str] = []

    def draw(self, n: int, label: str = "") -> int:
        if n <= 1:
            return 0
        if self._replay is not None:
            i = len(self.record)
            value = min(self._replay[i], n - 1) if i < len(self._replay) else 0
        elif (bits := self._bits) is not None:  # self._below(n), inlined: a draw at every turn and call
            k = n.bit_length()
            value = bits(k)
            while value >= n:
                value = bits(k)
        else:
            value = self._below(n)
        self.record.append(value)
        self.labels.append(label)
        return value

    def chance(self, probability: float, label: str = "") -> bool:
        """True with ``probability``; the value 0 always means no (the simplest)."""
        if probability <= 0:
            return False
        return self.draw(CHANCE_RANGE, label) >= CHANCE_RANGE - round(probability * CHANCE_RANGE)

    def pick(self, options: Sequence[Any], label: str = "") -> Any:
        return options[self.draw(len(options), label)]


class Process:
    """One simulated process: its threads die together when it crashes."""

    def __init__(self, scheduler: Scheduler, name: str, faults: bool) -> None:
        self.scheduler, self.name, self.faults = scheduler, name, faults
        self.threads: list[SimThread] = []
        self.crashed = False
        self.crashed_at = ""  # the call it died at
        self.exited = False  # its main thread returned: the process ended, its other threads with it
        self.fault_labels = (f"crash {name}", f"stall {name}", f"lose {name}")  # its choices' labels at a call

    @property
    def done(self) -> bool:
        return all(t.done for t in self.threads)

    @property
    def error(self) -> BaseException | None:
        """The first exception other than a crash that ended one of its threads."""
        return next((t.error for t in self.threads if t.error is not None), None)

    @property
    def result(self) -> Any:
        return self.threads[0].result if self.threads else None

    def __repr__(self) -> str:
        return f"Process({self.name!r}{', crashed' if self.crashed else ''})"


class SimThread:
    """A thread of a simulated process (a greenlet), run only while it holds the baton."""

    def __init__(self, scheduler: Scheduler, process: Process, name: str, fn: Callable[[], Any]) -> None:
        self.scheduler, self.process, self.name, self.fn = scheduler, process, name, fn
        self.glet: greenlet.greenlet | None = None  # made when it first runs
        self.done = False
        self.wake = 0.0  # runnable once the virtual clock reaches it (inf: waits for an event)
        self.result: Any = None
        self.error: BaseException | None = None
        self.error_trace = ""
        self.crashed = False
        self.lose_answer = False  # the call being applied loses its answer
        self.joiners: list[SimThread] = []

    @property
    def started(self) -> bool:
        return self.glet is not None

    def __repr__(self) -> str:
        return f"SimThread({self.name!r})"

    def _main(self) -> None:
        """The greenlet's body; returning switches back to the scheduler (its parent)."""
        sched = self.scheduler
        try:
            if self.process.crashed or sched._stopping:
                raise Crash(self.name)
            self.result = self.fn()
        except Crash:
            self.crashed = True
        except BaseException as exc:  # noqa: BLE001 - recorded: the workload and the oracle judge it
            if self.process.crashed:  # raised by what the crash's unwinding ran: a dead process runs nothing
                self.crashed = True
                return
            self.error = exc
            self.error_trace = traceback.format_exc()
        finally:
            self.done = True
            if self is self.process.threads[0]:
                self.process.exited = True  # as a process exits when its main thread returns (daemons die)
                for other in self.process.threads[1:]:
                    other.wake = min(other.wake, sched.now)
            for joiner in self.joiners:
                joiner.wake = min(joiner.wake, sched.now)


#: the runs being watched, with what the watching thread saw of each: (turns, since when)
_watched: dict[Scheduler, tuple[int, float]] = {}
_watching: threading.Thread | None = None
_real_sleep = time.sleep


def _start_watching() -> None:
    global _watching
    if _watching is not None and _watching.is_alive():
        return

    def watch() -> None:
        while True:
            _real_sleep(0.5)
            for sched, (seen, since) in list(_watched.items()):
                if sched._watched:
                    _watched[sched] = sched._watch(seen, since)
                else:
                    _watched.pop(sched, None)

    _watching = threading.Thread(target=watch, name="sim-watchdog", daemon=True)
    _watching.start()


def _install_interrupt() -> None:
    """The watchdog signal's handler, installed once for good (a late signal finds it and does nothing): it
    interrupts the main thread when a watched run is blocked."""
    if _signal.getsignal(WATCHDOG_SIGNAL) is _interrupt:  # not signal.getsignal: it tries an enum of the handler
        return
    signal.signal(WATCHDOG_SIGNAL, _interrupt)


def _interrupt(signum: int, frame: Any) -> None:
    blocked = next((s._blocked for s in list(_watched) if s._watched and s._blocked is not None), None)
    if blocked is not None:
        raise _Interrupted(blocked)


@dataclass
class Event:
    """One line of a run's trace."""

    turn: int
    now: float
    thread: str
    what: str


@dataclass
class RunStats:
    turns: int = 0
    calls: int = 0
    crashes: int = 0
    stalls: int = 0
    lost_answers: int = 0
    overrun: bool = False
    trace: list[Event] = field(default_factory=list)


class Scheduler:
    """Runs processes deterministically (see the module's description).

    ``crash_rate``, ``stall_rate`` and ``lost_rate``: the chance, at each call of a process started with
    ``faults=True``, that it dies there, that the call waits a while (:data:`STALLS`) before it is applied, or
    that the call's answer is lost; a call named in ``unstalled`` is never stalled. ``watchdog``: real seconds a
    turn may take before the thread is reported as blocked outside the scheduler. ``max_turns``: after that many
    turns of one :meth:`run` every process is stopped (crashed) and the run ends (``stats.overrun``). ``trace``:
    keep a trace of every turn (for printing)."""

    def __init__(self, choices: Choices, *, crash_rate: float = 0.0, lost_rate: float = 0.0, stall_rate: float = 0.0,
                 watchdog: float = 10.0, max_turns: int = 20_000, trace: bool = False,
                 unstalled: frozenset[str] = frozenset()) -> None:
        self.choices = choices
        self.crash_rate, self.lost_rate, self.stall_rate = crash_rate, lost_rate, stall_rate
        self.unstalled = unstalled
        self.watchdog, self.max_turns, self.tracing = watchdog, max_turns, trace
        self.now = 0.0  # virtual seconds since the run began
        self.processes: list[Process] = []
        self.threads: list[SimThread] = []
        self._live: list[SimThread] = []  # the threads not done, in the order they were made (as in self.threads)
        self.stats = RunStats()
        self._running: SimThread | None = None  # the simulated thread holding the baton
        self._hub: greenlet.greenlet | None = None  # the scheduler's own greenlet while run() lasts
        self._hub_ident: int | None = None  # ... and its OS thread
        self._blocked: str | None = None  # what the watchdog found blocked outside the scheduler
        self._on_main = False  # the run is on the main thread (the watchdog's signal can interrupt it)
        self._watched = False  # the watching thread watches this run
        self._stopping = False
        self._abandoned = False  # a deadlock ended the run: the threads let go die without handing back
        self._values = random.Random(choices.seed ^ 0x5EED)  # tokens and ids: deterministic, not choices
        self._budget = 0  # the turn at which the current run() stops every thread

    # --- building the run ------------------------------------------------------------------------------

    def process(self, name: str, fn: Callable[..., Any], *args: Any, faults: bool = True) -> Process:
        """A new process running ``fn(*args)`` on its main thread (from the driver, or from a simulated thread:
        it becomes runnable at once)."""
        proc = Process(self, name, faults)
        self.processes.append(proc)
        self.thread(proc, name, lambda: fn(*args))
        return proc

    def thread(self, process: Process, name: str, fn: Callable[[], Any]) -> SimThread:
        t = SimThread(self, process, name, fn)
        t.wake = self.now
        process.threads.append(t)
        self.threads.append(t)
        self._live.append(t)
        return t

    def current(self) -> SimThread | None:
        """The simulated thread calling, or None for any other thread."""
        running = self._running
        return running if running is not None and _get_ident() == self._hub_ident else None

    # --- hooks called by the simulated threads ----------------------------------------------------------

    def before_call(self, method: str) -> None:
        """A client call is about to be applied: let another thread run first, then maybe die here."""
        t = self._running  # self.current(), inlined: every call of the run comes here
        if t is None or _get_ident() != self._hub_ident:
            return
        self._check_alive(t)
        self._turn(t, self.now)
        proc = t.process
        self.stats.calls += 1
        if not proc.faults:
            if self.tracing:
                self._note(t, method)
            return
        crash_label, stall_label, lose_label = proc.fault_labels
        if self.choices.chance(self.crash_rate, crash_label):
            proc.crashed, proc.crashed_at = True, method
            self.stats.crashes += 1
            self._note(t, f"CRASH at {method}")
            raise Crash(f"{proc.name} crashed at {method}")
        if method not in self.unstalled and self.choices.chance(self.stall_rate, stall_label):
            pause = self.choices.pick(STALLS, "stall seconds")
            self._note(t, f"STALLED {pause:g} s before {method}")
            self.stats.stalls += 1
            self._turn(t, self.now + pause)
        if self.choices.chance(self.lost_rate, lose_label):
            t.lose_answer = True
            self._note(t, f"{method} (answer lost)")
        elif self.tracing:
            self._note(t, method)

    def after_call(self, method: str) -> None:
        """The call was applied: raise the transport error of a lost answer if one was chosen."""
        t = self._running  # self.current(), inlined
        if t is not None and t.lose_answer and _get_ident() == self._hub_ident:
            t.lose_answer = False
            self.stats.lost_answers += 1
            raise TTransportException(TTransportException.END_OF_FILE, f"simulated lost answer to {method}")

    def sleep(self, seconds: float) -> None:
        t = self.current()
        assert t is not None
        self._check_alive(t)
        self._turn(t, self.now + max(0.0, seconds))

    def note(self, what: str) -> None:
        """Put a line in the trace (the workload says what its processes do)."""
        t = self.current()
        if self.tracing and t is not None:
            self._note(t, what)

    def _note(self, t: SimThread, what: str) -> None:
        if self.tracing:
            self.stats.trace.append(Event(self.stats.turns, self.now, t.name, what))

    def _check_alive(self, t: SimThread) -> None:
        process = t.process
        if process.crashed or self._stopping or (process.exited and t is not process.threads[0]):
            raise Crash(t.name)

    def _turn(self, t: SimThread, wake: float) -> None:
        """Give the baton back, runnable again at virtual time ``wake``; return when it is this thread's turn."""
        t.wake = wake
        if not self._next_turn_is_mine(t, wake):
            self._hub.switch()  # type: ignore[union-attr]  # set while run() lasts, the only time threads run
        process = t.process  # self._check_alive(t), inlined
        if process.crashed or self._stopping or (process.exited and t is not process.threads[0]):
            raise Crash(t.name)

    def _next_turn_is_mine(self, t: SimThread, wake: float) -> bool:
        """When :meth:`run` would give the next turn to ``t`` again without a choice (no other thread runnable by
        then), take that turn here, as run() takes it, without the two switches through the hub: three turns in
        four. False, changing nothing, when run() must decide (a choice, the turn budget, a stop, a deadlock)."""
        stats = self.stats
        if self._stopping or stats.turns >= self._budget or self._blocked is not None or wake == _INF:
            return False
        now = self.now
        limit = wake if wake > now else now  # run() advances the clock to the earliest wake when none is due
        for other in self._live:
            if other.wake <= limit and other is not t:
                return False
        if wake > now:
            self.now = now = wake
        stats.turns += 1
        self.now = now + TURN_COST
        return True

    def wait_until(self, ready: Callable[[], bool], timeout: float | None) -> bool:
        """Block the calling simulated thread until ``ready()`` or ``timeout`` virtual seconds; a thread that may
        have made it true calls :meth:`wake_all`, which wakes the waiters whose ``ready()`` now holds."""
        t = self.current()
        assert t is not None
        deadline = float("inf") if timeout is None else self.now + max(0.0, timeout)
        while not ready():
            if self.now >= deadline:
                return False
            self._waiting[t] = ready
            try:
                self._turn(t, deadline)
            finally:
                self._waiting.pop(t, None)
        return True

    def wake_all(self) -> None:
        for t, ready in list(self._waiting.items()):
            if t.wake > self.now and ready():
                t.wake = self.now

    _waiting: dict[SimThread, Callable[[], bool]]

    # --- running ---------------------------------------------------------------------------------------

    def run(self) -> RunStats:
        """Run every process (and the ones they start) to its end. Raises :class:`Deadlock`."""
        self._waiting = {}
        self._hub, self._hub_ident, self._blocked = greenlet.getcurrent(), threading.get_ident(), None
        live = self._live = [t for t in self.threads if not t.done]
        budget = self._budget = self.stats.turns + self.max_turns  # each run its own: a quiescent phase after an
        # overrun runs
        stats, draw = self.stats, self.choices.draw
        with self._patched(), self._watchdog():
            while live:
                if stats.turns >= budget and not self._stopping:
                    self._stopping = True  # every thread raises Crash at its next turn
                    stats.overrun = True
                now = self.now
                ready = [t for t in live if t.wake <= now]
                if not ready:
                    wake = min(t.wake for t in live)
                    if wake == float("inf"):
                        names = ", ".join(t.name for t in live)
                        self._abandon()
                        raise Deadlock(f"every live thread waits for another: {names}")
                    self.now = wake
                    continue
                t = ready[draw(len(ready), "turn")] if len(ready) > 1 else ready[0]
                stats.turns += 1
                self.now = now + TURN_COST
                if t.glet is None:
                    t.glet = greenlet.greenlet(t._main, parent=self._hub)
                self._switch_to(t)
                if t.done:  # a thread is done only once it ran to its end, here
                    live.remove(t)
                if self._blocked is not None:
                    where = self._blocked
                    self._abandon()
                    raise Deadlock(f"thread {t.name!r} blocked outside the scheduler for {self.watchdog:g} s "
                                   f"(a real lock, event or queue the simulation cannot see):\n{where}")
        self._stopping = False  # a later run() (the quiescent phase) starts afresh
        return self.stats

    def _switch_to(self, t: SimThread) -> None:
        """Hand ``t`` the baton until it gives it back (or ends)."""
        assert t.glet is not None
        self._running = t
        try:
            t.glet.switch()
        except _Interrupted:  # the watchdog's signal landed here rather than in the blocked thread
            pass
        finally:
            self._running = None

    def stop(self) -> None:
        """End the run: every thread raises Crash at its next turn (the oracle saw enough)."""
        self._stopping = True

    def _abandon(self) -> None:
        """Let the parked threads die: each raises Crash when given the baton (a few times at most, should it
        catch one), so that no greenlet of the run is left suspended."""
        self._stopping = self._abandoned = True
        for t in self.threads:
            for _ in range(100):
                if t.glet is None or t.glet.dead:
                    break
                self._switch_to(t)

    @contextmanager
    def _watchdog(self) -> Iterator[None]:
        """Watched while it runs: when no turn begins for ``watchdog`` real seconds, the thread holding the baton
        is blocked outside the scheduler, and a signal interrupts it (only a run on the main thread can be
        interrupted; elsewhere the watchdog can only say so on stderr). One watching thread serves every run, so
        that a run starts and ends without waiting for another OS thread."""
        if not self.watchdog or self.watchdog == float("inf"):
            yield
            return
        self._on_main = threading.current_thread() is threading.main_thread()
        if self._on_main:
            _install_interrupt()
        self._watched = True
        _watched[self] = (-1, _real_monotonic())
        _start_watching()
        try:
            yield
        finally:
            self._watched = False
            _watched.pop(self, None)

    def _watch(self, seen: int, since: float) -> tuple[int, float]:
        """One look of the watching thread at this run: (turns seen, since when, by the real clock)."""
        turns = self.stats.turns
        if not self._watched:
            return -1, float("inf")
        if turns != seen:
            return turns, _real_monotonic()
        if _real_monotonic() - since < self.watchdog:
            return seen, since
        frame = sys._current_frames().get(self._hub_ident or 0)
        self._blocked = "".join(traceback.format_stack(frame)[-6:]) if frame is not None else ""
        if not self._on_main:
            print(f"simulation: a thread is blocked outside the scheduler:\n{self._blocked}", file=sys.stderr,
                  flush=True)
            return -1, float("inf")
        assert self._hub_ident is not None
        signal.pthread_kill(self._hub_ident, WATCHDOG_SIGNAL)
        return -1, _real_monotonic()  # again if the signal was missed

    # --- virtual time and deterministic values -----------------------------------------------------------

    def monotonic(self) -> float:
        return MONOTONIC_START + self.now

    def wall(self) -> float:
        return EPOCH + self.now

    @contextmanager
    def _patched(self) -> Iterator[None]:
        """time, random ids and the global random module, virtual for simulated threads only."""
        real = {name: getattr(time, name) for name in
                ("monotonic", "time", "sleep", "perf_counter", "monotonic_ns", "time_ns", "perf_counter_ns")}
        real_ids = (uuid.uuid4, secrets.token_hex, secrets.token_bytes, os.urandom)
        state = random.getstate()
        random.seed(self.choices.seed)
        unraisable = sys.unraisablehook

        def quiet(event: Any) -> None:  # a generator of a crashed process, closed later, crashing again
            if not isinstance(event.exc_value, Crash):
                unraisable(event)
        sys.unraisablehook = quiet  # tenacity's jitter and anything else using the global generator
        sim = self.current

        def either(virtual: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
            def chosen(*args: Any) -> Any:
                return virtual(*args) if sim() is not None else original(*args)
            return chosen

        def urandom(n: int) -> bytes:
            return self._values.getrandbits(8 * n).to_bytes(n, "big") if n else b""

        patches: dict[str, Callable[..., Any]] = {
            "monotonic": self.monotonic, "perf_counter": self.monotonic, "time": self.wall, "sleep": self.sleep,
            "monotonic_ns": lambda: int(self.monotonic() * 1e9), "perf_counter_ns": lambda: int(self.monotonic() * 1e9),
            "time_ns": lambda: int(self.wall() * 1e9)}
        virtual: dict[Any, Callable[..., Any]] = {}
        for name, fn in patches.items():
            virtual[real[name]] = either(fn, real[name])
            setattr(time, name, virtual[real[name]])
        uuid.uuid4 = either(lambda: uuid.UUID(bytes=urandom(16), version=4), real_ids[0])  # type: ignore[assignment]
        secrets.token_hex = either(lambda n=32: urandom(n).hex(), real_ids[1])  # type: ignore[assignment]
        secrets.token_bytes = either(lambda n=32: urandom(n), real_ids[2])  # type: ignore[assignment]
        os.urandom = either(urandom, real_ids[3])  # type: ignore[assignment]
        real_local = threading.local
        threading.local = SimLocal  # type: ignore[misc, assignment]
        found_locals, clock_users = _code_under_test_captures(set(real.values()))
        module_locals = [(module, name, getattr(module, name)) for module, name in found_locals]
        for module, name, _ in module_locals:
            setattr(module, name, SimLocal())
        defaults = [(fn, fn.__defaults__, fn.__kwdefaults__) for fn in clock_users]
        for fn, positional, keywords in defaults:  # a clock taken as a default argument at import: virtual too
            if positional:
                fn.__defaults__ = tuple(_virtual_of(d, virtual) for d in positional)
            if keywords:
                fn.__kwdefaults__ = {k: _virtual_of(d, virtual) for k, d in keywords.items()}
        try:
            yield
        finally:
            threading.local = real_local  # type: ignore[misc]
            for module, name, value in module_locals:
                setattr(module, name, value)
            for fn, positional, keywords in defaults:
                fn.__defaults__, fn.__kwdefaults__ = positional, keywords
            for name, fn in real.items():
                setattr(time, name, fn)
            uuid.uuid4, secrets.token_hex, secrets.token_bytes, os.urandom = real_ids  # type: ignore[assignment]
            random.setstate(state)
            sys.unraisablehook = unraisable


_object_getattribute = object.__getattribute__  # module globals: SimLocal's every attribute read looks them up
_getcurrent = greenlet.getcurrent


class SimLocal:
    """``threading.local`` while a run lasts: a namespace per greenlet, that is per simulated thread (they all
    run on one OS thread) and per OS thread anywhere else (each has its own main greenlet). A subclass works as
    one of ``threading.local`` does: its ``__init__`` runs again, with the same arguments, in each new thread.

    The instance's ``__dict__`` is the namespace of the greenlet that used it last (``_sim_owner``); a use from
    another greenlet swaps it first. Meant for the greenlets of one OS thread at a time, as a run has."""

    __slots__ = ("_sim_dicts", "_sim_args", "_sim_owner", "__dict__", "__weakref__")

    def __new__(cls, *args: Any, **kwargs: Any) -> SimLocal:
        if (args or kwargs) and cls.__init__ is object.__init__:
            raise TypeError("Initialization arguments are not supported")
        self = object.__new__(cls)
        me = greenlet.getcurrent()
        namespace: dict[str, Any] = {}
        object.__setattr__(self, "_sim_args", (args, kwargs))
        object.__setattr__(self, "_sim_dicts", None)  # made once a second thread uses it: most see one only
        object.__setattr__(self, "__dict__", namespace)  # the creating thread's, which __init__ fills
        object.__setattr__(self, "_sim_owner", me)
        return self

    def __getattribute__(self, name: str) -> Any:
        if _object_getattribute(self, "_sim_owner") is not _getcurrent():
            _local_namespace(self)
        return _object_getattribute(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if _object_getattribute(self, "_sim_owner") is not _getcurrent():
            _local_namespace(self)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if object.__getattribute__(self, "_sim_owner") is not greenlet.getcurrent():
            _local_namespace(self)
        object.__delattr__(self, name)


def _local_namespace(local: SimLocal) -> None:
    """Make the calling greenlet's namespace ``local``'s ``__dict__`` (a new one: ``__init__`` runs on it)."""
    me = greenlet.getcurrent()
    dicts = object.__getattribute__(local, "_sim_dicts")
    if dicts is None:  # the first thread's namespace is the one in use, and its thread the owner
        dicts = weakref.WeakKeyDictionary({object.__getattribute__(local, "_sim_owner"):
                                           object.__getattribute__(local, "__dict__")})
        object.__setattr__(local, "_sim_dicts", dicts)
    namespace = dicts.get(me)
    fresh = namespace is None
    if namespace is None:
        namespace = dicts[me] = {}
    object.__setattr__(local, "__dict__", namespace)
    object.__setattr__(local, "_sim_owner", me)
    cls = type(local)
    if fresh and cls.__init__ is not object.__init__:
        args, kwargs = object.__getattribute__(local, "_sim_args")
        cls.__init__(local, *args, **kwargs)


#: what the code under test took from its modules at import that a run must replace, found once per count of loaded
#: modules: (module or module-level object, name) of the ``threading.local`` objects made at import (a module's
#: own, or a module-level object's, such as a shared ``tenacity.Retrying``'s state), and the functions whose
#: default arguments hold a real clock (``clock=time.monotonic``)
_captured: tuple[int, list[tuple[Any, str]], list[Any]] = (-1, [], [])


def _code_under_test_captures(clocks: set[Any]) -> tuple[list[tuple[Any, str]], list[Any]]:
    global _captured
    loaded = len(sys.modules)
    if _captured[0] != loaded:
        locals_found: list[tuple[Any, str]] = []
        functions: list[Any] = []
        for module_name, module in list(sys.modules.items()):
            if not module_name.startswith(CODE_UNDER_TEST) or module is None:
                continue
            for name, value in list(vars(module).items()):
                if type(value) is _RealLocal:
                    locals_found.append((module, name))
                elif not isinstance(value, type | types.ModuleType | types.FunctionType):
                    # one level down: a module-level object's own local (a shared tenacity.Retrying's state)
                    inner = getattr(value, "__dict__", None)
                    if isinstance(inner, dict):
                        locals_found.extend((value, key) for key, held in list(inner.items())
                                            if type(held) is _RealLocal)
                for fn in ([value] if callable(value) and not isinstance(value, type) else
                           list(vars(value).values()) if isinstance(value, type) else []):
                    fn = getattr(fn, "__func__", fn)
                    if getattr(fn, "__module__", None) != module_name or fn in functions:
                        continue
                    defaults = [*(getattr(fn, "__defaults__", None) or ()),
                                *(getattr(fn, "__kwdefaults__", None) or {}).values()]
                    if any(_is_clock(d, clocks) for d in defaults):
                        functions.append(fn)
        _captured = (loaded, locals_found, functions)
    return _captured[1], _captured[2]


def _virtual_of(value: Any, virtual: dict[Any, Callable[..., Any]]) -> Any:
    return virtual[value] if _is_clock(value, virtual.keys()) else value


def _is_clock(value: Any, clocks: Any) -> bool:
    try:
        return value in clocks
    except TypeError:  # unhashable
        return False


class SimEvent:
    """A ``threading.Event`` for simulated threads: ``wait`` gives the baton back instead of blocking."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        self.scheduler.wake_all()

    def clear(self) -> None:
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self.scheduler.current() is None:
            raise SimFailure("a SimEvent waited on outside the simulation")
        return self.scheduler.wait_until(self.is_set, timeout)


class SimThreadFactory:
    """Stands in for ``threading.Thread`` in code under test: a thread it starts is a thread of the process
    that started it, scheduled like any other (``join`` gives the baton back)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def __call__(self, group: None = None, target: Callable[..., Any] | None = None, name: str | None = None,
                 args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None, *, daemon: bool | None = None
                 ) -> _StartedLater:
        return _StartedLater(self.scheduler, target, name or "thread", args, kwargs or {})


class _StartedLater:
    def __init__(self, scheduler: Scheduler, target: Callable[..., Any] | None, name: str, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.scheduler, self.target, self.name, self.args, self.kwargs = scheduler, target, name, args, kwargs
        self.sim: SimThread | None = None

    def start(self) -> None:
        parent = self.scheduler.current()
        if parent is None:
            raise SimFailure(f"thread {self.name!r} started outside the simulation")
        target = self.target or (lambda *a, **k: None)
        self.sim = self.scheduler.thread(parent.process, f"{parent.process.name}/{self.name}",
                                         lambda: target(*self.args, **self.kwargs))

    def join(self, timeout: float | None = None) -> None:
        if self.sim is None:
            return
        sim = self.sim
        me = self.scheduler.current()
        if me is not None:
            sim.joiners.append(me)
        self.scheduler.wait_until(lambda: sim.done, timeout)

    def is_alive(self) -> bool:
        return self.sim is not None and not self.sim.done


class InlineExecutor:
    """Stands in for ``ThreadPoolExecutor`` in code under test: ``submit`` runs the function at once in the
    calling thread (one thread per process: its calls are scheduled like the caller's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from concurrent.futures import Future
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - delivered through the future, as a pool would
            future.set_exception(exc)
        return future

    def map(self, fn: Callable[..., Any], *iterables: Any) -> Iterator[Any]:
        return iter([fn(*a) for a in zip(*iterables, strict=False)])

    def shutdown(self, wait: bool = True, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class SimLock:
    """A lock for simulated threads: waiting for it gives the baton back (an RLock when ``reentrant``)."""

    def __init__(self, scheduler: Scheduler, reentrant: bool = False) -> None:
        self.scheduler, self.reentrant = scheduler, reentrant
        self.owner: SimThread | None = None
        self.count = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = self.scheduler.current()
        if self.reentrant and self.owner is me and me is not None:
            self.count += 1
            return True
        if self.owner is not None:
            if not blocking or me is None:
                return False
            if not self.scheduler.wait_until(lambda: self.owner is None, None if timeout < 0 else timeout):
                return False
        self.owner, self.count = me, 1
        return True

    def release(self) -> None:
        self.count -= 1
        if self.count <= 0:
            self.owner, self.count = None, 0
            self.scheduler.wake_all()

    def locked(self) -> bool:
        return self.owner is not None

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class SimCondition:
    """A condition variable for simulated threads (``notify`` wakes every waiter: they re-check)."""

    def __init__(self, scheduler: Scheduler, lock: SimLock | None = None) -> None:
        self.scheduler = scheduler
        self.lock = lock or SimLock(scheduler, reentrant=True)
        self._generation = 0

    def __enter__(self) -> bool:
        return self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def acquire(self, *args: Any) -> bool:
        return self.lock.acquire(*args)

    def release(self) -> None:
        self.lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        generation, held = self._generation, self.lock.count
        self.lock.owner, self.lock.count = None, 0
        self.scheduler.wake_all()
        try:
            return self.scheduler.wait_until(lambda: self._generation != generation, timeout)
        finally:
            self.scheduler.wait_until(lambda: self.lock.owner is None, None)
            self.lock.owner, self.lock.count = self.scheduler.current(), held

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        deadline = None if timeout is None else self.scheduler.now + timeout
        while not (result := predicate()):
            left = None if deadline is None else deadline - self.scheduler.now
            if left is not None and left <= 0:
                return result
            self.wait(left)
        return result

    def notify(self, n: int = 1) -> None:
        self.notify_all()

    def notify_all(self) -> None:
        self._generation += 1
        self.scheduler.wake_all()


def threading_shim(scheduler: Scheduler) -> Any:
    """A stand-in for the ``threading`` module of code under test: threads, events, locks and conditions that
    the scheduler sees (anything else is the real module's)."""
    import types
    shim = types.SimpleNamespace(**{name: getattr(threading, name) for name in dir(threading)
                                    if not name.startswith("__")})
    shim.Thread = SimThreadFactory(scheduler)
    shim.Event = lambda: SimEvent(scheduler)
    shim.Lock = lambda: SimLock(scheduler)
    shim.RLock = lambda: SimLock(scheduler, reentrant=True)
    shim.Condition = lambda lock=None: SimCondition(scheduler, lock)
    shim.local = SimLocal
    return shim
