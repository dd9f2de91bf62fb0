"""A simulated Accumulo instance in memory: deterministic, no threads, no wall clock of its own.

What it keeps, as Accumulo does:

- **tables**: a name, an id, properties (a table made with versioning gets Accumulo's defaults: the
  ``vers`` VersioningIterator at priority 20 in the scan, minc and majc scopes, one version), split points;
- **tablets**: each covers the rows ``(previous split, its split]`` and holds an in-memory map (a sorted list)
  and a list of files (sorted lists). A *minor compaction* writes the memory to a new file through the table's
  minc iterators; a *partial major compaction* merges some files through the majc iterators keeping delete
  markers; a *full major compaction* merges every file and drops them;
- **keys** ``(row, cf, cq, cv, ts, deleted)`` sorted as Accumulo sorts them: row, cf, cq, cv ascending,
  timestamp descending, a delete before a put of the same timestamp. An entry is the tuple
  ``(row, cf, cq, cv, -ts, kind, -seq, value)`` (``kind`` 0 for a delete, 1 for a put; ``seq`` the write's
  order, so of two writes of one key the later sorts first, as in Accumulo's in-memory map);
- **reads** through Accumulo's stack: the sources merged, the DeletingIterator (a delete at T hides every
  version <= T), the fetched columns, the visibility filter, then the table's iterators of the scope and the
  scan's own, in priority order (:data:`ITERATORS` lists the classes it knows; any other raises
  :class:`UnsupportedIterator`);
- **time**: a write without a timestamp gets the tablet's time, ``clock()`` (milliseconds) or, for a table of
  logical time, a counter; a tablet's time never goes back;
- **conditional mutations** (conditions on a value or on absence, at an optional timestamp, through the table's
  scan iterators and the condition's own).

Visibilities are stored and checked against the authorizations a scan gives; the user's own authorizations
(``user_authorizations``, default None) read everything when None.

``accumulo.metadata`` is served read-only and computed from the tablets: one row ``<table id>;<end row>`` (the
last tablet ``<table id><``) per tablet, one ``file`` cell per file (``size,entries``).
"""

from __future__ import annotations

import bisect
import heapq
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

#: one stored entry: (row, cf, cq, cv, -ts, kind, -seq, value); kind: DELETE or PUT
Entry = tuple[bytes, bytes, bytes, bytes, int, int, int, bytes]
DELETE, PUT = 0, 1
MAX_TIMESTAMP = 0x7FFFFFFFFFFFFFFF

VERSIONING = "org.apache.accumulo.core.iterators.user.VersioningIterator"
OLD_VERSIONING = "org.apache.accumulo.core.iterators.VersioningIterator"
REGEX_FILTER = "org.apache.accumulo.core.iterators.user.RegExFilter"
TIMESTAMP_FILTER = "org.apache.accumulo.core.iterators.user.TimestampFilter"
SORTED_KEY = "org.apache.accumulo.core.iterators.SortedKeyIterator"
SCOPES = ("scan", "minc", "majc")
SUMMARIZER_PROPERTY = "table.summarizer.accumulo_export_vis"
VISIBILITY_SUMMARIZER = "org.apache.accumulo.core.client.summary.summarizers.VisibilitySummarizer"
METADATA_TABLE = "accumulo.metadata"
ROOT_TABLE = "accumulo.root"
SYSTEM_TABLES = {ROOT_TABLE: "+r", METADATA_TABLE: "!0", "accumulo.replication": "+rep"}
DEFAULT_CONSTRAINT = ("table.constraint.1", "org.apache.accumulo.core.data.constraints.DefaultKeySizeConstraint")
_TABLE_NAME = re.compile(r"^(?:(\w+)\.)?(\w+)$")


class SimError(Exception):
    """A refusal of the simulated Accumulo; the gateway sends each kind as the proxy's exception."""


class TableNotFound(SimError):
    pass


class TableExists(SimError):
    pass


class InvalidArgument(SimError):
    """What Accumulo refuses with an AccumuloException (a bad property, an iterator conflict, a bad name)."""


class UnsupportedIterator(Exception):
    """An iterator class the simulation does not implement: a hole in the simulation, never an answer of
    Accumulo. Raised straight through to the caller, loudly (it is not a SimError)."""


# --- visibility -----------------------------------------------------------------------------------------------

def visible(expr: bytes, auths: frozenset[bytes] | None) -> bool:
    """Whether ``auths`` satisfy visibility expression ``expr`` (None: every expression)."""
    if not expr or auths is None:
        return True
    value, end = _vis_expr(expr, 0, auths)
    return value


def _vis_expr(expr: bytes, pos: int, auths: frozenset[bytes]) -> tuple[bool, int]:
    value, pos = _vis_term(expr, pos, auths)
    while pos < len(expr) and expr[pos] in b"&|":
        op = expr[pos]
        other, pos = _vis_term(expr, pos + 1, auths)
        value = (value and other) if op == ord("&") else (value or other)
    return value, pos


