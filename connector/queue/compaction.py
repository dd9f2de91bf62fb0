"""Keeping a drained queue cheap to scan: the delete markers drains leave, and the compaction that drops them.

Every drained entry leaves a delete marker in the queue's tablets, and every bucket mark a producer sets
leaves the mark's older version. Accumulo drops them only in a major compaction that covers all of a
tablet's files. Its own compactions merge files by size, so on a queue drained as fast as it fills the dead
keys collect in the largest files for ever longer stretches, and each scan of a bucket walks past all of
those in its range: a stream's micro-batches slow down by the hour (``bench_soak``).

So a drain asks Accumulo to flush and compact the queue's tablets once enough dead keys may have collected
(:class:`QueueCompactor`), and only those tablets: the split points ``queue init`` adds bound them (``<qid>#``
and ``<qid>:~``). A compaction keeps every entry: a late entry (an older seq, behind any number of markers) is
still read, and nothing is skipped; only the markers go. Its cost is proportional to what the drain deleted
since the last one, plus the queue's live rows (waiting entries, dead letters), which it rewrites: few when
the drain keeps up.

The counts of keys in files come from Accumulo's metadata table (per file: size and keys, written with the
file), so checking them costs a short scan; keys still in memory are not there, which is why drains also
count what they delete.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from connector.accumulo import AccumuloSecurityError, Connection, Range

from .config import QueueConfig

log = logging.getLogger(__name__)

METADATA_TABLE = "accumulo.metadata"
#: the metadata column family of a tablet's files: qualifier the file, value ``<bytes>,<keys>[,<time>]``
FILE_FAMILY = b"file"
#: a compaction is asked for at most this often by one compactor (one is likely still running before)
MIN_COMPACTION_INTERVAL = 30.0

_requests_lock = threading.Lock()
_requests = 0


def compactions_requested() -> int:
    """Compactions of queue tablets that the compactors of this process asked for so far (``--metrics-port``
    shows it)."""
    return _requests


@dataclass(frozen=True)
class QueueFiles:
    """The files of a queue's tablets, from Accumulo's metadata: ``keys`` counts every key written to them
    (entries, delete markers, older versions of marks), ``bytes`` their size on disk."""

    tablets: int
    files: int
    keys: int
    bytes: int

    def dead_keys(self, entries: int) -> int:
        """Keys a full scan walks past without returning them, given the queue holds ``entries`` entries."""
        return max(0, self.keys - entries)


def queue_files(conn: Connection, config: QueueConfig) -> QueueFiles:
    """The files of the queue's tablets (raises ``AccumuloSecurityError`` if the gateway's user may not read
    ``accumulo.metadata``)."""
    first, last = config.layout.outer_splits()
    table_id = conn.table_id(config.table).encode()
    # a tablet's metadata row is <table id>;<its end row>: the queue's tablets end after `first`, up to `last`
    rng = Range.rows(table_id + b";" + first + b"\x00", table_id + b";" + last)
    tablets: set[bytes] = set()
    files = keys = size = 0
    for cell in conn.scan(METADATA_TABLE, rng, columns=[FILE_FAMILY]):
        tablets.add(cell.row)
        fields = cell.value.split(b",")
        files += 1
        size += int(fields[0])
        keys += int(fields[1])
    return QueueFiles(len(tablets), files, keys, size)


def table_file_keys(conn: Connection, table: str) -> int:
    """The keys in ``table``'s files by Accumulo's metadata (estimates; delete markers and the versions they hide
    included until a compaction drops them; what is still in memory is not counted)."""
    table_id = conn.table_id(table)
    rng = Range.rows(f"{table_id};", f"{table_id}<")  # <id>;<end row> for each tablet, <id>< for the last
    return sum(int(cell.value.split(b",")[1]) for cell in conn.scan(METADATA_TABLE, rng, columns=[FILE_FAMILY]))


def compact_queue(conn: Connection, config: QueueConfig, wait: bool = False) -> None:
    """Ask Accumulo to flush and fully compact the queue's tablets (no tablet outside the queue's split
    points); ``wait``: return once done, else once Accumulo flushed their memory (it waits for that)."""
    first, last = config.layout.outer_splits()
    conn.compact_table(config.table, first, last, flush=True, wait=wait)


class QueueCompactor:
    """Compacts a queue's tablets once about ``dead_keys`` dead keys may have collected in them (0: never),
    at most once per ``min_interval`` seconds. Two signals, each where it is known:

    - :meth:`deleted`: a drain counts the entries it deleted (markers still in memory included, which no
      file shows yet), and a compaction (which flushes memory first) is due once they reach ``dead_keys``;
    - :meth:`check`: the tablets' files hold ``dead_keys`` more keys than the queue has entries, and at least
      as many: what other drains, or drains that stopped or crashed, left. Keys that are neither entries nor
      markers (dead letters, marks, another queue's rows in the same tablets) would look dead too: after its
      first compaction a compactor counts only growth over the least excess it saw since, so they cause one
      useless compaction at most, not one per check.

    The drain does not wait for a compaction, nor for the request (made on a thread of its own). A compaction
    never fails its drain: a gateway user who may not read ``accumulo.metadata`` loses the check, one who may
    not compact the table loses both, each with one warning; any other error is logged and the compactor tries
    again ``min_interval`` later. The drain goes on either way, only slower while markers collect. Thread-safe
    (a stream's sweep checks on its own thread)."""

    def __init__(self, config: QueueConfig, dead_keys: int, min_interval: float = MIN_COMPACTION_INTERVAL) -> None:
        self.config, self.dead_keys, self.min_interval = config, dead_keys, min_interval
        self._deleted = 0
        self._floor = 0  # the least excess of keys over entries seen since the last compaction asked for
        self._last: float | None = None
        self._may_read_metadata = True
        self._may_compact = True
        self._warned = False
        self._lock = threading.Lock()
        self._request: threading.Thread | None = None
        #: compactions asked for so far
        self.requested = 0

    def deleted(self, conn: Connection, entries: int) -> bool:
        """Count ``entries`` more deleted by this drain, and compact if they made it due. Returns whether it
        asked for a compaction."""
        with self._lock:
            self._deleted += entries
            if not self._due() or self._deleted < self.dead_keys:
                return False
            return self._compact(conn, f"this drain deleted {self._deleted} entries since its last compaction")

    def check(self, conn: Connection, entries: int) -> bool:
        """Compact if the tablets' files hold enough dead keys, given the queue holds about ``entries``
        entries. Returns whether it asked for a compaction."""
        with self._lock:
            if not self._due() or not self._may_read_metadata:
                return False
            try:
                files = queue_files(conn, self.config)
            except Exception as exc:  # noqa: BLE001 - a check never fails its drain
                self._failed(exc, reading=True)
                return False
            excess = files.dead_keys(entries)
            self._floor = min(self._floor, excess)
            if excess - self._floor < max(self.dead_keys, entries):
                return False
            return self._compact(conn, f"its {files.files} files hold {files.keys} keys for about {entries} "
                                       f"entries")

    def _due(self) -> bool:
        if not self.dead_keys or not self._may_compact:
            return False
        return self._last is None or time.monotonic() - self._last >= self.min_interval

    def _compact(self, conn: Connection, why: str) -> bool:
        """Ask on a thread of its own: Accumulo flushes the tablets' memory before it returns, which would hold
        up the drain's batch meanwhile (non-daemon: a process ending waits for the request to be made)."""
        global _requests
        self._last, self._deleted, self._floor = time.monotonic(), 0, 1 << 62
        self.requested += 1
        with _requests_lock:
            _requests += 1
        log.info("queue %s: compacting its tablets: %s", self.config.qid, why)
        self._request = threading.Thread(target=self._ask, args=(conn,), name=f"compact-{self.config.qid}")
        self._request.start()
        return True

    def _ask(self, conn: Connection) -> None:
        try:
            compact_queue(conn, self.config)
        except Exception as exc:  # noqa: BLE001 - logged: a compaction never fails its drain
            with self._lock:
                self._failed(exc, reading=False)

    def wait(self, timeout: float | None = None) -> None:
        """Wait until the last compaction asked for was accepted (or refused)."""
        if self._request is not None:
            self._request.join(timeout)

    def _failed(self, exc: Exception, reading: bool) -> None:
        if isinstance(exc, AccumuloSecurityError):
            if reading:
                self._may_read_metadata = False
                what = "may not read accumulo.metadata, so it counts only what it deletes itself"
            else:
                self._may_compact = False
                what = "may not compact them: delete markers collect until Accumulo compacts them itself"
            log.warning("queue %s: the drain %s (%s); scans of the queue slow down while markers collect",
                        self.config.qid, what, exc)
            return
        self._last = time.monotonic()
        (log.debug if self._warned else log.warning)(
            "queue %s: could not check or compact its tablets (%s: %s); trying again in %.0f s", self.config.qid,
            type(exc).__name__, exc, self.min_interval)
        self._warned = True


__all__ = ["QueueCompactor", "QueueFiles", "compact_queue", "compactions_requested", "queue_files"]
