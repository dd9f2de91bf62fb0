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

**The mode lives on the destination table.** The mode a table is written in is a property of the table,
:data:`MODE_PROPERTY`, not of whoever writes it: every writer (a drain, the Spark sink, a bootstrap, a repair, a
registered destination's exporter) and every checker (verify, purge) reads it there. The first writer records it
(the mode it was asked for, else :data:`DEFAULT_DELETE_MODE`); a writer asked for another mode is refused
(:class:`DestinationModeError`) before it writes anything. A table written before the mode was recorded has
none: a checker infers it from the tombstone filter (attached: tombstone; else delete, the only mode there was
before tombstones).

Before a writer's first write the table's shape is checked (:func:`shape_problem`): each mode promises one value
per cell, which needs the versioning iterator at one version in the scan, minc and majc scopes, and tombstone
mode needs it below the tombstone filter in the scan scope. In tombstone mode the filter is attached and a scan
is seen to apply it (:func:`confirm_filter_seen`) before the mode is recorded: a writer that finds tombstone
recorded therefore knows that every tablet server hides tombstones.
"""

from __future__ import annotations

import enum
import logging
import re
import time
from collections.abc import Iterable, Iterator

import pyarrow as pa

from connector.accumulo import UPDATE_SCHEMA, AccumuloError, Connection, IteratorSetting, Mutation, Range
from connector.errors import ConnectorError

TOMBSTONE = b"\x00accumulo-export:tombstone\x00"
log = logging.getLogger(__name__)

FILTER_NAME = "exportTombstones"
FILTER_PRIORITY = 30  # above the versioning iterator (20): filter the newest version, not every version


class DeleteMode(enum.StrEnum):
    DELETE = "delete"
    TOMBSTONE = "tombstone"


#: how a table's deletes are written when its first writer is told no mode (the module's description says why);
#: after that the table's recorded mode rules (:mod:`connector.export.tombstones`)
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
    (:func:`connector.export.tombstones.prepare_destination`)."""
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
    of their keys (row, cf, cq, cv, ts). A delete-mode table has none to list: refused
    (:class:`DestinationModeError`), since what looks like a tombstone there is a value of its own."""
    if checked_mode(conn, table) is DeleteMode.DELETE:
        raise DestinationModeError(f"destination table {table!r} is written in delete mode ({MODE_PROPERTY}, or no "
                                   f"tombstone filter): it has no tombstones to purge; nothing was changed")
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


# --- the mode on the table ------------------------------------------------------------------------------------

#: the table property that records how the table's deletes are written (Accumulo keeps ``table.custom.*``)
MODE_PROPERTY = "table.custom.accumulo-export.delete-mode"
VERSIONING_CLASSES = frozenset({"org.apache.accumulo.core.iterators.user.VersioningIterator",
                                "org.apache.accumulo.core.iterators.VersioningIterator"})
SCOPES = ("scan", "minc", "majc")
#: the cell a filter probe writes in a row of each tablet (a tombstone at ts 0, deleted once the scan hides it)
PROBE_FAMILY, PROBE_QUALIFIER = b"\x00accumulo-export", b"filter-probe"
#: how long a writer waits for the tablet servers to apply a tombstone filter just attached (seconds)
FILTER_SEEN_SECONDS = 60.0


class DestinationModeError(ConnectorError, ValueError):
    """A destination table cannot be written as asked: its recorded mode differs from the one asked for, or its
    iterators cannot keep the mode's promise. Raised before anything is written; the message says how to fix it."""


def recorded_mode(conn: Connection, table: str) -> DeleteMode | None:
    """The mode recorded on ``table`` (None: none recorded)."""
    return _recorded(conn.table_properties(table), table)


def checked_mode(conn: Connection, table: str, requested: DeleteMode | str | None = None) -> DeleteMode:
    """The mode a checker (verify) judges ``table`` by, without writing anything: the recorded one (refusing a
    different ``requested`` one); on a table with none recorded, ``requested`` if given, else the one its
    tombstone filter implies (attached: tombstone, else delete)."""
    props = conn.table_properties(table)
    recorded = _recorded(props, table)
    asked = DeleteMode(requested) if requested else None
    if recorded is not None:
        _refuse_other(table, recorded, asked)
        return recorded
    if asked is not None:
        return asked
    return DeleteMode.TOMBSTONE if f"table.iterator.scan.{FILTER_NAME}" in props else DeleteMode.DELETE


def prepare_destination(conn: Connection, table: str, requested: DeleteMode | str | None = None, *,
                        filter_seen_seconds: float = FILTER_SEEN_SECONDS) -> DeleteMode:
    """Make ``table`` (which exists) ready for a writer and return its mode: the recorded one (refusing a
    different ``requested`` one), else ``requested`` or the default, then recorded. Refuses
    (:class:`DestinationModeError`, one line) a shape the mode cannot keep its promise under; in tombstone mode
    attaches the filter and waits until a scan applies it. Writes nothing but the filter's probes, deleted again
    (:func:`confirm_filter_seen`)."""
    asked = DeleteMode(requested) if requested else None
    props = conn.table_properties(table)
    recorded = _recorded(props, table)
    if recorded is not None:
        _refuse_other(table, recorded, asked)
    mode = recorded or asked or DEFAULT_DELETE_MODE
    problem = shape_problem(props, table, mode)
    if problem:
        raise DestinationModeError(problem)
    # the recorder confirmed the filter before recording: confirm again only if it was removed since
    if mode is DeleteMode.TOMBSTONE and (install_tombstone_filter(conn, table) or recorded is None):
        confirm_filter_seen(conn, table, filter_seen_seconds)
    if recorded is None:
        conn.set_table_property(table, MODE_PROPERTY, mode.value)
        # two first writers asked for different modes at the same moment: the later record stands, the other
        # writer sees it here and stops before writing
        now = recorded_mode(conn, table)
        if now is not mode:
            _refuse_other(table, now or mode, mode)
    return mode


def shape_problem(props: dict[str, str], table: str, mode: DeleteMode) -> str | None:
    """Why ``table`` (its properties ``props``) cannot keep ``mode``'s promise, as one line saying how to fix it;
    None when it can. Each mode needs one version per cell in every scope (more would show an older put beside
    a newer one, and in tombstone mode the put a tombstone hides); tombstone mode also needs the versioning
    iterator of the scan scope below the tombstone filter (priority < 30), so the filter sees only the newest."""
    for scope in SCOPES:
        found = _versioning(props, scope)
        if not found:
            return (f"destination table {table!r} has no versioning iterator in its {scope} scope, so it keeps "
                    f"every version of a cell and an older put shows beside (or, in tombstone mode, through) a "
                    f"newer one; fix: config -t {table} -s table.iterator.{scope}.vers=20,"
                    f"org.apache.accumulo.core.iterators.user.VersioningIterator (one version unless told more)")
        name, priority, iterator_class = found
        versions = props.get(f"table.iterator.{scope}.{name}.opt.maxVersions", "1")
        if versions.strip() != "1":
            return (f"destination table {table!r} keeps {versions} versions of a cell "
                    f"(table.iterator.{scope}.{name}.opt.maxVersions={versions}), so an older put shows beside "
                    f"(or, in tombstone mode, through) a newer one; fix: config -t {table} -s "
                    f"table.iterator.{scope}.{name}.opt.maxVersions=1")
        if mode is DeleteMode.TOMBSTONE and scope == "scan" and priority >= FILTER_PRIORITY:
            return (f"destination table {table!r} runs its versioning iterator at priority {priority} "
                    f"(table.iterator.scan.{name}={priority},{iterator_class}), above the tombstone filter's "
                    f"{FILTER_PRIORITY}, so a tombstone hides only itself and the put below it shows; fix: config -t "
                    f"{table} -s table.iterator.scan.{name}=20,{iterator_class}")
    return None


def confirm_filter_seen(conn: Connection, table: str, timeout: float = FILTER_SEEN_SECONDS) -> None:
    """Return once a scan of every tablet of ``table`` hides tombstones. Tablet servers learn of an attached
    iterator asynchronously; a tombstone written before its tablet's server applies the filter would be seen
    by readers. The probe: a tombstone at ts 0 in a reserved column of one row per tablet, scanned until no
    probe shows, then deleted (a real delete at ts 0 hides only the probe). Raises
    :class:`DestinationModeError` when a probe still shows after ``timeout`` seconds."""
    splits = conn.list_splits(table)
    rows = [*splits, (splits[-1] if splits else b"") + b"\x00"]  # a split is the last row of its tablet
    probes = [Mutation(row).put(PROBE_FAMILY, PROBE_QUALIFIER, TOMBSTONE, timestamp=0) for row in rows]
    ranges = [Range.exact_row(row) for row in rows]
    with conn.batch_writer(table) as writer:  # one row per tablet: more than one frame holds, on a large table
        writer.add_mutations(probes)
    deadline, pause = time.monotonic() + timeout, 0.05
    try:
        while any(c.cf == PROBE_FAMILY for c in conn.batch_read(table, ranges, columns=[PROBE_FAMILY])):
            if time.monotonic() > deadline:
                raise DestinationModeError(
                    f"destination table {table!r}: a scan still shows a tombstone {timeout:g} s after the tombstone "
                    f"filter was attached (table.iterator.scan.{FILTER_NAME}); check that property and the tablet "
                    "servers, then run again")
            time.sleep(pause)
            pause = min(1.0, pause * 2)
    finally:
        with conn.batch_writer(table) as writer:
            writer.add_mutations([Mutation(row).delete(PROBE_FAMILY, PROBE_QUALIFIER, timestamp=0) for row in rows])


def _versioning(props: dict[str, str], scope: str) -> tuple[str, int, str] | None:
    """The versioning iterator of ``scope`` (name, priority, class), the lowest priority first; None: none."""
    found = []
    pattern = re.compile(rf"table\.iterator\.{scope}\.([^.]+)")
    for key, value in props.items():
        match = pattern.fullmatch(key)
        priority, _, iterator_class = value.partition(",")
        if match and iterator_class.strip() in VERSIONING_CLASSES and priority.strip().isdigit():
            found.append((match.group(1), int(priority), iterator_class.strip()))
    return min(found, key=lambda f: f[1]) if found else None


def _recorded(props: dict[str, str], table: str) -> DeleteMode | None:
    value = props.get(MODE_PROPERTY)
    if value is None:
        return None
    try:
        return DeleteMode(value)
    except ValueError:
        raise DestinationModeError(f"destination table {table!r} records delete mode {value!r} ({MODE_PROPERTY}), "
                                   f"which is none of {', '.join(m.value for m in DeleteMode)}; fix the property "
                                   "(config -t TABLE -s ...) to the mode its data was written in") from None


def _refuse_other(table: str, recorded: DeleteMode, asked: DeleteMode | None) -> None:
    if asked is not None and asked is not recorded:
        raise DestinationModeError(
            f"destination table {table!r} is written in {recorded.value} mode ({MODE_PROPERTY}) and this run asks "
            f"for {asked.value}: run without --delete-mode (option delete_mode) to write in {recorded.value} mode, or "
            f"write {asked.value} mode into another table; a table's mode never changes (its cells depend on it)")