def _vis_term(expr: bytes, pos: int, auths: frozenset[bytes]) -> tuple[bool, int]:
    if expr[pos] == ord("("):
        value, pos = _vis_expr(expr, pos + 1, auths)
        return value, pos + 1  # the ')'
    if expr[pos] == ord('"'):
        out = bytearray()
        i = pos + 1
        while expr[i] != ord('"'):
            if expr[i] == ord("\\"):
                i += 1
            out.append(expr[i])
            i += 1
        return bytes(out) in auths, i + 1
    end = pos
    while end < len(expr) and expr[end] not in b"&|()":
        end += 1
    return expr[pos:end] in auths, end


# --- iterators ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class IteratorConfig:
    """One iterator of a stack: ``priority``, ``name``, ``class_name`` and its options."""

    priority: int
    name: str
    class_name: str
    options: tuple[tuple[str, str], ...] = ()

    def opts(self) -> dict[str, str]:
        return dict(self.options)


def _deleting(source: Iterable[Entry], propagate: bool) -> Iterator[Entry]:
    """Accumulo's DeletingIterator: a delete hides every entry of its column at or below its timestamp (the rest
    of the column: entries are sorted newest first); ``propagate`` keeps the delete itself (minor and partial
    major compactions)."""
    skip_col: tuple[bytes, bytes, bytes, bytes] | None = None
    for e in source:
        if skip_col is not None:
            if (e[0], e[1], e[2], e[3]) == skip_col:
                continue
            skip_col = None
        if e[5] == DELETE:
            skip_col = (e[0], e[1], e[2], e[3])
            if propagate:
                yield e
            continue
        yield e


def _versioning(source: Iterable[Entry], opts: dict[str, str]) -> Iterator[Entry]:
    max_versions = int(opts.get("maxVersions", "1"))
    if max_versions < 1:
        raise InvalidArgument(f"maxVersions for versioning iterator must be >= 1, got {max_versions}")
    col: tuple[bytes, bytes, bytes, bytes] | None = None
    count = 0
    for e in source:
        c = (e[0], e[1], e[2], e[3])
        if c != col:
            col, count = c, 0
        count += 1
        if count <= max_versions:
            yield e


def _filter(source: Iterable[Entry], accept: Callable[[Entry], bool], opts: dict[str, str]) -> Iterator[Entry]:
    """Accumulo's Filter: ``accept`` (inverted by the ``negate`` option) on every entry but a delete marker,
    which always passes (it reaches a filter only in a compaction)."""
    negate = opts.get("negate", "false").lower() == "true"
    for e in source:
        if e[5] == DELETE or accept(e) != negate:
            yield e


def _java_charset(name: str) -> str:
    return {"utf-8": "utf-8", "utf8": "utf-8", "iso-8859-1": "latin-1", "us-ascii": "ascii"}.get(name.lower(), name)


def _regex_accept(opts: dict[str, str]) -> Callable[[Entry], bool]:
    encoding = _java_charset(opts.get("encoding", "UTF-8"))
    substring = opts.get("matchSubstring", "false").lower() == "true"
    either = opts.get("orFields", "false").lower() == "true"
    checks: list[tuple[int, Callable[[str], Any]]] = []
    for index, option in ((0, "rowRegex"), (1, "colfRegex"), (2, "colqRegex"), (7, "valueRegex")):
        pattern = opts.get(option)
        if pattern is not None:
            compiled = re.compile(pattern)
            checks.append((index, compiled.search if substring else compiled.fullmatch))

    def accept(e: Entry) -> bool:
        results = (match(e[i].decode(encoding, "replace")) is not None for i, match in checks)  # type: ignore[union-attr]
        return any(results) if either else all(results)

    return accept


def _timestamp_option(text: str) -> int:
    if text.startswith("LONG"):
        return int(text[4:])
    # Accumulo's other form: yyyyMMddHHmmssz (GMT)
    moment = datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _timestamp_accept(opts: dict[str, str]) -> Callable[[Entry], bool]:
    start = _timestamp_option(opts["start"]) if "start" in opts else None
    end = _timestamp_option(opts["end"]) if "end" in opts else None
    if start is None and end is None:
        raise InvalidArgument("TimestampFilter: must have either start or end")
    start_inclusive = opts.get("startInclusive", "true").lower() == "true"
    end_inclusive = opts.get("endInclusive", "true").lower() == "true"

    def accept(e: Entry) -> bool:
        ts = -e[4]
        if start is not None and (ts < start or (ts == start and not start_inclusive)):
            return False
        return not (end is not None and (ts > end or (ts == end and not end_inclusive)))

    return accept


def _sorted_keys(source: Iterable[Entry]) -> Iterator[Entry]:
    for e in source:
        yield (e[0], e[1], e[2], e[3], e[4], e[5], e[6], b"")


