"""The combine queue (formerly the collision-free map): producers queue updates ``(key, delta)`` without
reading the value; a combine pass folds a whole bucket's updates into the keys' values with one row-atomic
conditional mutation per key, and its update observer turns the changes ``(key, old, new)`` into exports
that reach cluster B through an export queue::

    combine = CombineConfig(table="wc", cid="counts", num_buckets=64)
    with CombineQueue(conn_a, combine) as q:
        q.init()
        q.update("word", 1)
    stats = combine_all(conn_a, combine, "sum", "changes", export_queue=queue_config)

Modules: ``layout`` (rows, documented there), ``config``, ``functions`` (combiners, observers), ``producer``,
``status``, ``processor`` (one bucket's pass; the key rows it reads in ``key_rows``, its counters in
``stats``). The ``combine`` command is in ``connector.cli.combine``; the job over bucket groups, on threads or
Spark, is ``connector.jobs.combine``.
"""

from .config import (
    CombineConfig,
    CombineConfigError,
    check_combine_config,
    read_combine_config,
    resolve_combine_config,
    store_combine_config,
)
from .functions import (
    Change,
    Combiner,
    Observer,
    changes_observer,
    combiner_from_name,
    observer_from_name,
    sum_combiner,
)
from .layout import CombineLayout
from .processor import CombineProcessor, combine_all, combine_buckets
from .producer import CombineQueue
from .stats import CombineStats
from .status import CombineBucketStatus, CombineStatus, combine_status

__all__ = [
    "Change", "CombineBucketStatus", "CombineConfig", "CombineConfigError", "CombineLayout", "CombineProcessor",
    "CombineQueue", "CombineStats", "CombineStatus", "Combiner", "Observer", "changes_observer",
    "check_combine_config", "combine_all", "combine_buckets", "combine_status", "combiner_from_name",
    "observer_from_name", "read_combine_config", "resolve_combine_config", "store_combine_config", "sum_combiner",
]
