"""The export queue: a producer adds ``(key, value, seq)`` entries to a table, a drain exports them in batches
and then deletes exactly what it exported.

Modules, one idea each: ``layout`` (rows, buckets, splits, dead letters), ``config`` (one queue's settings),
``codec`` (exports to entries and back, with :mod:`connector.serializers`), ``producer`` (adding), ``status``
(what waits), ``stored_config`` (what ``init`` recorded), ``reader`` (reading entries), ``batches`` (re-cut
and read ahead), ``drain`` (exporting and deleting them), ``progress`` (a drain round's live counters),
``dead_letters`` (what a drain set aside), ``marks`` (bucket notifications for streaming drains)::

    config = QueueConfig(table="exports", qid="idx", num_buckets=64)
    with ExportQueue(conn_a, config) as queue:
        queue.init()
        queue.add({"doc": 7}, {"title": "x"}, seq=1001)
    stats = drain_queue(conn_a, config, exporter)
"""

from connector.serializers import BytesSerializer, JsonSerializer, Serializer, serializer_from_name

from .codec import EntryCodec
from .config import QueueConfig, default_buckets_per_tablet
from .dead_letters import DeadLetter, dead_letters, requeue_dead_letters
from .drain import DEFAULT_BUFFER_BYTES, DrainStats, EntryProcessor, drain_bucket, drain_buckets, drain_queue
from .errors import EntryTranslationError, MalformedEntryError, QueueError
from .layout import ParsedRow, QueueLayout, bucket_of, hex_width, murmur3_32
from .marks import read_marks, settle_marks
from .producer import ExportQueue
from .progress import clear_progress, read_progress
from .reader import ENTRY_SCHEMA, QueueEntry, entries_to_batches, read_bucket, read_bucket_batches, read_bucket_head
from .status import KEYS_ONLY, BucketStatus, QueueLag, QueueStatus, bucket_ages, count_entries, queue_lag, queue_status
from .stored_config import QueueConfigError, check_config, read_stored_config, resolve_config, store_config

__all__ = [
    "BucketStatus", "read_marks", "settle_marks", "DeadLetter", "dead_letters", "requeue_dead_letters", "KEYS_ONLY",
    "count_entries", "BytesSerializer", "DEFAULT_BUFFER_BYTES", "DrainStats", "EntryCodec", "EntryProcessor",
    "EntryTranslationError", "ExportQueue", "JsonSerializer", "MalformedEntryError", "ParsedRow", "QueueConfig",
    "QueueConfigError", "QueueEntry", "QueueError", "QueueLayout", "QueueStatus", "Serializer", "bucket_of",
    "check_config", "default_buckets_per_tablet", "drain_bucket", "drain_buckets", "clear_progress",
    "read_progress", "drain_queue", "hex_width", "murmur3_32", "queue_status", "read_bucket", "read_bucket_batches",
    "entries_to_batches", "ENTRY_SCHEMA", "read_stored_config", "resolve_config", "store_config",
    "serializer_from_name", "read_bucket_head", "QueueLag", "bucket_ages", "queue_lag",
]
