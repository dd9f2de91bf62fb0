"""The simulated gateway: a handler of the proxy's Thrift service (``connector/accumulo/proxy.thrift``) over a
:class:`~integration.sim.accumulo.SimAccumulo`, with this project's extensions (isolated scans, scan timeouts,
bulk imports, visibility summaries), as ``integration/gateway``'s ``Gateway.java`` serves them.

Every method takes and returns what thriftpy2's processor hands over (the transport of :mod:`.transport` runs
it), and raises the proxy's exception types, so the client translates them as it does the real gateway's. A
failure the IDL does not declare for a call goes out, as the real gateway's ``DeclaredExceptionsGuard`` sends it,
as a ``TApplicationException`` named after it (:func:`undeclared`).

Writers (``createWriter``/``update``/``flush``/``closeWriter``) buffer what ``update`` brings, per writer, and
apply it at ``flush``; a real BatchWriter may send earlier, which a simulation asks for with
:meth:`SimGateway.apply_some`. A writer created with a timeout (``timeoutMs``) never applies a row that waited
longer than that since its ``update`` (by ``time.monotonic``: virtual under the scheduler): its next flush fails
with a rejection naming ``TimedOutException``, as Accumulo's BatchWriter does for mutations no tablet server took
within the timeout. Scanners read lazily: each ``nextK`` reads the table as it is at that call, after
the last key it returned (so writes between two pages show, as on a real tablet server); an isolated scanner
takes each row whole at the moment it reaches it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from connector.accumulo._idl import proxy
from connector.accumulo.error_names import BULK_IMPORT_NOT_FOUND, SECURITY, SEPARATOR, SERVER, TIMED_OUT
from connector.accumulo.extensions import BULK_RFILE, SCAN_ISOLATED, SCAN_TIMEOUT, SUMMARY_VISIBILITY

from .accumulo import (
    PUT,
    Condition,
    Entry,
    InvalidArgument,
    IteratorConfig,
    KeyRange,
    SimAccumulo,
    SimError,
    TableExists,
    TableNotFound,
    Update,
    bound_range,
    merge_ranges,
)

EXTENSIONS = frozenset({SCAN_TIMEOUT, SCAN_ISOLATED, BULK_RFILE, SUMMARY_VISIBILITY})
_SCOPE_NAMES = {v: k.lower() for k, v in proxy.IteratorScope._NAMES_TO_VALUES.items()}
_STATUS = proxy.ConditionalStatus._NAMES_TO_VALUES


def _updates(column_updates: Iterable[Any]) -> list[Update]:
    return [(u.colFamily or b"", u.colQualifier or b"", u.colVisibility or b"", u.timestamp,
             None if u.deleteCell else (u.value or b""), bool(u.deleteCell)) for u in column_updates]


def _iterators(settings: Iterable[Any] | None) -> list[IteratorConfig]:
    return [IteratorConfig(s.priority, s.name, s.iteratorClass, tuple(sorted((s.properties or {}).items())))
            for s in settings or ()]


def _key(k: Any) -> tuple[bytes, bytes, bytes, bytes, int] | None:
    if k is None:
        return None
    ts = 0x7FFFFFFFFFFFFFFF if k.timestamp is None else k.timestamp
    return (k.row or b"", k.colFamily or b"", k.colQualifier or b"", k.colVisibility or b"", ts)


def _range(r: Any) -> KeyRange:
    """A proxy Range; Accumulo refuses one whose start is after its end (or at an exclusive end)."""
    if r is None:
        return KeyRange()
    rng = KeyRange(_key(r.start), r.startInclusive is not False, _key(r.stop), bool(r.stopInclusive))
    if rng.start is not None and rng.stop is not None:
        a, b = rng.start, rng.stop
        start, stop = (a[0], a[1], a[2], a[3], -a[4]), (b[0], b[1], b[2], b[3], -b[4])
        if start > stop or (start == stop and not rng.stop_inclusive):
            raise proxy.AccumuloException(f"Start key must be less than end key in range ({a}, {b})")
    return rng


def _columns(columns: Iterable[Any] | None) -> list[tuple[bytes, bytes | None]]:
    return [(c.colFamily, c.colQualifier) for c in columns or ()]


def undeclared(exc: SimError) -> Any:
    """The proxy exception for a refusal of the simulated Accumulo."""
    if isinstance(exc, TableNotFound):
        return proxy.TableNotFoundException(str(exc))
    if isinstance(exc, TableExists):
        return proxy.TableExistsException(str(exc))
    return proxy.AccumuloException(str(exc))


@dataclass
class SimWriter:
    """A server-side writer: its table and the rows ``update`` brought that are not applied yet, each with the
    time it came (``time.monotonic``)."""

    table: str
    pending: list[tuple[bytes, list[Update], float]] = field(default_factory=list)
    #: seconds a row may wait before it is applied (the writer options' ``timeoutMs``; None: no bound)
    timeout: float | None = None
    #: rows dropped because they waited longer than ``timeout``, reported by the next flush
    timed_out: int = 0
    #: a bulk file writer: (bulk id, file name); its cells go to the file, not the table
    bulk_file: tuple[str, str] | None = None
    failed: str | None = None
    file_entries: list[Entry] = field(default_factory=list)


@dataclass
class SimScanner:
    table: str
    ranges: list[KeyRange]
    iterators: list[IteratorConfig]
    authorizations: frozenset[bytes] | None
    columns: list[tuple[bytes, bytes | None]]
    isolated: bool = False
    index: int = 0  # the range being read
    last: Entry | None = None  # the last entry returned from it
    last_dups: int = 0  # how many entries of that very key were returned (a key written twice at one time)
    held: list[Entry] = field(default_factory=list)  # an isolated scanner's rest of the row it read
    failure: str | None = None  # what its first nextK fails with (Accumulo checks a batch scan's ranges then)


@dataclass
class SimBulkImport:
    table: str
    files: dict[str, list[Entry]] = field(default_factory=dict)  # completed, not loaded yet


class SimGateway:
    """A proxy handler over ``cluster``. ``secret`` is the shared secret it accepts. ``apply_at_once``: ``update``
    applies what it brings at once (a BatchWriter that sends everything at once) instead of at ``flush``.
    ``batch_order``: the order batch scanners read their ranges in (see the attribute)."""

    def __init__(self, cluster: SimAccumulo, *, secret: str = "sim", apply_at_once: bool = False,
                 batch_order: Callable[[list[KeyRange]], list[KeyRange]] | None = None) -> None:
        self.cluster = cluster
        self.secret = secret
        self.apply_at_once = apply_at_once
        #: the order a batch scanner reads its (merged) ranges in; a real one answers in no particular order, so a
        #: simulation may shuffle them (default: in key order)
        self.batch_order = batch_order
        self.writers: dict[str, SimWriter] = {}
        self.scanners: dict[str, SimScanner] = {}
        self.conditional_writers: dict[str, tuple[str, frozenset[bytes]]] = {}
        self.bulk_imports: dict[str, SimBulkImport] = {}
        self._ids = itertools.count(1)

    def _new_id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids)}"

    def _check(self, secret: str) -> None:
        if secret != self.secret:
            raise proxy.AccumuloSecurityException("Error BAD_CREDENTIALS - Username or Password is Invalid")

    def _guard(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except SimError as exc:
            raise undeclared(exc) from None

    # --- for the simulation -----------------------------------------------------------------------------

    def pending_writers(self) -> list[str]:
        """The ids of writers holding rows not applied yet."""
        return [wid for wid, w in self.writers.items() if w.pending and w.bulk_file is None]

    def apply_some(self, writer_id: str, rows: int | None = None) -> int:
        """Apply the first ``rows`` rows (all: None) a writer holds, as a BatchWriter sending before its flush;
        how many were applied."""
        w = self.writers.get(writer_id)
        if w is None or w.bulk_file is not None:
            return 0
        if w.timeout is not None and w.pending:
            now = time.monotonic()
            kept = [p for p in w.pending if now - p[2] <= w.timeout]
            w.timed_out += len(w.pending) - len(kept)
            w.pending = kept
        n = len(w.pending) if rows is None else min(rows, len(w.pending))
        batch, w.pending = w.pending[:n], w.pending[n:]
        if batch and w.table in self.cluster.tables:
            self.cluster.write(w.table, [(row, updates) for row, updates, _ in batch])
        return n

    def expire(self, session_id: str) -> bool:
        """Forget one writer, scanner or conditional writer, as the gateway's idle expiry does (a writer's rows not
        applied are lost); whether there was one."""
        return any(registry.pop(session_id, None) is not None
                   for registry in (self.writers, self.scanners, self.conditional_writers))  # type: ignore[attr-defined]

    def forget_sessions(self) -> None:
        """Drop every writer and scanner, as a gateway restart does (what writers held is lost)."""
        self.writers.clear()
        self.scanners.clear()
        self.conditional_writers.clear()

    # --- table operations -------------------------------------------------------------------------------

    def namespaceExists(self, secret: str, namespace: str) -> bool:
        self._check(secret)
        return namespace in self.cluster.namespaces

    def tableExists(self, secret: str, table: str) -> bool:
        self._check(secret)
        return self.cluster.table_exists(table)

    def listTables(self, secret: str) -> set[str]:
        self._check(secret)
        return self.cluster.list_tables()

    def tableIdMap(self, secret: str) -> dict[str, str]:
        self._check(secret)
        return self.cluster.table_ids()

    def createTable(self, secret: str, table: str, versioning: bool, time_type: int) -> None:
        self._check(secret)
        self._guard(lambda: self.cluster.create_table(table, bool(versioning),
                                                      time_type == proxy.TimeType.LOGICAL))

    def deleteTable(self, secret: str, table: str) -> None:
        self._check(secret)
        self._guard(lambda: self.cluster.delete_table(table))

    def listSplits(self, secret: str, table: str, max_splits: int) -> list[bytes]:
        self._check(secret)
        splits = self._guard(lambda: self.cluster.splits(table))
        return list(splits)[:max_splits] if len(splits) <= max_splits else _spread(splits, max_splits)

    def addSplits(self, secret: str, table: str, splits: set[bytes]) -> None:
        self._check(secret)
        self._guard(lambda: self.cluster.add_splits(table, splits))

    def setTableProperty(self, secret: str, table: str, key: str, value: str) -> None:
        self._check(secret)
        self._guard(lambda: self.cluster.set_property(table, key, value))

    def removeTableProperty(self, secret: str, table: str, key: str) -> None:
        self._check(secret)
        self._guard(lambda: self.cluster.remove_property(table, key))

    def getTableProperties(self, secret: str, table: str) -> dict[str, str]:
        self._check(secret)
        return self._guard(lambda: self.cluster.properties(table))

    def attachIterator(self, secret: str, table: str, setting: Any, scopes: set[int]) -> None:
        self._check(secret)
        it = _iterators([setting])[0]
        self._guard(lambda: self.cluster.attach_iterator(table, it, [_SCOPE_NAMES[s] for s in scopes]))

    def flushTable(self, secret: str, table: str, start: bytes | None, end: bytes | None, wait: bool) -> None:
        self._check(secret)
        self._guard(lambda: self.cluster.flush(table, start or None, end or None))

    def compactTable(self, secret: str, table: str, start: bytes | None, end: bytes | None, iterators: Any,
                     flush: bool, wait: bool, selector: Any = None, configurer: Any = None) -> None:
        self._check(secret)
        if selector is not None or configurer is not None:
            raise proxy.AccumuloException("the simulated Accumulo has no compaction selector or configurer")
        its = _iterators(iterators)
        self._guard(lambda: self.cluster.compact(table, start or None, end or None, its, flush=flush is not False))

    def getUserAuthorizations(self, secret: str, user: str) -> list[bytes]:
        self._check(secret)
        return sorted(self.cluster.user_authorizations or ())

    def changeUserAuthorizations(self, secret: str, user: str, authorizations: set[bytes]) -> None:
        self._check(secret)
        self.cluster.user_authorizations = frozenset(authorizations)

    def gatewayExtensions(self, secret: str) -> set[str]:
        self._check(secret)
        return set(EXTENSIONS)

    def unreadableVisibilities(self, secret: str, table: str) -> dict[str, int]:
        self._check(secret)
        return self._guard(lambda: self.cluster.unreadable_visibilities(table))

    # --- scanning ---------------------------------------------------------------------------------------

    def createScanner(self, secret: str, table: str, options: Any) -> str:
        self._check(secret)
        o = options or proxy.ScanOptions()
        return self._scanner(table, [_range(o.range)], o.iterators, o.authorizations, o.columns,
                             bool(getattr(o, "isolated", None)))

    def createBatchScanner(self, secret: str, table: str, options: Any) -> str:
        self._check(secret)
        o = options or proxy.BatchScanOptions()
        ranges = [_range(r) for r in o.ranges] if o.ranges else [KeyRange()]
        failure = None
        if o.columns:  # each range bound to the columns before they are merged; one that inverts fails the scan
            try:
                ranges = [bound_range(r, _columns(o.columns)) for r in ranges]
            except InvalidArgument as exc:
                failure = str(exc)
        ranges = merge_ranges(ranges)
        if self.batch_order is not None:
            ranges = self.batch_order(ranges)
        sid = self._scanner(table, ranges, o.iterators, o.authorizations, o.columns, False)
        self.scanners[sid].failure = failure
        return sid

    def _scanner(self, table: str, ranges: list[KeyRange], iterators: Any, auths: Any, columns: Any,
                 isolated: bool) -> str:
        if not self.cluster.table_exists(table):
            raise proxy.TableNotFoundException(f"Table {table} does not exist")
        if auths is not None and self.cluster.user_authorizations is not None:
            missing = set(auths) - self.cluster.user_authorizations
            if missing:
                raise proxy.AccumuloSecurityException(
                    f"Error BAD_AUTHORIZATIONS - The user does not have the specified authorizations "
                    f"assigned ({sorted(missing)})")
        sid = self._new_id("scanner")
        self.scanners[sid] = SimScanner(table, ranges, _iterators(iterators),
                                        None if auths is None else frozenset(auths), _columns(columns), isolated)
        return sid

    def nextK(self, scanner: str, k: int) -> Any:
        s = self.scanners.get(scanner)
        if s is None:
            raise proxy.UnknownScanner(f"unknown scanner {scanner}")
        try:
            if s.failure is not None:
                raise InvalidArgument(s.failure)
            cells, more = self._page(s, max(1, k))
        except SimError as exc:
            from thriftpy2.thrift import TApplicationException
            raise TApplicationException(TApplicationException.INTERNAL_ERROR,
                                        f"{SERVER}{SEPARATOR}scan failed on the server: {exc}") from None
        results = [proxy.KeyValue(proxy.Key(e[0], e[1], e[2], e[3], -e[4]), e[7]) for e in cells]
        return proxy.ScanResult(results=results, more=more)

    def _read(self, s: SimScanner, index: int, after: Entry | None, from_row: bytes | None = None) -> Any:
        return self.cluster.scan(s.table, s.ranges[index], iterators=s.iterators, authorizations=s.authorizations,
                                 columns=s.columns, after=after, after_dups=s.last_dups, from_row=from_row)

    @staticmethod
    def _returned(s: SimScanner, entries: list[Entry]) -> None:
        for e in entries:
            if s.last is not None and e[:5] == s.last[:5]:
                s.last_dups += 1
            else:
                s.last, s.last_dups = e, 1

    def _page(self, s: SimScanner, k: int) -> tuple[list[Entry], bool]:
        if s.isolated:
            return self._isolated_page(s, k)
        out: list[Entry] = []
        while s.index < len(s.ranges):
            need = k - len(out)
            got = list(itertools.islice(self._read(s, s.index, s.last), need + 1))  # one more: is there more?
            if len(got) > need:
                out.extend(got[:need])
                self._returned(s, got[:need])
                return out, True
            out.extend(got)
            s.index, s.last, s.last_dups = s.index + 1, None, 0
        return out, False

    def _isolated_page(self, s: SimScanner, k: int) -> tuple[list[Entry], bool]:
        out: list[Entry] = []
        while len(out) < k and s.index < len(s.ranges):
            if not s.held:
                s.held = self._next_row(s)
                if not s.held:
                    s.index, s.last = s.index + 1, None
                    continue
            take = s.held[:k - len(out)]
            s.held = s.held[len(take):]
            out.extend(take)
            s.last = take[-1]
        return out, self._more(s)

    def _next_row(self, s: SimScanner) -> list[Entry]:
        source = self._read(s, s.index, None, None if s.last is None else s.last[0] + b"\x00")
        row: list[Entry] = []
        for e in source:
            if row and e[0] != row[0][0]:
                break
            row.append(e)
        return row

    def _more(self, s: SimScanner) -> bool:
        if s.held:
            return True
        for i in range(s.index, len(s.ranges)):
            after = s.last if i == s.index else None
            if s.isolated and after is not None:
                source = self._read(s, i, None, after[0] + b"\x00")
            else:
                source = self._read(s, i, after)
            if next(iter(source), None) is not None:
                return True
        return False

    def closeScanner(self, scanner: str) -> None:
        if self.scanners.pop(scanner, None) is None:
            raise proxy.UnknownScanner(f"unknown scanner {scanner}")

    # --- writing ----------------------------------------------------------------------------------------

    def updateAndFlush(self, secret: str, table: str, cells: dict[bytes, list[Any]]) -> None:
        self._check(secret)
        rows = [(row, _updates(us)) for row, us in cells.items()]
        self._guard(lambda: self.cluster.write(table, rows))

    def createWriter(self, secret: str, table: str, options: Any) -> str:
        self._check(secret)
        if table not in self.cluster.tables:
            raise proxy.TableNotFoundException(f"Table {table} does not exist")
        wid = self._new_id("writer")
        timeout_ms = getattr(options, "timeoutMs", None) if options is not None else None
        self.writers[wid] = SimWriter(table, timeout=timeout_ms / 1000 if timeout_ms else None)
        return wid

    def update(self, writer: str, cells: dict[bytes, list[Any]]) -> None:
        w = self.writers.get(writer)
        if w is None:
            return  # oneway: the next flush or close reports the unknown writer
        if w.bulk_file is not None:
            self._bulk_update(w, cells)
            return
        now = time.monotonic()
        w.pending.extend((row, _updates(us), now) for row, us in cells.items())
        if self.apply_at_once:
            self.apply_some(writer)

    def flush(self, writer: str) -> None:
        w = self.writers.get(writer)
        if w is None:
            raise proxy.UnknownWriter(f"unknown writer {writer}")
        if w.bulk_file is not None:
            if w.failed is not None:
                raise proxy.MutationsRejectedException(w.failed)
            return
        if w.table not in self.cluster.tables:
            w.pending.clear()
            raise proxy.MutationsRejectedException(f"table {w.table} does not exist (it was deleted)")
        self.apply_some(writer)
        if w.timed_out:
            dropped, w.timed_out = w.timed_out, 0
            raise proxy.MutationsRejectedException(
                f"{TIMED_OUT}{SEPARATOR}{dropped} rows were not written within the writer's timeout of "
                f"{w.timeout:g} s")

    def closeWriter(self, writer: str) -> None:
        w = self.writers.get(writer)
        if w is None:
            raise proxy.UnknownWriter(f"unknown writer {writer}")
        try:
            if w.bulk_file is not None:
                self._close_bulk_file(w)
            else:
                self.flush(writer)
        finally:
            self.writers.pop(writer, None)

    def createConditionalWriter(self, secret: str, table: str, options: Any) -> str:
        self._check(secret)
        if table not in self.cluster.tables:
            raise proxy.TableNotFoundException(f"Table {table} does not exist")
        auths = frozenset((options.authorizations if options is not None else None) or ())
        cid = self._new_id("conditional")
        self.conditional_writers[cid] = (table, auths)
        return cid

    def updateRowsConditionally(self, writer: str, updates: dict[bytes, Any]) -> dict[bytes, int]:
        known = self.conditional_writers.get(writer)
        if known is None:
            raise proxy.UnknownWriter(f"unknown conditional writer {writer}")
        table, auths = known
        out: dict[bytes, int] = {}
        for row, cu in updates.items():
            conditions = [Condition(c.column.colFamily or b"", c.column.colQualifier or b"",
                                    c.column.colVisibility or b"", c.timestamp, c.value,
                                    tuple(_iterators(c.iterators))) for c in cu.conditions or ()]
            status = self._guard(lambda: self.cluster.write_conditionally(
                table, row, conditions, _updates(cu.updates or ()), auths))  # noqa: B023 - called at once
            out[row] = _STATUS[status]
        return out

    def closeConditionalWriter(self, writer: str) -> None:
        self.conditional_writers.pop(writer, None)

    # --- bulk imports -----------------------------------------------------------------------------------

    def _bulk(self, bulk_id: str) -> SimBulkImport:
        b = self.bulk_imports.get(bulk_id)
        if b is None:
            raise proxy.AccumuloException(f"{BULK_IMPORT_NOT_FOUND}{SEPARATOR}no bulk import {bulk_id}")
        return b

    def createBulkImport(self, secret: str, table: str) -> str:
        self._check(secret)
        if table not in self.cluster.tables:
            raise proxy.TableNotFoundException(f"table {table} does not exist (bulk import not created)")
        bid = self._new_id("bulk")
        self.bulk_imports[bid] = SimBulkImport(table)
        return bid

    def createBulkFileWriter(self, secret: str, bulk_id: str, name: str) -> str:
        self._check(secret)
        b = self._bulk(bulk_id)
        for wid, w in list(self.writers.items()):  # a new writer of the name replaces an open one
            if w.bulk_file == (bulk_id, name):
                del self.writers[wid]
        wid = self._new_id("bulkfile")
        self.writers[wid] = SimWriter(b.table, bulk_file=(bulk_id, name))
        return wid

    def _bulk_update(self, w: SimWriter, cells: dict[bytes, list[Any]]) -> None:
        if w.failed is not None:
            return
        for row, us in cells.items():
            for cf, cq, cv, ts, value, delete in _updates(us):
                if ts is None:
                    w.failed = f"bulk file {w.bulk_file}: a cell without a timestamp in row {row!r}"
                    return
                entry: Entry = (row, cf, cq, cv, -ts, 0 if delete else PUT, 0, value or b"")
                if w.file_entries and entry[:6] <= w.file_entries[-1][:6]:
                    w.failed = f"bulk file {w.bulk_file}: key {entry[:5]!r} out of order"
                    return
                w.file_entries.append(entry)

    def _close_bulk_file(self, w: SimWriter) -> None:
        if w.failed is not None:
            raise proxy.MutationsRejectedException(w.failed)
        assert w.bulk_file is not None
        bulk_id, name = w.bulk_file
        b = self.bulk_imports.get(bulk_id)
        if b is None:
            return
        if w.file_entries:
            b.files[name] = w.file_entries
        else:
            b.files.pop(name, None)

    def importBulk(self, secret: str, bulk_id: str) -> None:
        self._check(secret)
        b = self._bulk(bulk_id)
        if b.table not in self.cluster.tables:
            raise proxy.TableNotFoundException(f"Table {b.table} does not exist")
        for name in sorted(b.files):
            entries = [(*e[:6], -self.cluster.next_seq(), e[7]) for e in b.files.pop(name)]
            self.cluster.import_file(b.table, entries)  # type: ignore[arg-type]

    def bulkFilesLeft(self, secret: str, bulk_id: str) -> int:
        self._check(secret)
        return len(self._bulk(bulk_id).files)

    def deleteBulkImport(self, secret: str, bulk_id: str) -> None:
        self._check(secret)
        self.bulk_imports.pop(bulk_id, None)
        for wid, w in list(self.writers.items()):
            if w.bulk_file is not None and w.bulk_file[0] == bulk_id:
                del self.writers[wid]


def _spread(splits: list[bytes], n: int) -> list[bytes]:
    """``n`` of ``splits`` spread evenly (as Accumulo's listSplits with a maximum)."""
    step = len(splits) / (n + 1)
    return [splits[int(step * (i + 1))] for i in range(n)]


SECURITY_PREFIX = SECURITY + SEPARATOR
