"""A randomized fault schedule, the standing guard that the tools making destination B right never make it
wrong (after Jepsen, and FoundationDB's simulation tests): ``make chaos MINUTES=30 SEED=n``, or
``python -m integration.chaos --minutes M --seed S``.

Producers (one clock minutes ahead, one behind) commit row transactions of the inverted count index on A
while the in-process and the Spark stream drain the queue into B; batch drains, bootstraps into new and
registered destinations, ``verify --repair``, full compactions of A's queue and of B's tables, ``tx relay``
and SIGKILLs of every process kind, a gateway included, come at moments drawn from a printed seed. At each
quiet point every destination must equal what A implies (an oracle written apart from verify's code), the
queue and the outboxes be empty and nothing be dead-lettered.

Modules: ``schedule`` (drawn from the seed), ``processes`` (real OS processes, killed whole),
``commands`` (their command lines), ``producer`` and ``compact`` (the two process kinds that are not
``accumulo-export`` commands), ``gateways`` (the killable gateway pools), ``destinations`` (primary and
registered), ``oracle``, ``quiet`` (a quiet point's settling and checks), ``run`` (the run), ``report`` (the
log and the summary), ``__main__`` (the command line).
"""

from .run import ChaosOptions, ChaosRun
from .schedule import Schedule, draw_schedule

__all__ = ["ChaosOptions", "ChaosRun", "Schedule", "draw_schedule"]
