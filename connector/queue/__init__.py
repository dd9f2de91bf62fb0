"""The export queue: a producer adds ``(key, value, seq)`` entries to a table, a drain exports them in batches
and then deletes exactly what it exported.

Modules, one idea each: ``layout`` (rows, buckets, splits, dead letters), ``config`` (one queue's settings),
``codec`` (exports to entries and back, with :mod:`connector.serializers`), ``producer`` (adding), ``status`` (what
waits), ``stored_config`` (what ``init`` recorded), ``reader`` (reading entries), ``native_rows`` (entry rows taken
apart and deleted by the Rust core), ``batches`` (re-cut and read ahead), ``settings`` (how a drain runs),
``drain`` (exporting and deleting them), ``progress`` (a drain round's live counters), ``planner`` (which buckets a
stream drains next), ``errors``, ``dead_letters`` (what a drain set aside), ``requeued`` (which destinations a
re-queued export skips), ``marks`` (bucket notifications for streaming drains), ``compaction`` (dropping the delete
markers drains leave), ``destinations`` (tables every drain exports to besides its own, fenced by an epoch),
``feeders`` (the queues a destination table records as writing into it)::

    config = QueueConfig(table="exports", qid="idx", num_buckets=64)
    with ExportQueue(conn_a, config) as queue:
        queue.init()
        queue.add({"doc": 7}, {"title": "x"}, seq=1001)
    stats = drain_queue(conn_a, config, exporter)
"""

from .config import QueueConfig
from .dead_letters import DeadLetter, dead_letters, requeue_dead_letters
from .destinations import Destination, register_destination, registered_destinations, unregister_destination
from .drain import DrainStats, drain_bucket, drain_buckets, drain_queue
from .errors import EntryTranslationError, MalformedEntryError, QueueConfigError, QueueError
from .layout import QueueLayout, bucket_of
from .producer import ExportQueue
from .settings import DrainSettings
from .status import BucketStatus, QueueLag, QueueStatus, count_entries, queue_lag, queue_status

# the public API; internals (the stored configuration, readers, marks, progress rows, the codec, the row
# parser) are imported from their modules; serializers are connector.serializers'
__all__ = [
    "BucketStatus", "DeadLetter", "Destination", "DrainSettings", "DrainStats", "EntryTranslationError", "ExportQueue",
    "MalformedEntryError", "QueueConfig", "QueueConfigError", "QueueError", "QueueLag", "QueueLayout", "QueueStatus",
    "bucket_of", "count_entries", "dead_letters", "drain_bucket", "drain_buckets", "drain_queue", "queue_lag",
    "queue_status", "register_destination", "registered_destinations", "requeue_dead_letters",
    "unregister_destination",
]
