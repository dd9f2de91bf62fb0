"""Shared fixtures: one pair of real embedded Accumulo clusters (A and B) for the whole test session."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

_names = itertools.count()


@pytest.fixture(scope="session")
def accumulo():
    """Clusters "a" (source) and "b" (destination), each behind its own gateway."""
    from integration.harness import clusters

    with clusters(("a", "b")) as running:
        yield running


@pytest.fixture
def conn_a(accumulo):
    conn = accumulo["a"].connect()
    yield conn
    conn.close()


@pytest.fixture
def conn_b(accumulo):
    conn = accumulo["b"].connect()
    yield conn
    conn.close()


def unique_table(prefix: str = "t") -> str:
    return f"{prefix}_{os.getpid()}_{next(_names)}"


@pytest.fixture
def table(conn_a):
    """A fresh table on cluster A with the default versioning iterator."""
    name = unique_table()
    conn_a.create_table(name)
    yield name
    conn_a.delete_table(name, missing_ok=True)


def run_in_threads(work, threads: int) -> list[BaseException]:
    """Run ``work(n)`` for n in range(threads) at once; return what they raised."""
    import threading

    errors: list[BaseException] = []

    def guarded(n: int) -> None:
        try:
            work(n)
        except BaseException as exc:  # noqa: BLE001 - collected for the test to assert on
            errors.append(exc)

    running = [threading.Thread(target=guarded, args=(n,)) for n in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    return errors
