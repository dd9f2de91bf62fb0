"""Dead letters: entries a drain could not decode or translate, kept with their reason (never lost).

Each lives at ``<qid>#dead:<original entry row>`` (see :mod:`connector.queue.layout`) with its reason, its
value and the timestamp of the original entry. After fixing the cause (a translator, a producer), re-queue
them: the original entry is written back and drained again like any other, to every destination but those
whose bootstrap read A after the dead letter was written (their snapshot holds its commit already:
:mod:`connector.queue.requeued`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from connector.accumulo import Connection, Mutation
from connector.accumulo.errors import SendDeadlinePassedError
from connector.accumulo.writer import EXPORT_HOLD_SECONDS, send_deadline

from .config import QueueConfig
from .destinations import raise_epoch, wait_for_acknowledgements
from .errors import QueueError
from .layout import CONFIG_FAMILY, DEAD_FAMILY, DEAD_REASON, DEAD_TS, DEAD_VALUE, ENTRY_FAMILY, ENTRY_QUALIFIER
from .requeued import check_records_tablet, earliest_records, requeued_records, sweep_requeued

#: in the queue's config row: a fresh token written by every requeue before its entries, so the watermark, which
#: reads it before and after its scans, sees a requeue that ran meanwhile (:mod:`connector.transactions.watermark`)
REQUEUE_QUALIFIER = b"requeue"
#: how many times a requeue reads its dead letters again when writing them back outlasted the bound
REQUEUE_ATTEMPTS = 3

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeadLetter:
    """One dead-lettered entry: its original ``row`` and ``value``, the ``reason`` it was set aside and the
    timestamp ``ts`` the original entry had."""

    row: bytes
    value: bytes
    reason: str
    ts: int | None
    #: the timestamps of the dead letter's own cells (qualifier -> ts): a requeue deletes exactly these versions
    cell_ts: tuple[tuple[bytes, int], ...] = ()

    @property
    def dead_ms(self) -> int | None:
        """When the dead letter was written, by the clock of the queue's records tablet (its oldest cell read)."""
        return min((ts for _, ts in self.cell_ts), default=None)


def dead_letters(conn: Connection, config: QueueConfig) -> Iterator[DeadLetter]:
    """The queue's dead letters, in row order."""
    layout = config.layout
    current: bytes | None = None
    cells: dict[bytes, tuple[bytes, int]] = {}
    for cell in conn.scan(config.table, layout.dead_letter_range(), columns=[DEAD_FAMILY]):
        if cell.row != current:
            if current is not None:
                yield _dead_letter(layout.original_row(current), cells)
            current, cells = cell.row, {}
        cells[cell.cq] = (cell.value, cell.ts)
    if current is not None:
        yield _dead_letter(layout.original_row(current), cells)


def _dead_letter(row: bytes, cells: dict[bytes, tuple[bytes, int]]) -> DeadLetter:
    ts = cells.get(DEAD_TS, (b"", 0))[0]
    return DeadLetter(row, cells.get(DEAD_VALUE, (b"", 0))[0],
                      cells.get(DEAD_REASON, (b"", 0))[0].decode("utf-8", "replace"),
                      int(ts) if ts and ts.isdigit() else None,
                      tuple((cq, cell_ts) for cq, (_, cell_ts) in sorted(cells.items())))


