"""Shared fixtures: one pair of real embedded Accumulo clusters (A and B) for the whole test session."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import settings

from connector.clusters_config import CONFIG_ENV, write_clusters
from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status
from connector.spark import DrainJob
from connector.transactions import RowTransactions
from examples.inverted_count_index import Producer, actual_index, expected_index, words

from . import translator_gate  # noqa: F401 - sets the gate's folder before Spark or the CLI inherit the env

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

_names = itertools.count()

# no per-example deadline: the suite runs two workers beside JVMs on two cores, where a pure property test's
# example can take 0.8 s of wall time without anything being wrong (the tests themselves still time out)
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

#: a test that uses one of these fixtures, directly or through another fixture, gets the mark: so
#: `-m "not cluster"` starts no JVM and `-m "not spark"` no Spark, without a mark to forget in each file
FIXTURE_MARKS = {"accumulo": "cluster", "gateway_classpath": "cluster", "spark": "spark"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))  # the closure: fixtures of fixtures and autouse ones too
        for fixture, mark in FIXTURE_MARKS.items():
            if fixture in used and item.get_closest_marker(mark) is None:
                item.add_marker(mark)


@pytest.fixture(scope="session")
def accumulo():
    """Clusters "a" (source) and "b" (destination), each behind its own gateway."""
    from integration.harness import clusters

    with clusters(("a", "b")) as running:
        yield running


@pytest.fixture(scope="session")
def gateway_classpath() -> str:
    """The harness module's classpath (the launcher, the Java example; the gateway module's jar and the
    minicluster on it), built with Maven when a source changed (no cluster started). The deployable jar of the
    same build: ``integration.harness.gateway_jar()``."""
    from integration.harness import build_gateway

    return build_gateway()


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


# --- the drain on real clusters A and B: shared by the end-to-end and bad-input tests ---------------------

@pytest.fixture(scope="module")
def spark():
    from connector.spark import spark_session

    session = spark_session("local[2]", "tests")
    yield session
    session.stop()


class Scenario:
    """A queue on A, a counts table (the truth) on A and an index table on B, all fresh."""

    def __init__(self, accumulo, buckets: int = 13) -> None:
        self.accumulo = accumulo
        self.a, self.b = accumulo["a"], accumulo["b"]
        self.conn_a, self.conn_b = self.a.connect(), self.b.connect()
        self.queue = QueueConfig(table=unique_table("q"), qid="cidx", num_buckets=buckets)
        self.counts = unique_table("counts")
        self.index = unique_table("index")
        self.conn_b.create_table(self.index)  # a drain creates none unless asked (create_dest_table)
        ExportQueue(self.conn_a, self.queue).init()
        RowTransactions(self.conn_a, self.counts).init()

    def job(self, **settings) -> DrainJob:
        """The drain of this scenario's queue into its index; ``settings``: ``DrainSettings`` fields (and
        ``source``, ``dest``, ``dest_table`` to change those, ``server_wait`` for both gateways)."""
        wait = settings.pop("server_wait", None)
        source = settings.pop("source", self.a.gateway_options())
        dest = settings.pop("dest", self.b.gateway_options())
        return DrainJob(source=replace(source, server_wait=wait or source.server_wait),
                        dest=replace(dest, server_wait=wait or dest.server_wait), queue=self.queue,
                        dest_table=settings.pop("dest_table", self.index), settings=DrainSettings(**settings))

    def produce(self, transactions: int, producers: int = 2, n_words: int = 300, seed: int = 0) -> int:
        """Run ``transactions`` row transactions on the counts table (each reads a word's count, writes the new
        one and exports the change in one commit) from ``producers`` threads sharing the ``n_words`` words
        (uniformly: their transactions collide). Every 50th export is added to the queue a second time (a
        repeated relay: same entry). Returns the number of entries queued: one per transaction."""
        vocabulary = words(n_words)
        ps = [Producer(self.a.connect(), self.queue, self.counts, vocabulary, seed=seed + i, skew=0.0, batch=100,
                       repeat_every=50) for i in range(producers)]
        shares = [transactions // producers + (i < transactions % producers) for i in range(producers)]
        errors = run_in_threads(lambda n: ps[n].run(shares[n]), producers)
        for p in ps:
            p.close()
            p.conn.close()
        if errors:
            raise errors[0]
        return sum(p.committed for p in ps)

    def depth(self) -> int:
        return queue_status(self.conn_a, self.queue).entries

    def verify(self) -> None:
        expected = expected_index(self.conn_a, self.counts)
        actual = actual_index(self.conn_b, self.index)
        assert len(actual) == len(set(actual)), "duplicate index cells"
        stale = set(actual) - expected
        missing = expected - set(actual)
        assert not stale and not missing, f"stale {sorted(stale)[:5]} missing {sorted(missing)[:5]}"
        assert self.depth() == 0

    def close(self) -> None:
        self.conn_a.close()
        self.conn_b.close()


@pytest.fixture
def scenario(accumulo):
    s = Scenario(accumulo)
    yield s
    s.close()


def run_cli(env: dict, *args: str, stdin: str | None = None, stdin_bytes: bytes | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``accumulo-export`` in a subprocess; stdout and stderr come back as text."""
    data = stdin.encode() if stdin is not None else stdin_bytes
    out = subprocess.run([sys.executable, "-m", "connector.cli", *args], input=data, capture_output=True,
                         env=env, cwd=ROOT, timeout=timeout)
    return subprocess.CompletedProcess(out.args, out.returncode, out.stdout.decode(errors="replace"),
                                       out.stderr.decode(errors="replace"))


@pytest.fixture
def cli_env(accumulo, tmp_path):
    config = tmp_path / "clusters.toml"
    write_clusters(config, {"A": accumulo["a"].gateway_options(), "B": accumulo["b"].gateway_options()})
    return dict(os.environ, **{CONFIG_ENV: str(config), "PYSPARK_PYTHON": sys.executable})


def drain_args(s: Scenario) -> list[str]:
    return ["drain", "--source", "A", "--dest", "B", "--table", s.queue.table, "--queue", s.queue.qid,
            "--buckets", str(s.queue.num_buckets), "--dest-table", s.index, "--translator", "difference"]


def one_line_error(err: BaseException, message: str) -> None:
    """Issue 39 item 5: a source's refusal reaches the driver as the one line naming the option (after Spark's
    error class; Spark adds its SQLSTATE on a line of its own), without the planner process's traceback."""
    first, *rest = str(err).strip().splitlines()
    assert re.search(message, first), first
    assert all(line.strip().startswith("SQLSTATE") for line in rest), str(err)
