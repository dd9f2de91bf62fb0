"""Planning a streaming drain: which buckets to drain next, from the bucket marks (O(buckets) per trigger)
and, every ``sweep_seconds``, from a keys-only sweep of the whole queue for entries written without a mark.

Both streaming engines plan with :class:`StreamPlanner`: the Spark source (``connector.spark.queue_source``)
and the in-process stream (``connector.spark.drain_job.run_local_stream``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import pyarrow.compute as pc

from connector import columnar
from connector.accumulo import Connection

from .config import QueueConfig
from .layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from .marks import read_marks
from .status import KEYS_ONLY

#: the longest an entry written without a bucket mark waits for a streaming drain
DEFAULT_SWEEP_SECONDS = 30.0
#: a sweep stops counting after this many keys (the buckets it did not reach count as that many each)
MAX_SWEEP_KEYS = 500_000


def pending_by_bucket(conn: Connection, config: QueueConfig, max_keys: int = MAX_SWEEP_KEYS) -> dict[int, int]:
    """Entries per non-empty bucket, from a keys-only scan, page by page (rows parsed natively). The scan
    stops after ``max_keys`` keys; the buckets it did not reach then count as ``max_keys`` each (one full
    round of them may be scheduled)."""
    layout = config.layout
    counts: dict[int, int] = {}
    seen = 0
    for page in conn.scan_batches(config.table, layout.queue_range(), columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)],
                                  iterators=[KEYS_ONLY], batch_size=10_000):
        if seen >= max_keys:
            return {b: counts.get(b, max_keys) for b in range(config.num_buckets)}
        seen += page.num_rows
        parsed = columnar.parse_entry_rows(page.column("row"), layout)
        for pair in pc.value_counts(parsed.column("bucket").drop_null()).to_pylist():  # per bucket, not per row
            counts[pair["values"]] = counts.get(pair["values"], 0) + pair["counts"]
        # malformed rows in a bucket's range count too: the drain gets to dead-letter them (rare: per row)
        for row in page.column("row").filter(parsed.column("error").is_valid()).to_pylist():
            bucket = layout.bucket_range_of(row)
            if bucket is not None:
                counts[bucket] = counts.get(bucket, 0) + 1
    return counts


class StreamPlanner:
    """The buckets a streaming drain should drain next, as {bucketHex: token}: the marked buckets whose
    token differs from the one they were last planned with, and, at the first call and then every
    ``sweep_seconds``, the buckets a sweep finds holding entries (token "", as they may have no mark)."""

    def __init__(self, connect: Callable[[], Connection], config: QueueConfig,
                 sweep_seconds: float = DEFAULT_SWEEP_SECONDS, max_sweep_keys: int = MAX_SWEEP_KEYS) -> None:
        self.connect, self.config = connect, config
        self.sweep_seconds, self.max_sweep_keys = sweep_seconds, max_sweep_keys
        self._last_sweep: float | None = None

    def marks(self) -> dict[str, str]:
        """bucketHex -> token of every marked bucket."""
        hex_of = self.config.layout.bucket_hex
        return {hex_of(b): t.decode() for b, t in read_marks(self.connect(), self.config).items()}

    def pending(self, planned: Mapping[str, str]) -> dict[str, str]:
        """What to drain next, given what the last micro-batch was ``planned`` with (bucketHex -> token)."""
        pending = {h: t for h, t in self.marks().items() if planned.get(h) != t}
        now = time.monotonic()
        if self._last_sweep is None or now - self._last_sweep >= self.sweep_seconds:
            self._last_sweep = now
            hex_of = self.config.layout.bucket_hex
            for b, n in pending_by_bucket(self.connect(), self.config, self.max_sweep_keys).items():
                if n:
                    pending.setdefault(hex_of(b), "")
        return pending