def apply_iterator(source: Iterable[Entry], it: IteratorConfig) -> Iterator[Entry]:
    """``source`` through one iterator."""
    opts = it.opts()
    if it.class_name in (VERSIONING, OLD_VERSIONING):
        return _versioning(source, opts)
    if it.class_name == REGEX_FILTER:
        return _filter(source, _regex_accept(opts), opts)
    if it.class_name == TIMESTAMP_FILTER:
        return _filter(source, _timestamp_accept(opts), opts)
    if it.class_name == SORTED_KEY:
        return _sorted_keys(source)
    raise UnsupportedIterator(f"the simulated Accumulo has no iterator {it.class_name!r} ({it.name}); "
                              f"add it to integration/sim/accumulo.py")


def apply_stack(source: Iterable[Entry], iterators: Sequence[IteratorConfig]) -> Iterable[Entry]:
    out = source
    for it in sorted(iterators, key=lambda i: i.priority):  # stable: merge_iterators' order among equals
        out = apply_iterator(out, it)
    return out


#: table_iterators' answers by (scope, the properties' items): every scan asks, the properties seldom change
_table_iterators: dict[tuple[str, tuple[tuple[str, str], ...]], list[IteratorConfig]] = {}


def table_iterators(props: dict[str, str], scope: str) -> list[IteratorConfig]:
    """The iterators a table's properties configure for ``scope`` (a list shared between callers: not to be
    changed)."""
    key = (scope, tuple(props.items()))
    found = _table_iterators.get(key)
    if found is None:
        if len(_table_iterators) >= 4096:
            _table_iterators.clear()
        found = _table_iterators[key] = _table_iterators_of(props, scope)
    return found


def _table_iterators_of(props: dict[str, str], scope: str) -> list[IteratorConfig]:
    prefix = f"table.iterator.{scope}."
    found: list[IteratorConfig] = []
    for key, value in props.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        if "." in name:
            continue
        priority, _, class_name = value.partition(",")
        opt_prefix = f"{prefix}{name}.opt."
        options = tuple(sorted((k[len(opt_prefix):], v) for k, v in props.items() if k.startswith(opt_prefix)))
        found.append(IteratorConfig(int(priority), name, class_name.strip(), options))
    return sorted(found, key=lambda i: (i.priority, i.name))


def merge_iterators(table: Sequence[IteratorConfig], extra: Sequence[IteratorConfig]) -> list[IteratorConfig]:
    """A table's iterators with a scan's (a compaction's, a condition's) own, as Accumulo's
    ``IteratorConfigUtil.mergeIteratorConfig`` merges them: both lists, sorted by priority (the table's first among
    equals), and the options merged by iterator name (the scan's override the table's), every iterator of a name
    running with the merged options. So a scan iterator named like a table iterator does not replace it: both
    run."""
    if not extra:  # every scan without iterators of its own: the table's are already merged and in that order
        return list(table)
    options: dict[str, dict[str, str]] = {}
    for i in (*table, *extra):
        options.setdefault(i.name, {}).update(i.options)
    merged = sorted((*table, *extra), key=lambda i: i.priority)
    return [IteratorConfig(i.priority, i.name, i.class_name, tuple(sorted(options[i.name].items()))) for i in merged]


# --- ranges ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KeyRange:
    """A range of keys; a key is (row, cf, cq, cv, ts). None: unbounded."""

    start: tuple[bytes, bytes, bytes, bytes, int] | None = None
    start_inclusive: bool = True
    stop: tuple[bytes, bytes, bytes, bytes, int] | None = None
    stop_inclusive: bool = False

    def start_row(self) -> bytes | None:
        return None if self.start is None else self.start[0]

    def stop_row(self) -> bytes | None:
        return None if self.stop is None else self.stop[0]

    def after_start(self, e: Entry) -> bool:
        if self.start is None:
            return True
        s = self.start
        k = (e[0], e[1], e[2], e[3], e[4])
        sk = (s[0], s[1], s[2], s[3], -s[4])
        return k >= sk if self.start_inclusive else k > sk

    def before_stop(self, e: Entry) -> bool:
        if self.stop is None:
            return True
        s = self.stop
        k = (e[0], e[1], e[2], e[3], e[4])
        sk = (s[0], s[1], s[2], s[3], -s[4])
        return k <= sk if self.stop_inclusive else k < sk


#: bound_range's answers by (range, columns): a scanner asks again for each of its pages
_bounded: dict[tuple[KeyRange, tuple[tuple[bytes, bytes | None], ...]], KeyRange] = {}


def bound_range(rng: KeyRange, columns: Iterable[tuple[bytes, bytes | None]]) -> KeyRange:
    """As :func:`_bound_range`, its answers kept (a range refused is worked out again each time, and raises)."""
    key = (rng, tuple(columns))
    found = _bounded.get(key)
    if found is None:
        found = _bound_range(rng, key[1])
        if len(_bounded) >= 4096:
            _bounded.clear()
        _bounded[key] = found
    return found


