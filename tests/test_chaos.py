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

from integration.chaos import ChaosRun, draw_schedule
from integration.chaos.schedule import ACTION_WEIGHTS

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
