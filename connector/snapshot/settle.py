"""Waiting until what was in flight when a check began has reached the destination's drain: the outbox cells
the producer table held then are relayed, and the queue entries it held then (after those relays) are
exported, each judged by its content as it was at the start, never by a timestamp. The hosts and the tablet
servers involved need not agree on the time: an entry's timestamp is its tablet server's clock, a seq its
producer's, and a check's start the checking host's.

An entry counts as gone once its row no longer holds the version that was there at the start (the drain
deletes each entry at its own timestamp; a relay repeated since writes the same export again under a newer
timestamp, which is then another entry of the same export).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Connection
from connector.queue import QueueConfig
from connector.queue.layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from connector.queue.status import KEYS_ONLY

from .functions import SnapshotSource

_SEPARATOR = pa.scalar(b"\xff", pa.binary())  # an entry's row, then its timestamp in decimal: never ambiguous


@dataclass
class Settled:
    """What was still there when a wait ended: outbox cells not relayed, queue entries not exported."""

    outbox: int = 0
    entries: int = 0

    @property
    def done(self) -> bool:
        return not self.outbox and not self.entries


def outbox_cells(a: Connection, table: str, source: SnapshotSource) -> set[tuple[bytes, bytes, int]]:
    """The outbox cells of the producer table now, as (row, qualifier, timestamp)."""
    return {(c.row, c.cq, c.ts) for c in a.scan(table, source.rows, columns=[source.layout.outbox_family],
                                                  iterators=[KEYS_ONLY], batch_size=10_000)}


def queue_entries(a: Connection, queue: QueueConfig) -> pa.Array:
    """The entries the queue holds now, each as its row and timestamp in one binary value."""
    keys = [pc.binary_join_element_wise(page.column("row"),
                                        pc.cast(pc.cast(page.column("ts"), pa.string()), pa.binary()), _SEPARATOR)
            for page in a.scan_batches(queue.table, queue.layout.queue_range(),
                                       columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)], iterators=[KEYS_ONLY],
                                       batch_size=10_000)]
    return pa.concat_arrays(keys) if keys else pa.array([], pa.binary())


def entries_left(a: Connection, queue: QueueConfig, entries: pa.Array) -> int:
    """How many of ``entries`` (:func:`queue_entries`) the queue still holds."""
    if not len(entries):
        return 0
    now = queue_entries(a, queue)
    return int(pc.sum(pc.is_in(now, value_set=entries)).as_py() or 0) if len(now) else 0


def settle(a: Connection, table: str, source: SnapshotSource, queue: QueueConfig, seconds: float,
           say: Callable[[str], None]) -> Settled:
    """Wait (at most ``seconds``) until the outbox cells ``table`` holds now are relayed, then until the entries
    the queue holds after that are exported. Returns what was still there when the wait ended."""
    deadline = time.monotonic() + seconds
    outbox = outbox_cells(a, table, source)
    if outbox:
        say(f"waiting for the {len(outbox):,} outbox cells of {table} to be relayed (at most {seconds:.0f} s)")
    while outbox and time.monotonic() < deadline:
        time.sleep(0.2)
        outbox &= outbox_cells(a, table, source)
    if outbox:  # not relayed: their entries are not in the queue yet, so they are not waited for either
        return Settled(outbox=len(outbox), entries=len(queue_entries(a, queue)))
    entries = queue_entries(a, queue)
    left = len(entries)
    if left:
        say(f"waiting for the drain to export the {left:,} entries the queue holds (at most {seconds:.0f} s)")
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = entries_left(a, queue, entries)
    return Settled(entries=left)
