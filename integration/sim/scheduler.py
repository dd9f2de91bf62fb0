"""A deterministic cooperative scheduler: the simulation's processes take turns at every client call and sleep.

Each simulated process runs on real Python threads, but only the thread holding the baton runs. A thread hands
the baton back at every client call (:meth:`Scheduler.before_call`, the transport's hook), at every
``time.sleep`` and whenever it waits on a :class:`SimEvent` or joins a :class:`SimThread`; the scheduler then
picks the next runnable thread with a choice drawn from :class:`Choices`. Time is virtual while a run lasts:
``time.monotonic``, ``time.time``, ``time.sleep`` (and their ``_ns`` forms, ``perf_counter``) called from a
simulated thread read and advance the scheduler's clock; any other thread keeps the real ones.

Faults, drawn from the same choices at a call: a **crash** (the process dies at the call: :class:`Crash`, a
``BaseException``, unwinds every thread of it, no call of it is applied any more, its memory is gone), a
**stall** (the call waits some virtual seconds before it is applied: a paused process, a slow network) and a
**lost answer** (the call is applied, then the client sees a transport error: :meth:`after_call` raises it).

Every choice (which thread runs, whether a fault happens, whatever the workload draws) goes through one
:class:`Choices`, which records the list of values; a run given that list replays exactly, and a shortened or
simplified list still runs (values past its end are 0, the simplest: the first runnable thread, no fault). A
thread that blocks on something the scheduler cannot see (a real lock, a real ``threading.Event``) would hang
the run: a real-time watchdog reports it as :class:`Deadlock`, naming the thread and where it blocked.
"""

from __future__ import annotations

import os
import random
import secrets
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

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


class Crash(BaseException):
    """The process died here: raised in each of its threads, never caught by the code under test's
    ``except Exception``; no call of the process is applied after it."""


class SimFailure(Exception):
    """The simulation itself could not go on (not an invariant of the code under test)."""


class Deadlock(SimFailure):
    """A thread blocked on something the scheduler cannot see, or every thread waits for another."""