def requeue_dead_letters(conn: Connection, config: QueueConfig, rows: Iterable[bytes] | None = None, *,
                         timeout: float = 300.0) -> int:
    """Write dead letters back as queue entries (all of them, or those whose original row is in ``rows``),
    then remove them; returns how many.

    Once they are listed, each entry's record (when its dead letter was written: :mod:`.requeued`) is written, then
    the queue's requeue token changes (what the watermark looks for) and its registration epoch rises, in one
    conditional mutation, and the entries are written only once every drain process acknowledged that epoch (or
    stayed silent: :func:`~connector.queue.destinations.wait_for_acknowledgements`, ``timeout`` seconds at most), so
    every drain that exports one knows its record and leaves it out of a destination bootstrapped since. A queue
    table split inside the queue's records is refused first (``QueueConfigError``). The entries are durable before
    their dead letters go, so a crash in between leaves a dead letter that is re-queued again (harmless: the same
    row and value). Each dead letter is deleted at its own cells' timestamps, never at the server's time: a drain
    that refused the requeued entry again meanwhile wrote a newer dead letter of the same row, which must stay (the
    simulation's seed 4: it was deleted with the old one, and the export was lost)."""
    wanted = None if rows is None else set(rows)
    chosen = [d for d in dead_letters(conn, config) if wanted is None or d.row in wanted]
    if not chosen:
        return 0
    check_records_tablet(conn, config)
    layout = config.layout
    sweep_requeued(conn, config)
    # an entry dead-lettered again keeps the time it was first dead-lettered: its commit was visible then
    earliest = earliest_records(conn, config)
    dead_ms = [(d.row, min(d.dead_ms, earliest.get(d.row, d.dead_ms))) for d in chosen if d.dead_ms is not None]
    with conn.batch_writer(config.table) as writer:
        writer.add_mutations(requeued_records(config, dead_ms))
        writer.flush()  # the records are durable before the epoch that makes every drain process read them
        # the token changes before any entry comes back (one conditional mutation with the epoch)
        epoch = raise_epoch(conn, config, Mutation(layout.config_row).put(CONFIG_FAMILY, REQUEUE_QUALIFIER,
                                                                          secrets.token_hex(8).encode("ascii")))
        wait_for_acknowledgements(conn, config, epoch, timeout=timeout)
    return _write_back(conn, config, {d.row for d in chosen})


def _write_back(conn: Connection, config: QueueConfig, rows: set[bytes]) -> int:
    """Write the dead letters of ``rows`` still there back as entries, then delete them; how many. The entries are
    copies of the dead letters read, held to the bound like every writer of a read export (DESIGN.md: "The
    purge's bound"): read again just before, and sent within EXPORT_HOLD_SECONDS of that read or not at all (then
    read again). A requeue that stalled, or one beside another that moved them meanwhile (and a drain that
    exported and deleted them), would otherwise bring back an export already drained, after a purge's grace."""
    layout = config.layout
    for attempt in range(1, REQUEUE_ATTEMPTS + 1):
        read_at = time.monotonic()
        still = [d for d in dead_letters(conn, config) if d.row in rows]
        if not still:
            return 0
        try:
            with send_deadline(read_at + EXPORT_HOLD_SECONDS), conn.batch_writer(config.table) as writer:
                # no timestamp: the server's time, so the drain deletes exactly this new version
                writer.add_mutations(Mutation(d.row).put(ENTRY_FAMILY, ENTRY_QUALIFIER, d.value) for d in still)
                writer.flush()  # durable within the bound
        except SendDeadlinePassedError as exc:  # what it sent may have landed: harmless, the same entries
            log.warning("queue %s: requeue held its dead letters over the bound (%s); reading them again (attempt "
                        "%d of %d)", config.qid, exc, attempt, REQUEUE_ATTEMPTS)
            continue
        # the entries are durable before their dead letters go
        with conn.batch_writer(config.table) as writer:
            writer.add_mutations(_delete_versions(layout.dead_letter_row(d.row), d) for d in still)
        return len(still)
    raise QueueError(f"queue {config.qid!r}: the requeue could not write its dead letters back within "
                     f"{EXPORT_HOLD_SECONDS:.0f} s of reading them, {REQUEUE_ATTEMPTS} times; nothing of the last "
                     "attempt was deleted: run it again")


def _delete_versions(row: bytes, letter: DeadLetter) -> Mutation:
    """Deletes of exactly the versions of ``letter``'s cells that were read."""
    mutation = Mutation(row)
    for qualifier, ts in letter.cell_ts:
        mutation.delete(DEAD_FAMILY, qualifier, timestamp=ts)
    return mutation
