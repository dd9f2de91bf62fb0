"""The standing guard (``make chaos``, integration/chaos): a seeded 3-minute run of the randomized fault
schedule on the session's clusters. Producers with clocks minutes ahead and behind, both streams, batch drains,
bootstraps into new and registered destinations, ``verify --repair``, compactions of A's queue and of B,
``tx relay`` and SIGKILLs of every process kind, gateways included; at each quiet point every built
destination must equal what A's rows imply (an oracle apart from verify's code), the queue and the outboxes
be empty and nothing be dead-lettered, and no process may have failed on its own.

And the schedule itself (no cluster): the same seed gives the same schedule, and every kind of action is in
even a short one."""

from __future__ import annotations

import io

import pytest

from connector.accumulo import Mutation
from connector.transactions import RowTransactions
from integration.chaos import ChaosRun, draw_schedule
from integration.chaos.oracle import compare, read_truth
from integration.chaos.schedule import ACTION_WEIGHTS

from .conftest import unique_table

#: the seeded run of ``make test`` (``make chaos MINUTES=3 SEED=36`` runs the same schedule on clusters of its own)
SEED = 36
MINUTES = 3.0


def test_the_same_seed_gives_the_same_schedule_and_every_action_is_in_it():
    first, again, other = draw_schedule(SEED, MINUTES), draw_schedule(SEED, MINUTES), draw_schedule(SEED + 1, MINUTES)
    assert first == again
    assert first != other
    assert sum(p.seconds for p in first.phases) == pytest.approx(MINUTES * 60)
    assert {a.what for p in first.phases for a in p.actions} == set(ACTION_WEIGHTS)
    skews = sorted(p.skew_seconds for p in first.producers)
    assert skews[0] <= -120 and skews[-1] >= 120, "one producer's clock minutes behind, one minutes ahead"


def test_the_oracle_finds_each_kind_of_difference(accumulo):
    """What A's counts imply against a destination holding one right cell, one stale, one with a wrong value,
    one newer than its row, and missing one: each is named, and the right destination is exact."""
    conn_a, conn_b = accumulo["a"].connect(), accumulo["b"].connect()
    counts, right, wrong = unique_table("ocounts"), unique_table("oright"), unique_table("owrong")
    txs = RowTransactions(conn_a, counts)
    txs.init()
    seqs = {w: txs.run(w, lambda tx, n=n: tx.put(b"c", b"n", str(n).encode()))
            for w, n in (("apple", 3), ("pear", 12), ("plum", 1), ("fig", 7))}
    txs.run("kiwi", lambda tx: tx.put(b"c", b"n", b"0"))  # a count of 0 implies nothing
    txs.close()
    for table in (right, wrong):
        conn_b.create_table(table)
    conn_b.write(right, [Mutation(b"%08d" % n).put(b"w", w.encode(), b"", timestamp=seqs[w])
                         for w, n in (("apple", 3), ("pear", 12), ("plum", 1), ("fig", 7))])
    conn_b.write(wrong, [Mutation(b"00000003").put(b"w", b"apple", b"", timestamp=seqs["apple"]),
                         Mutation(b"00000011").put(b"w", b"pear", b"", timestamp=seqs["pear"] - 5),  # stale
                         Mutation(b"00000001").put(b"w", b"plum", b"x", timestamp=seqs["plum"]),  # wrong value
                         Mutation(b"00000007").put(b"w", b"fig", b"", timestamp=seqs["fig"] + 1)])  # newer than A
    truth = read_truth(conn_a, counts)
    assert truth.outbox_cells == 0 and len(truth.implied) == 4
    assert compare(truth, conn_b, right).exact
    c = compare(truth, conn_b, wrong)
    assert c.missing == [(b"00000012", b"w", b"pear", b"")]
    assert c.unexpected == [((b"00000011", b"w", b"pear", b""), seqs["pear"] - 5)]
    assert c.different == [((b"00000001", b"w", b"plum", b""), b"", b"x")]
    assert c.future == [((b"00000007", b"w", b"fig", b""), seqs["fig"] + 1, seqs["fig"])]
    assert not c.exact and "1 missing" in c.describe()
    conn_a.close()
    conn_b.close()


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_seeded_three_minute_chaos_run_passes(accumulo, tmp_path):
    out = io.StringIO()
    run = ChaosRun(accumulo, draw_schedule(SEED, MINUTES), tmp_path, out=out)
    passed = run.run()
    text = out.getvalue()
    print(text)
    kills = sum(run.log.kills.values())
    assert kills > 0 and run.log.quiet, text[-4000:]
    assert passed, text[-8000:]


def test_a_process_that_escaped_its_session_is_still_found_by_the_run_s_marker():
    """The schedule's last check (``ChaosRun.check_nothing_left``) finds every process a run started, however far
    down and in whatever session: here a grandchild in a session of its own whose parent has exited."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from integration.chaos.processes import RUN_MARKER, marked_processes

    marker = f"test-{os.getpid()}-{time.time_ns()}"
    starter = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
               "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
               "print(p.pid, flush=True)")
    out = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, timeout=30,
                         env={**os.environ, RUN_MARKER: marker})
    orphan = int(out.stdout.strip())
    try:
        assert set(marked_processes(marker)) == {orphan}
        assert marked_processes("another-run") == {}
    finally:
        os.kill(orphan, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marked_processes(marker) == {}