class Choices:
    """Every choice of a run, drawn from ``random.Random(seed)`` or replayed from a list.

    ``draw(n)`` gives a value in ``[0, n)``; a choice with one option draws nothing. Replaying, a value past the
    list's end is 0 and a value too large is clamped, so any edited list still runs (the shrinker relies on
    that). ``record`` holds the values drawn, ``labels`` what each was for."""

    def __init__(self, seed: int, replay: Sequence[int] | None = None) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._replay = list(replay) if replay is not None else None
        self.record: list[int] = []
        self.labels: list[str] = []

    def draw(self, n: int, label: str = "") -> int:
        if n <= 1:
            return 0
        i = len(self.record)
        if self._replay is not None:
            value = min(self._replay[i], n - 1) if i < len(self._replay) else 0
        else:
            value = self._rng.randrange(n)
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
    """A thread of a simulated process, run only while it holds the baton."""

    def __init__(self, scheduler: Scheduler, process: Process, name: str, fn: Callable[[], Any]) -> None:
        self.scheduler, self.process, self.name, self.fn = scheduler, process, name, fn
        self.go = threading.Lock()
        self.go.acquire()
        self.started = False
        self.done = False
        self.wake = 0.0  # runnable once the virtual clock reaches it (inf: waits for an event)
        self.result: Any = None
        self.error: BaseException | None = None
        self.crashed = False
        self.ident: int | None = None
        self.joiners: list[SimThread] = []
        self.real: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"SimThread({self.name!r})"

    def _main(self) -> None:
        sched = self.scheduler
        self.ident = threading.get_ident()
        sched._by_ident[self.ident] = self
        try:
            if self.process.crashed or sched._stopping:
                raise Crash(self.name)
            self.result = self.fn()
        except Crash:
            self.crashed = True
        except BaseException as exc:  # noqa: BLE001 - recorded: the workload and the oracle judge it
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
            sched._by_ident.pop(self.ident, None)
            if not sched._abandoned:
                sched._back.release()


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
    that the call's answer is lost. ``watchdog``: real seconds a turn may take before the thread
    is reported as blocked outside the scheduler. ``max_turns``: after that many turns every process is stopped
    (crashed) and the run ends (``stats.overrun``). ``trace``: keep a trace of every turn (for printing)."""

    def __init__(self, choices: Choices, *, crash_rate: float = 0.0, lost_rate: float = 0.0, stall_rate: float = 0.0,
                 watchdog: float = 10.0, max_turns: int = 20_000, trace: bool = False) -> None:
        self.choices = choices
        self.crash_rate, self.lost_rate, self.stall_rate = crash_rate, lost_rate, stall_rate
        self.watchdog, self.max_turns, self.tracing = watchdog, max_turns, trace
        self.now = 0.0  # virtual seconds since the run began
        self.processes: list[Process] = []
        self.threads: list[SimThread] = []
        self.stats = RunStats()
        self._back = threading.Lock()
        self._back.acquire()
        self._by_ident: dict[int, SimThread] = {}
        self._stopping = False
        self._abandoned = False  # a deadlock ended the run: the threads let go die without handing back
        self._values = random.Random(choices.seed ^ 0x5EED)  # tokens and ids: deterministic, not choices

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
        return t

    def current(self) -> SimThread | None:
        """The simulated thread calling, or None for any other thread."""
        return self._by_ident.get(threading.get_ident())

    # --- hooks called by the simulated threads ----------------------------------------------------------

    def before_call(self, method: str) -> None:
        """A client call is about to be applied: let another thread run first, then maybe die here."""
        t = self.current()
        if t is None:
            return
        self._check_alive(t)
        self._turn(t, self.now)
        proc = t.process
        self.stats.calls += 1
        if proc.faults and self.choices.chance(self.crash_rate, f"crash {proc.name}"):
            proc.crashed, proc.crashed_at = True, method
            self.stats.crashes += 1
            self._note(t, f"CRASH at {method}")
            raise Crash(f"{proc.name} crashed at {method}")
        if proc.faults and self.choices.chance(self.stall_rate, f"stall {proc.name}"):
            pause = self.choices.pick(STALLS, "stall seconds")
            self._note(t, f"STALLED {pause:g} s before {method}")
            self.stats.stalls += 1
            self._turn(t, self.now + pause)
        if proc.faults and self.choices.chance(self.lost_rate, f"lose {proc.name}"):
            t.lose_answer = True  # type: ignore[attr-defined]
            self._note(t, f"{method} (answer lost)")
        elif self.tracing:
            self._note(t, method)

    def after_call(self, method: str) -> None:
        """The call was applied: raise the transport error of a lost answer if one was chosen."""
        t = self.current()
        if t is not None and getattr(t, "lose_answer", False):
            t.lose_answer = False  # type: ignore[attr-defined]
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
        if t.process.crashed or self._stopping or (t.process.exited and t is not t.process.threads[0]):
            raise Crash(t.name)

    def _turn(self, t: SimThread, wake: float) -> None:
        """Give the baton back, runnable again at virtual time ``wake``; return when it is this thread's turn."""
        t.wake = wake
        self._back.release()
        t.go.acquire()
        self._check_alive(t)

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
        with self._patched():
            while True:
                live = [t for t in self.threads if not t.done]
                if not live:
                    break
                if self.stats.turns >= self.max_turns and not self._stopping:
                    self._stopping = True  # every thread raises Crash at its next turn
                    self.stats.overrun = True
                ready = [t for t in live if t.wake <= self.now]
                if not ready:
                    wake = min(t.wake for t in live)
                    if wake == float("inf"):
                        names = ", ".join(t.name for t in live)
                        self._abandon()
                        raise Deadlock(f"every live thread waits for another: {names}")
                    self.now = wake
                    continue
                t = ready[self.choices.draw(len(ready), "turn")] if len(ready) > 1 else ready[0]
                self.stats.turns += 1
                self.now += TURN_COST
                if not t.started:
                    t.started = True
                    t.real = threading.Thread(target=t._main, name=f"sim:{t.name}", daemon=True)
                    t.real.start()
                else:
                    t.go.release()
                if not self._back.acquire(timeout=self.watchdog):
                    where = ""
                    if t.ident is not None and (frame := sys._current_frames().get(t.ident)) is not None:
                        where = "".join(traceback.format_stack(frame)[-6:])
                    self._abandon()
                    raise Deadlock(f"thread {t.name!r} blocked outside the scheduler for {self.watchdog:g} s "
                                   f"(a real lock, event or queue the simulation cannot see):\n{where}")
        self._stopping = False  # a later run() (the quiescent phase) starts afresh
        return self.stats

    def stop(self) -> None:
        """End the run: every thread raises Crash at its next turn (the oracle saw enough)."""
        self._stopping = True

    def _abandon(self) -> None:
        """Let the parked threads die (they raise Crash when given the baton); a blocked one stays blocked."""
        self._stopping = self._abandoned = True
        for t in self.threads:
            if t.started and not t.done and t.go.locked():
                t.go.release()

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
        for name, fn in patches.items():
            setattr(time, name, either(fn, real[name]))
        uuid.uuid4 = either(lambda: uuid.UUID(bytes=urandom(16), version=4), real_ids[0])  # type: ignore[assignment]
        secrets.token_hex = either(lambda n=32: urandom(n).hex(), real_ids[1])  # type: ignore[assignment]
        secrets.token_bytes = either(lambda n=32: urandom(n), real_ids[2])  # type: ignore[assignment]
        os.urandom = either(urandom, real_ids[3])  # type: ignore[assignment]
        try:
            yield
        finally:
            for name, fn in real.items():
                setattr(time, name, fn)
            uuid.uuid4, secrets.token_hex, secrets.token_bytes, os.urandom = real_ids  # type: ignore[assignment]
            random.setstate(state)
            sys.unraisablehook = unraisable


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
    return shim