def _bound_range(rng: KeyRange, columns: Iterable[tuple[bytes, bytes | None]]) -> KeyRange:
    """``rng`` narrowed to the fetched columns as Accumulo's ``Range.bound(first column, last column)`` narrows a
    scan's range (columns sorted with a whole family before its qualifiers). Its quirk is kept: the end moves to
    just after the *last* column, so fetching a family and one of its qualifiers reads the family only up to that
    qualifier. Refused, as Accumulo refuses it when the scan starts, if the start ends up after the end."""
    ordered = sorted(set(columns), key=lambda c: (c[0], c[1] is not None, c[1] or b""))
    if not ordered:
        return rng
    (min_cf, min_cq), (max_cf, max_cq) = ordered[0], ordered[-1]
    start, start_inclusive, stop, stop_inclusive = rng.start, rng.start_inclusive, rng.stop, rng.stop_inclusive
    if start is not None:
        low_cq = min_cq or b""
        if start[1] < min_cf or (start[1] == min_cf and start[2] < low_cq):
            start, start_inclusive = (start[0], min_cf, low_cq, b"", MAX_TIMESTAMP), True
    if stop is not None:
        row, cf, cq = stop[0], stop[1], stop[2]
        move = cf > max_cf or (cf == max_cf and max_cq is not None and cq > max_cq)
        if not move and not stop_inclusive and row.endswith(b"\x00") and not cf and not cq:
            row, move = row[:-1], True
        if move:
            stop_inclusive = False
            stop = ((row, max_cf + b"\x00", b"", b"", MAX_TIMESTAMP) if max_cq is None
                    else (row, max_cf, max_cq + b"\x00", b"", MAX_TIMESTAMP))
    if start is not None and stop is not None:
        a = (start[0], start[1], start[2], start[3], -start[4])
        b = (stop[0], stop[1], stop[2], stop[3], -stop[4])
        if a > b or (a == b and not stop_inclusive):
            raise InvalidArgument(f"java.lang.IllegalArgumentException: Start key must be less than end key in "
                                  f"range ({start}, {stop})")
    return KeyRange(start, start_inclusive, stop, stop_inclusive)


def merge_ranges(ranges: Sequence[KeyRange]) -> list[KeyRange]:
    """Overlapping ranges merged (a batch scan reads each key once, as Accumulo's Range.mergeOverlapping)."""
    def start_key(r: KeyRange) -> tuple[int, tuple[bytes, bytes, bytes, bytes, int], bool]:
        if r.start is None:
            return (0, (b"", b"", b"", b"", 0), False)
        s = r.start
        return (1, (s[0], s[1], s[2], s[3], -s[4]), not r.start_inclusive)

    def stop_key(r: KeyRange) -> tuple[int, tuple[bytes, bytes, bytes, bytes, int], bool]:
        if r.stop is None:
            return (2, (b"", b"", b"", b"", 0), False)
        s = r.stop
        return (1, (s[0], s[1], s[2], s[3], -s[4]), r.stop_inclusive)

    out: list[KeyRange] = []
    for r in sorted(ranges, key=start_key):
        if out:
            last = out[-1]
            a, b = stop_key(last), start_key(r)
            overlaps = a[0] == 2 or (a[1] > b[1]) or (a[1] == b[1] and (a[2] or not b[2]))
            if overlaps:
                if stop_key(r) > stop_key(last):
                    out[-1] = KeyRange(last.start, last.start_inclusive, r.stop, r.stop_inclusive)
                continue
        out.append(r)
    return out


# --- the store ------------------------------------------------------------------------------------------------

class File(list):  # type: ignore[type-arg]
    """A file of a tablet: its sorted entries, and whether the table's visibility summarizer counted them (a file
    written before the summarizer was configured was not)."""

    summarized: bool = False


def _file(entries: Iterable[Entry], props: dict[str, str]) -> File:
    f = File(entries)
    f.summarized = props.get(SUMMARIZER_PROPERTY) == VISIBILITY_SUMMARIZER
    return f


@dataclass
class Tablet:
    """The rows ``(prev_end, end]`` of a table (None: unbounded): memory and files, sorted lists of entries."""

    end: bytes | None
    memory: list[Entry] = field(default_factory=list)
    files: list[File] = field(default_factory=list)
    last_time: int = 0


@dataclass
class Table:
    name: str
    id: str
    props: dict[str, str]
    logical_time: bool
    splits: list[bytes] = field(default_factory=list)
    tablets: list[Tablet] = field(default_factory=lambda: [Tablet(None)])
    #: the properties the tablet servers act on (scans, compactions, conditions); None: ``props`` itself. A
    #: cluster with ``lagging_properties`` keeps the old ones here until :meth:`SimAccumulo.propagate_properties`
    lagging: dict[str, str] | None = None

    @property
    def served_props(self) -> dict[str, str]:
        return self.props if self.lagging is None else self.lagging

    def tablet_index(self, row: bytes) -> int:
        return bisect.bisect_left(self.splits, row)

    def tablets_between(self, start_row: bytes | None, stop_row: bytes | None) -> range:
        """The indices of the tablets holding rows of ``[start_row, stop_row]``."""
        first = 0 if start_row is None else self.tablet_index(start_row)
        last = len(self.tablets) - 1 if stop_row is None else self.tablet_index(stop_row)
        return range(first, last + 1)


