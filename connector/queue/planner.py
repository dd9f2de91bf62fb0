"""Planning a streaming drain: which buckets to drain next, from the bucket marks (O(buckets) per trigger)
and, every ``sweep_seconds``, from a keys-only sweep of the whole queue (in the background) for entries
written without a mark.

Both streaming engines plan with :class:`StreamPlanner`: the Spark source (``connector.spark.queue_source``)
and the in-process stream (``connector.jobs.stream_drain``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

import pyarrow.compute as pc

from connector.accumulo import Connection

from .compaction import QueueCompactor
from .config import QueueConfig
from .layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from .marks import read_marks
from .settings import DEFAULT_COMPACT_DEAD_KEYS, DEFAULT_SWEEP_SECONDS
from .status import KEYS_ONLY

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
        parsed = layout.parse_rows(page.column("row"))
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
    token differs from the one they were last planned with, plus the buckets a sweep found holding entries
    (token "", as they may have no mark).

    The sweep runs on a thread of its own, started at the first call and then every ``sweep_seconds``, so a
    trigger never waits for it (a sweep of a large backlog takes seconds); its findings join the next plan
    after it finished. Its findings may be stale: a bucket drained meanwhile is then read and found empty.
    After counting, the sweep compacts the queue's tablets if their files hold ``compact_dead_keys`` keys more
    than it counted entries (:class:`connector.queue.compaction.QueueCompactor`)."""

    def __init__(self, connect: Callable[[], Connection], config: QueueConfig,
                 sweep_seconds: float = DEFAULT_SWEEP_SECONDS, max_sweep_keys: int = MAX_SWEEP_KEYS,
                 compact_dead_keys: int = DEFAULT_COMPACT_DEAD_KEYS) -> None:
        self.connect, self.config = connect, config
        self.sweep_seconds, self.max_sweep_keys = sweep_seconds, max_sweep_keys
        self.compactor = QueueCompactor(config, compact_dead_keys)
        self._last_sweep: float | None = None
        self._sweeper: threading.Thread | None = None
        self._found: set[int] = set()
        self._failure: BaseException | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        # Spark pickles the stream reader (and so its planner) to the read tasks, which never plan: the
        # sweep's thread, lock and findings stay here
        return {"connect": self.connect, "config": self.config, "sweep_seconds": self.sweep_seconds,
                "max_sweep_keys": self.max_sweep_keys, "compact_dead_keys": self.compactor.dead_keys}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def marks(self) -> dict[str, str]:
        """bucketHex -> token of every marked bucket."""
        hex_of = self.config.layout.bucket_hex
        return {hex_of(b): t.decode() for b, t in read_marks(self.connect(), self.config).items()}

    def pending(self, planned: Mapping[str, str]) -> dict[str, str]:
        """What to drain next, given what the last micro-batch was ``planned`` with (bucketHex -> token).
        Raises what the last sweep failed with, if it failed."""
        pending = {h: t for h, t in self.marks().items() if planned.get(h) != t}
        hex_of = self.config.layout.bucket_hex
        for bucket in self._take_found():
            pending.setdefault(hex_of(bucket), "")
        now = time.monotonic()
        if (self._last_sweep is None or now - self._last_sweep >= self.sweep_seconds) and not self._sweeping():
            self._last_sweep = now
            self._sweeper = threading.Thread(target=self._sweep, name="queue-sweep", daemon=True)
            self._sweeper.start()
        return pending

    def _sweeping(self) -> bool:
        return self._sweeper is not None and self._sweeper.is_alive()

    def _sweep(self) -> None:
        try:
            conn = self.connect()
            counts = pending_by_bucket(conn, self.config, self.max_sweep_keys)
        except BaseException as exc:  # noqa: BLE001 - raised by the next pending() on the planning thread
            with self._lock:
                self._failure = exc
            return
        with self._lock:
            self._found |= {b for b, n in counts.items() if n}
        self.compactor.check(conn, sum(counts.values()))  # never raises: it logs

    def _take_found(self) -> set[int]:
        with self._lock:
            failure, self._failure = self._failure, None
            found, self._found = self._found, set()
        if failure is not None:
            raise failure
        return found
