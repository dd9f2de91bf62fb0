"""Delete modes, and the compaction hazard they answer.

Accumulo drops a delete marker when a major compaction covers all of a tablet's files. A put older than
the delete (timestamp at or below it) that arrives *after* that compaction is visible again: an exporter
that receives exports out of order can resurrect stale cells.

``DeleteMode.TOMBSTONE`` (the default, :data:`DEFAULT_DELETE_MODE`) is immune: a delete is written as a put of
a tombstone value at ``ts = seq``. The versioning iterator (one version)
keeps the newest of tombstone and puts, compactions keep it too, so a late older put stays hidden. A
scan-time ``RegExFilter`` (built into Accumulo), stacked above the versioning iterator, hides the tombstones
from readers. Tombstones cost a little space until a purge (:mod:`connector.snapshot.purge`, the command
``accumulo-export purge-tombstones``) proves which ones no late export can need and turns them into real deletes,
which the next full major compaction removes.

``DeleteMode.DELETE`` writes real Accumulo deletes: cheaper, but correct only as long as no export arrives later
than a full major compaction of the cells it touches. Exports do arrive late (a crashed producer's outbox relayed
after a newer commit of its row was drained), and Accumulo compacts on its own, so a delete-mode destination can
show a stale cell until the next verify repairs it: choose it only where that is acceptable.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Iterator

import pyarrow as pa

from connector.accumulo import UPDATE_SCHEMA, AccumuloError, Connection, IteratorSetting

TOMBSTONE = b"\x00accumulo-export:tombstone\x00"
log = logging.getLogger(__name__)

FILTER_NAME = "exportTombstones"
FILTER_PRIORITY = 30  # above the versioning iterator (20): filter the newest version, not every version


class DeleteMode(enum.StrEnum):
    DELETE = "delete"
    TOMBSTONE = "tombstone"


#: how a table's deletes are written when its first writer is told no mode (the module's description says why);
#: after that the table's recorded mode rules (:mod:`connector.export.table_mode`)
DEFAULT_DELETE_MODE = DeleteMode.TOMBSTONE


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


def install_tombstone_filter(conn: Connection, table: str) -> bool:
    """Hide tombstones from every scan of ``table`` (scan scope only: compactions must keep them); True when this
    call attached the filter. Safe to run at once from many tasks: one that finds the filter attached by another
    meanwhile takes it. A tablet server applies it a little later: a writer waits for that
    (:func:`connector.export.table_mode.prepare_destination`)."""
    key = f"table.iterator.scan.{FILTER_NAME}"
    if key in conn.table_properties(table):
        return False
    try:
        conn.attach_iterator(table, hide_tombstones_filter(), scopes=("scan",))
    except AccumuloError as exc:
        # Accumulo refuses a second attach of a name ("iterator name conflict"), even of the same setting
        attached = conn.table_properties(table).get(key, "")
        if attached != f"{FILTER_PRIORITY},{hide_tombstones_filter().iterator_class}":
            raise
        log.debug("the tombstone filter of %s was attached meanwhile by another writer (%s)", table, exc)
        return False
    return True


def tombstones_below(conn: Connection, table: str, horizon: int | None,
                     batch_size: int = 10_000) -> Iterator[pa.RecordBatch]:
    """The tombstones of ``table`` with ``ts < horizon`` (every one when ``horizon`` is None), as scan pages
    of their keys (row, cf, cq, cv, ts)."""
    selection = [IteratorSetting(FILTER_PRIORITY + 1, "purgeSelectTombstones",
                                 "org.apache.accumulo.core.iterators.user.RegExFilter",
                                 {"valueRegex": _tombstone_regex()})]
    if horizon is not None:
        selection.append(IteratorSetting(FILTER_PRIORITY + 2, "purgeBelowHorizon",
                                         "org.apache.accumulo.core.iterators.user.TimestampFilter",
                                         {"end": f"LONG{horizon - 1}", "endInclusive": "true"}))
    # The table's own scan filter hides tombstones; this scan overrides its option to see them.
    visible = IteratorSetting(FILTER_PRIORITY, FILTER_NAME, "org.apache.accumulo.core.iterators.user.RegExFilter",
                              {"valueRegex": _tombstone_regex(), "negate": "false"})
    for page in conn.scan_batches(table, iterators=[visible, *selection], batch_size=batch_size):
        yield page.select(["row", "cf", "cq", "cv", "ts"])


def delete_cells(conn: Connection, table: str, keys: Iterable[pa.RecordBatch]) -> int:
    """Write a real delete at each key of ``keys`` (row, cf, cq, cv, ts: at the cell's own timestamp, so only
    that version and older ones are hidden); return how many, once they are durable."""
    count = 0
    with conn.batch_writer(table) as writer:
        for page in keys:
            if page.num_rows == 0:
                continue
            deletes = pa.RecordBatch.from_arrays(
                [page.column("row"), page.column("cf"), page.column("cq"), page.column("cv"), page.column("ts"),
                 pa.nulls(page.num_rows, pa.binary()), pa.array([True] * page.num_rows, pa.bool_())],
                schema=UPDATE_SCHEMA)
            writer.add_cells(deletes)
            count += page.num_rows
    return count
