"""Delete modes, and the compaction hazard they answer.

Accumulo drops a delete marker when a major compaction covers all of a tablet's files. A put older than
the delete (timestamp at or below it) that arrives *after* that compaction is visible again: an exporter
that receives exports out of order can resurrect stale cells.

``DeleteMode.DELETE`` (default) writes real Accumulo deletes: cheapest, and correct as long as no export
arrives later than a full major compaction of the cells it touches. ``DeleteMode.TOMBSTONE`` is immune:
a delete is written as a put of a tombstone value at ``ts = seq``. The versioning iterator (one version)
keeps the newest of tombstone and puts, compactions keep it too, so a late older put stays hidden. A
scan-time ``RegExFilter`` (built into Accumulo), stacked above the versioning iterator, hides the tombstones
from readers. Tombstones cost a little space until ``purge_tombstones(horizon)`` turns the ones below a
safe horizon (a seq below which no export can still arrive, e.g. the oldest seq left in the export queue)
into real deletes, which the next major compaction removes.
"""

from __future__ import annotations

import enum
import logging

from connector.accumulo import AccumuloError, Connection, IteratorSetting, Mutation

TOMBSTONE = b"\x00accumulo-export:tombstone\x00"
log = logging.getLogger(__name__)

FILTER_NAME = "exportTombstones"
FILTER_PRIORITY = 30  # above the versioning iterator (20): filter the newest version, not every version


class DeleteMode(enum.StrEnum):
    DELETE = "delete"
    TOMBSTONE = "tombstone"


def _tombstone_regex() -> str:
    # RegExFilter decodes values as UTF-8; NUL is written as an escape so the pattern is printable
    return TOMBSTONE.decode("utf-8").replace("\x00", "\\x00")


def hide_tombstones_filter(negate: bool = True) -> IteratorSetting:
    """Built-in RegExFilter that drops (``negate``) or keeps only tombstone cells."""
    return IteratorSetting(
        priority=FILTER_PRIORITY,
        name=FILTER_NAME,
        iterator_class="org.apache.accumulo.core.iterators.user.RegExFilter",
        properties={"valueRegex": _tombstone_regex(), "negate": "true" if negate else "false"},
    )


def install_tombstone_filter(conn: Connection, table: str) -> None:
    """Hide tombstones from every scan of ``table`` (scan scope only: compactions must keep them). Safe to
    run at once from many tasks: one that finds the filter attached by another meanwhile takes it."""
    key = f"table.iterator.scan.{FILTER_NAME}"
    if key in conn.table_properties(table):
        return
    try:
        conn.attach_iterator(table, hide_tombstones_filter(), scopes=("scan",))
    except AccumuloError as exc:
        # Accumulo refuses a second attach of a name ("iterator name conflict"), even of the same setting
        attached = conn.table_properties(table).get(key, "")
        if attached != f"{FILTER_PRIORITY},{hide_tombstones_filter().iterator_class}":
            raise
        log.debug("the tombstone filter of %s was attached meanwhile by another writer (%s)", table, exc)


def purge_tombstones(conn: Connection, table: str, horizon: int) -> int:
    """Replace tombstones with ``ts < horizon`` by real deletes at the same timestamp; returns how many.

    Only safe when no export with ``seq < horizon`` can still arrive. The next full major compaction then
    removes the deletes and what they hide.
    """
    selection = [
        IteratorSetting(FILTER_PRIORITY + 1, "purgeSelectTombstones",
                        "org.apache.accumulo.core.iterators.user.RegExFilter",
                        {"valueRegex": _tombstone_regex()}),
        IteratorSetting(FILTER_PRIORITY + 2, "purgeBelowHorizon",
                        "org.apache.accumulo.core.iterators.user.TimestampFilter",
                        {"end": f"LONG{horizon - 1}", "endInclusive": "true"}),
    ]
    # The table's own scan filter hides tombstones; remove it for this scan by overriding its option.
    visible = IteratorSetting(FILTER_PRIORITY, FILTER_NAME, "org.apache.accumulo.core.iterators.user.RegExFilter",
                              {"valueRegex": _tombstone_regex(), "negate": "false"})
    count = 0
    with conn.batch_writer(table) as writer:
        for cell in conn.scan(table, iterators=[visible, *selection]):
            writer.add_mutation(Mutation(cell.row).delete(cell.cf, cell.cq, visibility=cell.cv, timestamp=cell.ts))
            count += 1
    return count
