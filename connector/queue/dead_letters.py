"""Dead letters: entries a drain could not decode or translate, kept with their reason (never lost).

Each lives at ``<qid>#dead:<original entry row>`` (see :mod:`connector.queue.layout`) with its reason, its
value and the timestamp of the original entry. After fixing the cause (a translator, a producer), re-queue
them: the original entry is written back and drained again like any other.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from connector.accumulo import Connection, Mutation

from .config import QueueConfig
from .layout import CONFIG_FAMILY, DEAD_FAMILY, DEAD_REASON, DEAD_TS, DEAD_VALUE, ENTRY_FAMILY, ENTRY_QUALIFIER

#: in the queue's config row: a fresh token written by every requeue before its entries, so the watermark, which
#: reads it before and after its scans, sees a requeue that ran meanwhile (:mod:`connector.transactions.watermark`)
REQUEUE_QUALIFIER = b"requeue"


@dataclass(frozen=True)
class DeadLetter:
    """One dead-lettered entry: its original ``row`` and ``value``, the ``reason`` it was set aside and the
    timestamp ``ts`` the original entry had."""

    row: bytes
    value: bytes
    reason: str
    ts: int | None


def dead_letters(conn: Connection, config: QueueConfig) -> Iterator[DeadLetter]:
    """The queue's dead letters, in row order."""
    layout = config.layout
    current: bytes | None = None
    cells: dict[bytes, bytes] = {}
    for cell in conn.scan(config.table, layout.dead_letter_range(), columns=[DEAD_FAMILY]):
        if cell.row != current:
            if current is not None:
                yield _dead_letter(layout.original_row(current), cells)
            current, cells = cell.row, {}
        cells[cell.cq] = cell.value
    if current is not None:
        yield _dead_letter(layout.original_row(current), cells)


def _dead_letter(row: bytes, cells: dict[bytes, bytes]) -> DeadLetter:
    ts = cells.get(DEAD_TS)
    return DeadLetter(row, cells.get(DEAD_VALUE, b""), cells.get(DEAD_REASON, b"").decode("utf-8", "replace"),
                      int(ts) if ts and ts.isdigit() else None)


def requeue_dead_letters(conn: Connection, config: QueueConfig, rows: Iterable[bytes] | None = None) -> int:
    """Write dead letters back as queue entries (all of them, or those whose original row is in ``rows``),
    then remove them; returns how many. Once they are listed, and before any entry is written, the queue's
    requeue token changes (what the watermark looks for). The entries are durable before their dead letters go,
    so a crash in between leaves a dead letter that is re-queued again (harmless: the same row and value)."""
    wanted = None if rows is None else set(rows)
    chosen = [d for d in dead_letters(conn, config) if wanted is None or d.row in wanted]
    if not chosen:
        return 0
    layout = config.layout
    with conn.batch_writer(config.table) as writer:
        writer.add_mutation(Mutation(layout.config_row).put(CONFIG_FAMILY, REQUEUE_QUALIFIER,
                                                            secrets.token_hex(8).encode("ascii")))
        writer.flush()  # the token changed before any entry comes back
        # no timestamp: the server's time, so the drain deletes exactly this new version
        writer.add_mutations(Mutation(d.row).put(ENTRY_FAMILY, ENTRY_QUALIFIER, d.value) for d in chosen)
        writer.flush()  # the entries are durable before their dead letters go
        writer.add_mutations(Mutation(layout.dead_letter_row(d.row)).delete(DEAD_FAMILY, DEAD_REASON)
                             .delete(DEAD_FAMILY, DEAD_VALUE).delete(DEAD_FAMILY, DEAD_TS) for d in chosen)
    return len(chosen)