def _rows_slice(entries: list[Entry], start_row: bytes | None, stop_row: bytes | None) -> list[Entry]:
    lo = 0 if start_row is None else bisect.bisect_left(entries, (start_row,))
    hi = len(entries) if stop_row is None else bisect.bisect_left(entries, (stop_row + b"\x00",))
    return entries[lo:hi]


#: one column update as the gateway hands it over: (cf, cq, cv, ts or None, value or None, delete)
Update = tuple[bytes, bytes, bytes, "int | None", "bytes | None", bool]


@dataclass(frozen=True)
class Condition:
    """A conditional mutation's condition: the cell (cf, cq, cv) holds ``value`` (None: is absent), at ``ts``
    when given, read through the table's scan iterators and ``iterators``."""

    cf: bytes
    cq: bytes
    cv: bytes = b""
    ts: int | None = None
    value: bytes | None = None
    iterators: tuple[IteratorConfig, ...] = ()


class SimAccumulo:
    """An Accumulo instance in memory (see the module's description). ``clock`` returns the server's time in
    milliseconds (default: ``time.time()`` read at each write, which a simulation makes virtual)."""

    def __init__(self, name: str = "sim", *, clock: Callable[[], int] | None = None,
                 user_authorizations: Iterable[bytes] | None = None, lagging_properties: bool = False) -> None:
        self.name = name
        #: a property change reaches the tablet servers only at :meth:`propagate_properties` (as in Accumulo, a
        #: little after the call returns); False: at once
        self.lagging_properties = lagging_properties
        self.clock: Callable[[], int] = clock or (lambda: int(time.time() * 1000))
        self.user_authorizations = None if user_authorizations is None else frozenset(user_authorizations)
        self.tables: dict[str, Table] = {}
        self.namespaces: set[str] = {"", "accumulo"}
        self._next_table_id = 1
        self._seq = 0
        self._files = 0
        #: counts of what happened, for tests and statistics
        self.stats: dict[str, int] = {"writes": 0, "minc": 0, "majc": 0, "scans": 0}

    # --- tables -------------------------------------------------------------------------------------------

    def table(self, name: str) -> Table:
        t = self.tables.get(name)
        if t is None:
            raise TableNotFound(f"Table {name} does not exist")
        return t

    def table_exists(self, name: str) -> bool:
        return name in self.tables or name in SYSTEM_TABLES

    def list_tables(self) -> set[str]:
        return set(self.tables) | set(SYSTEM_TABLES)

    def table_ids(self) -> dict[str, str]:
        return {**SYSTEM_TABLES, **{name: t.id for name, t in self.tables.items()}}

    def create_table(self, name: str, versioning: bool = True, logical_time: bool = False) -> None:
        m = _TABLE_NAME.match(name)
        if m is None:
            raise InvalidArgument(f"Table name {name!r} is not valid: only word characters, with one namespace")
        if name in self.tables or name in SYSTEM_TABLES:
            raise TableExists(f"Table {name} exists")
        if (m.group(1) or "") not in self.namespaces:
            raise InvalidArgument(f"Namespace {m.group(1)} does not exist")
        props = dict([DEFAULT_CONSTRAINT])
        if versioning:
            for scope in SCOPES:
                props[f"table.iterator.{scope}.vers"] = f"20,{VERSIONING}"
                props[f"table.iterator.{scope}.vers.opt.maxVersions"] = "1"
        self.tables[name] = Table(name, _base36(self._next_table_id), props, logical_time)
        self._next_table_id += 1

    def delete_table(self, name: str) -> None:
        self.table(name)
        del self.tables[name]

    def _before_change(self, t: Table) -> None:
        if self.lagging_properties and t.lagging is None:
            t.lagging = dict(t.props)

    def propagate_properties(self, name: str | None = None) -> None:
        """The tablet servers catch up with the property changes of table ``name`` (every table: None)."""
        for t in self.tables.values() if name is None else [self.table(name)]:
            t.lagging = None

    def set_property(self, name: str, key: str, value: str) -> None:
        t = self.table(name)
        self._before_change(t)
        if not key.startswith("table."):
            raise InvalidArgument(f"Invalid table property: {key}")
        if key.startswith("table.iterator.") and key.count(".") == 3:
            priority = value.partition(",")[0]
            if not priority.strip().isdigit() or "," not in value:
                raise InvalidArgument(f"Invalid table property: {key}={value}: not 'priority,class'")
        t.props[key] = value

    def remove_property(self, name: str, key: str) -> None:
        t = self.table(name)
        self._before_change(t)
        t.props.pop(key, None)

    def properties(self, name: str) -> dict[str, str]:
        return dict(self.table(name).props)

    def attach_iterator(self, name: str, it: IteratorConfig, scopes: Iterable[str]) -> None:
        """Attach ``it`` for ``scopes``; Accumulo refuses a name or a priority already used in a scope."""
        t = self.table(name)
        scopes = sorted(set(scopes))
        for scope in scopes:
            for other in table_iterators(t.props, scope):
                if other.name == it.name:
                    raise InvalidArgument(f"iterator name conflict with {other.name} in scope {scope}")
                if other.priority == it.priority:
                    raise InvalidArgument(f"iterator priority conflict: {other.name} has priority {other.priority} "
                                          f"in scope {scope}")
        self._before_change(t)
        for scope in scopes:
            t.props[f"table.iterator.{scope}.{it.name}"] = f"{it.priority},{it.class_name}"
            for k, v in it.options:
                t.props[f"table.iterator.{scope}.{it.name}.opt.{k}"] = v

    def splits(self, name: str) -> list[bytes]:
        return list(self.table(name).splits)

    def add_splits(self, name: str, splits: Iterable[bytes]) -> None:
        t = self.table(name)
        for split in sorted(set(splits)):
            i = bisect.bisect_left(t.splits, split)
            if i < len(t.splits) and t.splits[i] == split:
                continue
            old = t.tablets[i]
            cut = (split + b"\x00",)
            left = Tablet(split, [e for e in old.memory if e < cut], [], old.last_time)
            right = Tablet(old.end, [e for e in old.memory if e >= cut], [], old.last_time)
            for f in old.files:  # each file referenced by both halves, as Accumulo splits
                for half, part in ((left, [e for e in f if e < cut]), (right, [e for e in f if e >= cut])):
                    if part:
                        piece = File(part)
                        piece.summarized = f.summarized
                        half.files.append(piece)
            t.splits.insert(i, split)
            t.tablets[i:i + 1] = [left, right]

    # --- writing ------------------------------------------------------------------------------------------

    def _time(self, t: Table, tablet: Tablet) -> int:
        """The time of the next write to ``tablet``: never earlier than its last one."""
        if t.logical_time:
            tablet.last_time += 1
        else:
            tablet.last_time = max(tablet.last_time, int(self.clock()))
        return tablet.last_time

    def write(self, name: str, rows: dict[bytes, list[Update]] | Iterable[tuple[bytes, list[Update]]]) -> None:
        """Apply mutations (row -> its updates), each row atomically, every update of a row at one server time."""
        t = self.table(name)
        items = rows.items() if isinstance(rows, dict) else rows
        for row, updates in items:
            self._apply_row(t, row, updates)

    def _apply_row(self, t: Table, row: bytes, updates: Sequence[Update]) -> None:
        tablet = t.tablets[t.tablet_index(row)]
        now: int | None = None
        memory = tablet.memory
        for cf, cq, cv, ts, value, delete in updates:
            if ts is None:
                if now is None:
                    now = self._time(t, tablet)
                ts = now
            self._seq += 1  # a later write of one key sorts first, as Accumulo's in-memory map numbers each update
            if delete:
                bisect.insort(memory, (row, cf, cq, cv, -ts, DELETE, -self._seq, b""))
            else:
                bisect.insort(memory, (row, cf, cq, cv, -ts, PUT, -self._seq, value or b""))
        self.stats["writes"] += len(updates)

    def write_conditionally(self, name: str, row: bytes, conditions: Sequence[Condition], updates: Sequence[Update],
                            authorizations: frozenset[bytes]) -> str:
        """Apply ``updates`` to ``row`` if every condition holds; the status name (ACCEPTED, REJECTED,
        INVISIBLE_VISIBILITY)."""
        t = self.table(name)
        for c in conditions:
            if not visible(c.cv, authorizations):
                return "INVISIBLE_VISIBILITY"
        for c in conditions:
            if not self._holds(t, row, c, authorizations):
                return "REJECTED"
        self._apply_row(t, row, updates)
        return "ACCEPTED"

    def _holds(self, t: Table, row: bytes, c: Condition, auths: frozenset[bytes]) -> bool:
        iterators = merge_iterators(table_iterators(t.served_props, "scan"), c.iterators)
        for e in self._read(t, row, row, iterators, auths, {(c.cf, c.cq)}, set()):
            if e[3] != c.cv:
                continue
            if c.ts is not None and -e[4] != c.ts:
                continue
            return c.value is not None and e[7] == c.value
        return c.value is None

    # --- reading ------------------------------------------------------------------------------------------

    def _sources(self, t: Table, start_row: bytes | None, stop_row: bytes | None) -> Iterator[Entry]:
        for i in t.tablets_between(start_row, stop_row):
            tablet = t.tablets[i]
            parts = [_rows_slice(tablet.memory, start_row, stop_row)]
            parts.extend(_rows_slice(f, start_row, stop_row) for f in tablet.files)
            parts = [p for p in parts if p]
            if len(parts) == 1:
                yield from parts[0]
            elif parts:
                yield from heapq.merge(*parts)

    def _read(self, t: Table, start_row: bytes | None, stop_row: bytes | None, iterators: Sequence[IteratorConfig],
              auths: frozenset[bytes] | None, columns: set[tuple[bytes, bytes]], families: set[bytes]
              ) -> Iterable[Entry]:
        out: Iterable[Entry] = _deleting(self._sources(t, start_row, stop_row), propagate=False)
        if columns or families:
            out = (e for e in out if e[1] in families or (e[1], e[2]) in columns)
        if auths is not None:
            out = (e for e in out if not e[3] or visible(e[3], auths))
        return apply_stack(out, iterators)

    def scan(self, name: str, rng: KeyRange | None = None, *, iterators: Sequence[IteratorConfig] = (),
             authorizations: Iterable[bytes] | None = None, columns: Iterable[tuple[bytes, bytes | None]] = (),
             after: Entry | None = None, after_dups: int = 1, from_row: bytes | None = None) -> Iterator[Entry]:
        """The entries a scan of ``rng`` returns, in key order, lazily: the table's scan iterators merged with
        ``iterators``; ``authorizations`` None: the user's; ``columns``: (cf, cq or None for the family);
        ``after``: only keys after this entry's (a scanner's next page), but for those of its very key beyond the
        first ``after_dups`` (a key written twice at one timestamp is two entries); ``from_row``: only rows from this
        one."""
        columns = list(columns)
        rng = rng or KeyRange()
        if columns:
            rng = bound_range(rng, columns)
        if name == METADATA_TABLE:
            source: Iterable[Entry] = self._metadata_entries()
            t = None
        else:
            t = self.table(name)
        auths = self.user_authorizations if authorizations is None else frozenset(authorizations)
        cols = {(cf, cq) for cf, cq in columns if cq is not None}
        fams = {cf for cf, cq in columns if cq is None}
        start_row = rng.start_row() if after is None else after[0]
        if from_row is not None:
            start_row = from_row
        iters = merge_iterators([] if t is None else table_iterators(t.served_props, "scan"),
                                list(iterators))
        if t is None:
            source = apply_stack(_deleting(
                (e for e in source if (start_row is None or e[0] >= start_row)
                 and (not cols and not fams or e[1] in fams or (e[1], e[2]) in cols)), False), iters)
        else:
            source = self._read(t, start_row, rng.stop_row(), iters, auths, cols, fams)
        self.stats["scans"] += 1
        after_key = None if after is None else after[:5]
        seen = 0
        # the range's ends as entries' keys (-ts) compare, once (KeyRange.after_start and before_stop, inlined)
        start, stop = rng.start, rng.stop
        start_key = None if start is None else (start[0], start[1], start[2], start[3], -start[4])
        stop_key = None if stop is None else (stop[0], stop[1], stop[2], stop[3], -stop[4])
        start_inclusive, stop_inclusive = rng.start_inclusive, rng.stop_inclusive
        for e in source:
            key = e[:5]
            if after_key is not None and key <= after_key and (key < after_key or seen < after_dups):
                seen += key == after_key
                continue
            if from_row is not None and e[0] < from_row:
                continue
            if start_key is not None and (key < start_key if start_inclusive else key <= start_key):
                continue
            if stop_key is not None and (key > stop_key if stop_inclusive else key >= stop_key):
                return
            yield e

    def _metadata_entries(self) -> list[Entry]:
        out: list[Entry] = []
        for t in self.tables.values():
            for tablet in t.tablets:
                row = t.id.encode() + (b";" + tablet.end if tablet.end is not None else b"<")
                for n, f in enumerate(tablet.files):
                    size = sum(len(e[0]) + len(e[1]) + len(e[2]) + len(e[3]) + len(e[7]) + 8 for e in f)
                    out.append((row, b"file", f"hdfs://sim/{t.id}/F{n:07d}.rf".encode(), b"", -1, PUT, 0,
                                f"{size},{len(f)}".encode()))
        out.sort()
        return out

    # --- compactions --------------------------------------------------------------------------------------

    def _tablets(self, name: str, start_row: bytes | None, end_row: bytes | None) -> tuple[Table, list[Tablet]]:
        """The tablets overlapping ``(start_row, end_row]`` (Accumulo's flush/compact range)."""
        t = self.table(name)
        first = 0 if start_row is None else bisect.bisect_right(t.splits, start_row)
        last = len(t.tablets) - 1 if end_row is None else t.tablet_index(end_row)
        return t, t.tablets[first:last + 1]

    def flush(self, name: str, start_row: bytes | None = None, end_row: bytes | None = None) -> None:
        """A minor compaction of the tablets overlapping ``(start_row, end_row]``."""
        t, tablets = self._tablets(name, start_row, end_row)
        for tablet in tablets:
            self.minor_compact(t, tablet)

    def minor_compact(self, t: Table, tablet: Tablet) -> None:
        if not tablet.memory:
            return
        iters = table_iterators(t.served_props, "minc")
        f = _file(apply_stack(_deleting(tablet.memory, propagate=True), iters), t.served_props)
        tablet.memory = []
        if f:
            tablet.files.append(f)
        self.stats["minc"] += 1

    def compact(self, name: str, start_row: bytes | None = None, end_row: bytes | None = None,
                iterators: Sequence[IteratorConfig] = (), flush: bool = True) -> None:
        """A full major compaction of the tablets overlapping ``(start_row, end_row]`` (with ``iterators`` on top
        of the table's majc ones): every file of each one merged into one, delete markers dropped."""
        t, tablets = self._tablets(name, start_row, end_row)
        for tablet in tablets:
            if flush:
                self.minor_compact(t, tablet)
            self.major_compact(t, tablet, range(len(tablet.files)), iterators)

    def major_compact(self, t: Table, tablet: Tablet, which: Iterable[int],
                      iterators: Sequence[IteratorConfig] = ()) -> None:
        """Merge the files ``which`` of ``tablet`` into one through the majc iterators: a full compaction (all
        its files) drops delete markers, a partial one keeps them."""
        chosen = sorted(set(which))
        if not chosen:
            return
        full = len(chosen) == len(tablet.files)
        iters = merge_iterators(table_iterators(t.served_props, "majc"), iterators)
        merged = heapq.merge(*(tablet.files[i] for i in chosen))
        f = _file(apply_stack(_deleting(merged, propagate=not full), iters), t.served_props)
        kept = [g for i, g in enumerate(tablet.files) if i not in set(chosen)]
        tablet.files = kept + ([f] if f else [])
        self.stats["majc"] += 1

    def compact_some(self, name: str, choose: Callable[[int], Sequence[int]]) -> None:
        """A partial major compaction of every tablet of ``name``: ``choose(number of files)`` picks the files
        merged (all of them: a full one)."""
        t = self.table(name)
        for tablet in t.tablets:
            if len(tablet.files) > 1:
                self.major_compact(t, tablet, choose(len(tablet.files)))

    def file_counts(self, name: str) -> list[int]:
        """How many files each tablet of ``name`` has (for a scheduler choosing Accumulo's own compactions)."""
        return [len(tablet.files) for tablet in self.table(name).tablets]

    def system_compaction(self, name: str, tablet: int, files: Iterable[int] | None = None) -> None:
        """A compaction Accumulo starts on its own: tablet number ``tablet`` of ``name``, the files ``files`` (all:
        None, a full one, which drops delete markers); ``files`` ``[]``: a minor compaction (memory to a file)."""
        t = self.table(name)
        target = t.tablets[tablet]
        chosen = None if files is None else list(files)
        if chosen == []:
            self.minor_compact(t, target)
            return
        self.major_compact(t, target, range(len(target.files)) if chosen is None else chosen)

    # --- bulk import ----------------------------------------------------------------------------------------

    def import_file(self, name: str, entries: Iterable[Entry]) -> None:
        """Load a file's entries (sorted, with their timestamps) into the tablets they fall in, as files."""
        t = self.table(name)
        by_tablet: dict[int, list[Entry]] = {}
        for e in entries:
            by_tablet.setdefault(t.tablet_index(e[0]), []).append(e)
        for i, es in by_tablet.items():
            es.sort()
            t.tablets[i].files.append(_file(es, t.served_props))

    def unreadable_visibilities(self, name: str) -> dict[str, int]:
        """What this project's gateway answers to ``unreadableVisibilities``: the table flushed, then its files'
        visibility summaries: ``hidden:<expression>`` (puts under an expression the user cannot read), ``files``,
        ``files.missing`` (files written before the summarizer was configured), ``configured``."""
        t = self.table(name)
        configured = t.props.get(SUMMARIZER_PROPERTY) == VISIBILITY_SUMMARIZER
        for tablet in t.tablets:
            self.minor_compact(t, tablet)
        out: dict[str, int] = {}
        files = [f for tablet in t.tablets for f in tablet.files]
        summarized = [f for f in files if f.summarized]
        if summarized:
            out["files"] = len(files)
            out["files.missing"] = len(files) - len(summarized)
            out["files.large"] = 0
            for f in summarized:
                for e in f:
                    if e[5] == PUT and e[3] and not visible(e[3], self.user_authorizations):
                        key = "hidden:" + e[3].decode("utf-8", "replace")
                        out[key] = out.get(key, 0) + 1
        elif configured and files:
            out["files.missing"] = 1  # files, none of them summarized: at least one is missing
        out["configured"] = int(configured)
        return out

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # --- for tests and the oracle ---------------------------------------------------------------------------

    def cells(self, name: str) -> list[tuple[bytes, bytes, bytes, bytes, int, bytes]]:
        """What a plain scan of ``name`` returns now, as (row, cf, cq, cv, ts, value)."""
        return [(e[0], e[1], e[2], e[3], -e[4], e[7]) for e in self.scan(name)]


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


__all__ = ["SimAccumulo", "IteratorConfig", "KeyRange", "Condition", "Entry", "SimError", "TableNotFound",
           "TableExists", "InvalidArgument", "UnsupportedIterator", "visible"]
