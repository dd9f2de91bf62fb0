"""What a task does once in each of Spark's Python worker processes: take the heap it started with out of the
garbage collector's reach.

Spark's Python daemon forks the workers and runs a full ``gc.collect()`` after every task of a reused worker.
In a forked worker a full collection walks every object the worker inherited and imported (pyspark, pyarrow,
thriftpy2, ours: some 60,000), writing to each one's header and so copying the daemon's pages on write, every
task. Frozen (``gc.freeze()``), those objects are skipped; what later tasks allocate is still collected.
Measured on a 600k-entry drain: the Python workers' CPU per entry fell from about 4.1 to 2.85 µs.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_worker_heap() -> None:
    """Once per process (later calls return at once): collect, then freeze what is alive."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True
