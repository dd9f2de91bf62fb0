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
