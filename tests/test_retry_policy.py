"""``RetryPolicy.run``, the loop every gateway call goes through: a call that succeeds runs once with no retry loop
built; a transient error is retried on a fresh socket within the attempts and the time bound (counted from the
first attempt); any other error is raised as it is. Pure logic: the calls here are functions that fail on cue."""

from __future__ import annotations

import types
from typing import Any

import pytest
from thriftpy2.transport import TTransportException

from connector.accumulo import transport
from connector.accumulo.errors import ConnectionLostError
from connector.accumulo.transport import RetryPolicy

FAST = dict(initial_wait=0.001, max_wait=0.001)


class Failing:
    """A call that raises each of ``errors`` in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_a_call_that_succeeds_runs_once() -> None:
    call, retried = Failing(), []
    assert RetryPolicy(**FAST).run(call, retried.append, "get") == "ok"
    assert (call.calls, retried) == (1, [])


def test_transient_errors_are_retried_each_after_a_reconnect() -> None:
    first, second = TTransportException(message="reset"), ConnectionResetError()
    call, retried = Failing(first, second), []
    assert RetryPolicy(attempts=5, **FAST).run(call, retried.append, "get") == "ok"
    assert call.calls == 3
    assert retried == [first, second]


def test_another_error_is_raised_as_it_is_and_not_retried() -> None:
    call, retried = Failing(ValueError("bad table")), []
    with pytest.raises(ValueError, match="bad table"):
        RetryPolicy(**FAST).run(call, retried.append, "get")
    assert (call.calls, retried) == (1, [])


@pytest.mark.parametrize("attempts", [1, 3])
def test_the_last_attempt_failing_raises_connection_lost_naming_the_attempts(attempts: int) -> None:
    call = Failing(*[TTransportException(message=f"down {i}") for i in range(attempts)])
    with pytest.raises(ConnectionLostError,
                       match=f"get on gw: gateway unreachable after {attempts} attempts: .*down {attempts - 1}"):
        RetryPolicy(attempts=attempts, **FAST).run(call, lambda exc: None, "get on gw")
    assert call.calls == attempts


def test_the_time_bound_counts_from_the_first_attempt(monkeypatch: Any) -> None:
    """A first attempt that alone outlasts ``max_seconds`` (a socket timeout) is not tried again."""
    now = [1000.0]
    monkeypatch.setattr(transport, "time", types.SimpleNamespace(monotonic=lambda: now[0]), raising=False)
    monkeypatch.setattr("tenacity.time.monotonic", lambda: now[0])

    def slow_then_lost() -> str:
        now[0] += 61.0
        raise TTransportException(message="timed out")

    with pytest.raises(ConnectionLostError, match="after 1 attempts"):
        RetryPolicy(attempts=40, max_seconds=60.0, **FAST).run(slow_then_lost, lambda exc: None, "get")
