"""When each re-queued entry had been dead-lettered, and when a destination's bootstrap read A: what lets a drain
leave out, per destination, a re-queued export that destination's snapshot already holds.

A requeue writes, before the entries it puts back, one record per entry (``<qid>#requeued:<entry row>``, column
``q:ms``): the timestamp of its dead letter's cells, the time of the queue's records tablet when the dead letter
was written. A bootstrap records on its destination table a time of that same tablet before it reads A, and again
before its final check's verify reads A (:data:`BOOTSTRAP_READ_PROPERTY` + the queue's id: the latest). A drain
exports a re-queued entry to a destination only if its dead letter is not older than that destination's last
reading of A (:func:`left_out`). Why that is sound, and
what it assumes: DESIGN.md, "A dead letter older than a destination's bootstrap".
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from connector.accumulo import AccumuloSecurityError, Connection, Mutation, Range

from .config import QueueConfig
from .errors import QueueConfigError

log = logging.getLogger(__name__)

REQUEUED_FAMILY, REQUEUED_QUALIFIER = b"q", b"ms"
#: a probe of the records tablet's clock, in the row ``<qid>#requeued:`` itself (no entry row is empty)
CLOCK_FAMILY, CLOCK_QUALIFIER = b"c", b"clock"
#: on a destination table: the time of the queue's records tablet (ms) before its last bootstrap read A, and the
#: producer table it read (JSON)
BOOTSTRAP_READ_PROPERTY = "table.custom.accumulo-export.bootstrap-read."
#: a record whose entry is neither queued nor dead-lettered is removed once it is this old by the records tablet's
#: clock: far beyond the bound within which a drain exports a batch it read (connector.accumulo.writer)
KEEP_MS = 24 * 3600 * 1000

#: in the queue's config row, one cell per table whose outboxes feed the queue (what
#: ``connector.transactions.layout.SOURCES_FAMILY`` names; a test keeps the two equal)
SOURCES_FAMILY = b"x"
#: (serialized key, seq) of a re-queued entry -> when its dead letter was written (ms, the records tablet's time)
Requeued = Mapping[tuple[bytes, int], int]


def check_records_tablet(conn: Connection, queue: QueueConfig) -> None:
    """Refuse, in one line, a queue table split inside the queue's records (between ``<qid>#`` and ``<qid>:``):
    a dead letter's time and a bootstrap's are then taken by two tablets' clocks, which nothing relates."""
    low, high = queue.layout.records_range
    inside = [s for s in conn.list_splits(queue.table) if low < s < high]
    if inside:
        raise QueueConfigError(
            f"queue table {queue.table!r} is split inside queue {queue.qid!r}'s records at {inside[0]!r}: a requeue "
            "compares times of that one tablet; merge it (accumulo shell: merge -t "
            f"{queue.table} -b {low.decode('utf-8', 'replace')} -e {high.decode('utf-8', 'replace')})")


def requeued_records(queue: QueueConfig, dead_ms: Iterable[tuple[bytes, int]]) -> Iterator[Mutation]:
    """The records of re-queued entries: for each (entry row, its dead letter's time), when that entry had been
    dead-lettered."""
    prefix = queue.layout.requeued_prefix
    for row, ms in dead_ms:
        yield Mutation(prefix + row).put(REQUEUED_FAMILY, REQUEUED_QUALIFIER, str(ms).encode("ascii"))


def read_requeued(conn: Connection, queue: QueueConfig) -> dict[tuple[bytes, int], int]:
    """Every re-queued entry's record: (serialized key, seq) -> when its dead letter was written. A record of a
    row that is not an entry row of this queue is skipped."""
    layout, prefix = queue.layout, queue.layout.requeued_prefix
    out: dict[tuple[bytes, int], int] = {}
    for cell in conn.scan(queue.table, Range.prefix(prefix), columns=[(REQUEUED_FAMILY, REQUEUED_QUALIFIER)],
                          batch_size=1000):
        try:
            parsed = layout.parse_row(cell.row[len(prefix):])
            out[(parsed.key_bytes, parsed.seq)] = int(cell.value)
        except ValueError:
            continue
    return out


def records_time_ms(conn: Connection, queue: QueueConfig) -> int:
    """The time of the queue's records tablet now (ms): the timestamp it gives a probe written in the row
    ``<qid>#requeued:``, in the same tablet as the dead letters."""
    prefix = queue.layout.requeued_prefix
    conn.write(queue.table, [Mutation(prefix).put(CLOCK_FAMILY, CLOCK_QUALIFIER, b"")])
    for cell in conn.scan(queue.table, Range.exact_row(prefix), columns=[(CLOCK_FAMILY, CLOCK_QUALIFIER)]):
        return cell.ts
    raise QueueConfigError(f"queue {queue.qid!r}: the clock probe just written in {queue.table!r} is not there")


