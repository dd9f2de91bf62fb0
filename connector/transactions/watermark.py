"""How far a queue's destinations are: the watermark, and waiting for one commit to reach them (read-your-writes).

A commit's exports wait in one of three places until a drain has exported them to every destination of the
queue: the outbox of its row (not relayed yet), the queue (relayed, not drained yet) or the dead-letter range
(drained, but refused: never exported). The **watermark** is derived from what waits there, and from nothing
else: when something waits, it is one below the lowest seq waiting; every commit with a lower seq that was
visible when the watermark was computed is on every destination of the queue. No clock is compared with
another: seqs come from the producers' clocks and are only compared with each other.

The order of the scans makes the answer safe while relays and drains run: outboxes first, then the queue, then
the dead letters. An export only moves forward (outbox → queue → destination or dead letter; a relay writes the
entry before it deletes the outbox cell, a drain exports before it deletes the entry, a dead letter is written
before its entry is deleted), so an export that one scan missed because it moved on is found by the next.

:func:`wait_for_seq` is read-your-writes across clusters: after ``seq = txs.run(row, fn)`` returned, it returns
once nothing with a seq at or below ``seq`` waits, that is once the commit's exports are on every destination
(a destination a bootstrap is still building is not one yet: wait for the bootstrap).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Connection
from connector.errors import ConnectorError
from connector.queue import QueueConfig
from connector.queue.layout import DEAD_FAMILY, DEAD_REASON, ENTRY_FAMILY, ENTRY_QUALIFIER
from connector.queue.status import KEYS_ONLY

from .layout import EXPORT_KIND
from .targets import recorded_sources

#: cells a scan page holds
_PAGE = 10_000


@dataclass(frozen=True)
class Watermark:
    """What waits for a queue's destinations: ``outbox`` cells not relayed, ``entries`` not drained,
    ``dead_letters`` refused, and the ``lowest`` seq among them (None: nothing waits)."""

    qid: str
    outbox: int = 0
    entries: int = 0
    dead_letters: int = 0
    lowest: int | None = None

    @property
    def waiting(self) -> int:
        return self.outbox + self.entries + self.dead_letters

    @property
    def seq(self) -> int | None:
        """The watermark: every commit with a seq up to it (visible when it was computed) is on every
        destination. None when nothing waits: every visible commit is."""
        return None if self.lowest is None else self.lowest - 1

    def reached(self, seq: int) -> bool:
        """Whether a commit at ``seq`` (visible when this was computed) is on every destination."""
        return self.lowest is None or self.lowest > seq

    def describe(self) -> str:
        if self.lowest is None:
            return "nothing waits: every commit is on the destinations"
        parts = [f"{n:,} {what}" for n, what in ((self.outbox, "outbox cells not relayed"),
                                                 (self.entries, "queue entries not drained"),
                                                 (self.dead_letters, "dead letters")) if n]
        return f"watermark seq {self.seq} ({', '.join(parts)}; the lowest waiting seq is {self.lowest})"


def queue_watermark(conn: Connection, queue: QueueConfig) -> Watermark:
    """What waits for ``queue``'s destinations now (see the module's description for the order of the scans)."""
    layout = queue.layout
    lowest: int | None = None

    def lower(seq: int | None) -> None:
        nonlocal lowest
        if seq is not None:
            lowest = seq if lowest is None else min(lowest, seq)

    outbox = 0
    # an export's outbox qualifier: e:<queue table>:<entry row>, and the queue's entry rows start <qid>:
    target = b":".join([EXPORT_KIND, queue.table.encode("ascii"), queue.qid.encode("utf-8")]) + b":"
    for table, tx_layout in recorded_sources(conn, queue.table, layout.config_row).items():
        for page in conn.scan_batches(table, columns=[tx_layout.outbox_family], iterators=[KEYS_ONLY],
                                      batch_size=_PAGE):
            mine = _starts_with(page.column("cq"), target)
            found = pc.sum(mine).as_py() or 0
            if found:
                outbox += found
                lower(pc.min(page.column("ts").filter(mine)).as_py())
    entries = 0
    for page in conn.scan_batches(queue.table, layout.queue_range(), columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)],
                                  iterators=[KEYS_ONLY], batch_size=_PAGE):
        parsed = layout.parse_rows(page.column("row"))
        entries += page.num_rows
        lower(pc.min(parsed.column("seq")).as_py())
    dead = 0
    prefix = len(layout.dead_letter_prefix)
    for page in conn.scan_batches(queue.table, layout.dead_letter_range(), columns=[(DEAD_FAMILY, DEAD_REASON)],
                                  iterators=[KEYS_ONLY], batch_size=_PAGE):
        originals = pc.binary_slice(page.column("row"), prefix, 2**31 - 1)
        dead += page.num_rows
        lower(pc.min(layout.parse_rows(originals).column("seq")).as_py())
    return Watermark(queue.qid, outbox, entries, dead, lowest)


def _starts_with(values: pa.Array, prefix: bytes) -> pa.Array:
    """Which binary ``values`` start with ``prefix``."""
    return pc.equal(pc.binary_slice(values, 0, len(prefix)), pa.scalar(prefix, pa.binary()))


class WaitTimeout(ConnectorError, TimeoutError):
    """:func:`wait_for_seq` gave up: the commit's exports did not reach the destinations in time (the message
    says how far the watermark got and what waits)."""


def wait_for_seq(conn: Connection, queue: QueueConfig, seq: int, *, timeout: float = 60.0, poll: float = 0.2,
                 progress: Callable[[Watermark], None] | None = None) -> Watermark:
    """Return once a commit at ``seq`` (one that committed before this call) is on every destination of
    ``queue``: nothing at or below ``seq`` waits in the outboxes feeding it, in it or in its dead letters.
    :class:`WaitTimeout` after ``timeout`` seconds, saying how far it got. ``progress(watermark)`` hears each
    look."""
    deadline = time.monotonic() + timeout
    while True:
        mark = queue_watermark(conn, queue)
        if progress is not None:
            progress(mark)
        if mark.reached(seq):
            return mark
        if time.monotonic() >= deadline:
            stuck = " (a dead letter holds it: see 'accumulo-export queue dead-letters')" if mark.dead_letters else ""
            raise WaitTimeout(f"seq {seq} of queue {queue.qid!r} did not reach its destinations within {timeout:g} s: "
                              f"{mark.describe()}{stuck}")
        time.sleep(poll)