def earliest_records(conn: Connection, queue: QueueConfig) -> dict[bytes, int]:
    """The records as they are: entry row -> when its dead letter was first written (a requeue keeps the
    earliest time of an entry dead-lettered again)."""
    prefix = queue.layout.requeued_prefix
    return {c.row[len(prefix):]: int(c.value) for c in conn.scan(
        queue.table, Range.prefix(prefix), columns=[(REQUEUED_FAMILY, REQUEUED_QUALIFIER)], batch_size=1000)
        if c.row != prefix and c.value.isdigit()}


def sweep_requeued(conn: Connection, queue: QueueConfig) -> int:
    """Remove the records older than :data:`KEEP_MS` (by the records tablet's clock) whose entry is neither in the
    queue nor a dead letter; returns how many."""
    layout, prefix = queue.layout, queue.layout.requeued_prefix
    now = records_time_ms(conn, queue)
    old = [(c.row, c.ts) for c in conn.scan(queue.table, Range.prefix(prefix),
                                            columns=[(REQUEUED_FAMILY, REQUEUED_QUALIFIER)], batch_size=1000)
           if c.row != prefix and c.ts < now - KEEP_MS]
    gone = []
    for row, ts in old:
        entry = row[len(prefix):]
        waiting = any(True for _ in conn.scan(queue.table, Range.exact_row(entry), batch_size=1)) or any(
            True for _ in conn.scan(queue.table, Range.exact_row(layout.dead_letter_row(entry)), batch_size=1))
        if not waiting:
            gone.append(Mutation(row).delete(REQUEUED_FAMILY, REQUEUED_QUALIFIER, timestamp=ts))
    if gone:
        conn.write(queue.table, gone)
    return len(gone)


def record_bootstrap_read(dest: Connection, table: str, queue_id: str, ms: int, producer_table: str) -> bool:
    """Record on ``table`` that a bootstrap from ``producer_table`` fed by the queue ``queue_id`` reads A after
    ``ms`` (the records tablet's time), and read it back until this gateway shows it; False, with a warning,
    without the permission to alter the table."""
    name = BOOTSTRAP_READ_PROPERTY + queue_id
    reading = BootstrapReading(ms, producer_table)
    try:
        dest.set_table_property(table, name, reading.to_json())
    except AccumuloSecurityError as exc:
        log.warning("cannot record on %s when its bootstrap read A (%s): a dead letter older than it, re-queued, "
                    "is exported to it too; run verify --repair after such a requeue", table, exc)
        return False
    for _ in range(50):  # table properties reach the servers through ZooKeeper: until this one is seen here
        if bootstrap_reading(dest, table, queue_id) == reading:
            return True
        time.sleep(0.1)
    return False


@dataclass(frozen=True)
class BootstrapReading:
    """When a destination's last bootstrap read A (``ms``, the records tablet's time), and which producer table."""

    ms: int
    producer_table: str

    def to_json(self) -> str:
        return json.dumps({"ms": self.ms, "table": self.producer_table}, sort_keys=True)

    def covers(self, source_tables: Sequence[str]) -> int | None:
        """The time before which a re-queued export is in the destination's snapshot, when every export of the queue
        comes from the table that bootstrap read (``source_tables``: the tables recorded feeding the queue); None
        otherwise: an export of another table is in no snapshot of it."""
        return self.ms if tuple(source_tables) == (self.producer_table,) else None


def bootstrap_reading(dest: Connection, table: str, queue_id: str) -> BootstrapReading | None:
    """The last reading of A recorded on ``table`` by a bootstrap fed by the queue ``queue_id`` (None: none)."""
    value = dest.table_properties(table).get(BOOTSTRAP_READ_PROPERTY + queue_id)
    try:
        d = json.loads(value) if value is not None else None
        return BootstrapReading(int(d["ms"]), str(d["table"])) if isinstance(d, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


def left_out(exports: pa.RecordBatch, requeued: Requeued, read_ms: Sequence[int | None]) -> list[np.ndarray | None]:
    """Per destination (``read_ms``: when its bootstrap read A, None for none): which exports of the batch (True)
    it must not get: a re-queued export whose dead letter is older than that read (already in its snapshot)."""
    nothing: list[np.ndarray | None] = [None] * len(read_ms)
    if not requeued or all(ms is None for ms in read_ms) or not exports.num_rows:
        return nothing
    records = pa.table({"key": pa.array([k for k, _ in requeued], pa.binary()),
                        "seq": pa.array([s for _, s in requeued], pa.int64()),
                        "dead_ms": pa.array(list(requeued.values()), pa.int64())})
    batch = pa.table({"key": exports.column("key").cast(pa.binary()), "seq": exports.column("seq").cast(pa.int64()),
                      "at": pa.array(np.arange(exports.num_rows, dtype=np.int64))})
    found = batch.join(records, keys=["key", "seq"], join_type="inner")
    if not found.num_rows:
        return nothing
    dead = np.full(exports.num_rows, np.iinfo(np.int64).max, dtype=np.int64)  # not re-queued: never older
    dead[found.column("at").to_numpy()] = found.column("dead_ms").to_numpy()
    return [None if ms is None else dead < ms for ms in read_ms]
