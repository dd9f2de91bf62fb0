"""Scanning: page through a range with ``nextK``; a dropped connection resumes after the last cell.

Every page is read with the raw ``nextK`` call of :mod:`.wire.next_k` and decoded by the Rust decoder into
a cells batch; ``scan`` and ``batch_scan`` build their :class:`Cell` tuples from that batch."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, TypeVar

import pyarrow as pa

from ._idl import proxy
from .cells import Cell, IteratorSetting, Key, Range, columns_to_thrift
from .errors import (
    AccumuloSecurityError,
    AccumuloServerError,
    ConnectionLostError,
    TimedOutError,
    UnknownScannerError,
    translate,
)
from .extensions import SCAN_ISOLATED, require_extension
from .mutation import BytesLike, to_bytes
from .session import Session
from .whole_rows import resume_range, whole_rows
from .wire.next_k import next_k_batch
from .wire.scanners import BATCH_SCANNER, SCANNER, encode_batch_scanner_call, encode_scanner_call

log = logging.getLogger(__name__)
T = TypeVar("T")
P = TypeVar("P")  # a page: a list of cells or a cells batch


def _auths(authorizations: Iterable[BytesLike] | None) -> set[bytes] | None:
    if authorizations is None:
        return None
    return {to_bytes(a, "authorization") for a in authorizations}


# A Java exception's toString(): "java.lang.RuntimeException: org.apache...AccumuloServerException: ..."
_WRAPPED_JAVA_EXCEPTION = re.compile(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+: ")


def scan_error(exc: BaseException, where: str) -> BaseException:
    """The client's error for a failed ``nextK``.

    Upstream's proxy reports *every* failure while reading (an iterator class the tablet server cannot
    load, an iterator that threw, a tablet server error) as AccumuloSecurityException carrying the Java
    exception's ``toString()``. Only a security cause in that text makes it a security error; any other
    wrapped failure is a server error. Our gateway sends real security errors as such (with Accumulo's
    message) and server failures as "AccumuloServerException: ...".
    """
    if isinstance(exc, proxy.AccumuloSecurityException):
        message = exc.msg or ""
        if _WRAPPED_JAVA_EXCEPTION.match(message) and "SecurityException" not in message:
            return AccumuloServerError(f"scan failed on the server ({where}), not a permission problem: {message}")
        return AccumuloSecurityError(message or "AccumuloSecurityException")
    err = translate(exc)
    if isinstance(err, TimedOutError):
        return err
    if isinstance(err, AccumuloServerError):
        return AccumuloServerError(f"scan failed on the server ({where}): {err}")
    return err


def _page(conn: Session, fetch: Callable[[Any, str, int], T], scanner_id: str, k: int) -> T:
    """One page of a scanner. Not retried: a lost reply would skip cells (the caller resumes instead)."""
    try:
        with conn.raw_client("nextK") as client:
            return fetch(client, scanner_id, k)
    except ConnectionLostError:
        raise
    except Exception as exc:
        raise scan_error(exc, conn.address()) from exc


_new_tuple = tuple.__new__  # builds a Cell from a tuple without NamedTuple's argument parsing


def cells_of(batch: pa.RecordBatch) -> list[Cell]:
    """A cells batch (``CELLS_SCHEMA``, as ``nextK`` pages decode) as :class:`Cell` tuples, in order."""
    columns = [column.to_pylist() for column in batch.columns]
    return list(map(_new_tuple, repeat(Cell), zip(*columns, strict=True)))


def next_k_cells(client: Any, scanner_id: str, k: int) -> tuple[list[Cell], bool]:
    """One ``nextK`` page as cells: decoded natively into a batch, then cells built from it."""
    batch, more = next_k_batch(client, scanner_id, k)
    return cells_of(batch), more


def _next_page(conn: Session, scanner_id: str, k: int) -> tuple[list[Cell], bool]:
    return _page(conn, next_k_cells, scanner_id, k)


def _resumable(conn: Session, table: str, rng: Range | None, columns: Sequence[Any] | None,
               authorizations: Iterable[BytesLike] | None, iterators: Sequence[IteratorSetting],
               batch_size: int, fetch: Callable[[Any, str, int], tuple[P, bool]],
               last_key: Callable[[P], Key | None], isolated: bool = False) -> Iterator[P]:
    """Pages of ``range`` in key order; a lost connection or scanner resumes on a fresh scanner right
    after the last cell of the last page yielded (``last_key``; None for an empty page), after a pause of the
    connection's retry policy (jittered). ``conn.retry.attempts`` failures in a row without a page of progress
    fail the scan; progress starts the count again, so a scan that lives for months survives any number of
    gateway restarts. ``isolated``: each row whole at one version, only from a gateway that confirms it
    (:mod:`.extensions`)."""
    rng = rng or Range()
    auths = _auths(authorizations)
    thrift_columns = columns_to_thrift(columns)
    thrift_iters = [i.to_thrift() for i in iterators] or None
    last: Key | None = None
    failures = 0
    if isolated:  # complete rows only; a resumed scan starts at the next row (.whole_rows)
        fetch = whole_rows(fetch)
    while True:
        current = rng if last is None else resume_range(rng, last) if isolated else rng.after(last)
        with _within_server_wait(conn, table):
            if auths is None and thrift_iters is None:  # encoded directly: every read begins with one
                scanner_id = conn.call_encoded(SCANNER, encode_scanner_call(
                    conn.shared_secret, table, current, thrift_columns, batch_size, conn.server_wait_ms or None,
                    isolated or None))
            else:
                options = proxy.ScanOptions(authorizations=auths, range=current.to_thrift(), columns=thrift_columns,
                                            iterators=thrift_iters, bufferSize=batch_size,
                                            timeoutMs=conn.server_wait_ms or None, isolated=isolated or None)
                scanner_id = conn.call("createScanner", table, options)
            try:
                if isolated:  # asked of the gateway holding the scanner: upstream's skips the field silently
                    require_extension(conn, SCAN_ISOLATED, f"an isolated scan of table {table!r}")
                while True:
                    page, more = _page(conn, fetch, scanner_id, batch_size)
                    key = last_key(page)
                    if key is not None:
                        last = key
                        failures = 0  # progress: the count is of failures in a row
                    yield page
                    if not more:
                        return
            except (ConnectionLostError, UnknownScannerError) as exc:
                # nextK is not safe to repeat (a lost reply skips cells): resume on a fresh scanner right
                # after the last cell we yielded
                failures += 1
                if failures >= conn.retry.attempts:
                    raise
                log.warning("scan of %s interrupted (%s); resuming after %r", table, exc, last)
                time.sleep(conn.retry.pause(failures))
            finally:
                _close_quietly(conn, scanner_id)


def _last_cell_key(cells: list[Cell]) -> Key | None:
    return Key.of(cells[-1]) if cells else None


def _last_batch_key(batch: pa.RecordBatch) -> Key | None:
    if not batch.num_rows:
        return None
    i = batch.num_rows - 1
    return Key(*(batch.column(name)[i].as_py() for name in ("row", "cf", "cq", "cv", "ts")))


def scan(conn: Session, table: str, rng: Range | None, columns: Sequence[Any] | None,
         authorizations: Iterable[BytesLike] | None, iterators: Sequence[IteratorSetting],
         batch_size: int, isolated: bool = False) -> Iterator[Cell]:
    for cells in _resumable(conn, table, rng, columns, authorizations, iterators, batch_size, next_k_cells,
                            _last_cell_key, isolated):
        yield from cells


def scan_batches(conn: Session, table: str, rng: Range | None, columns: Sequence[Any] | None,
                 authorizations: Iterable[BytesLike] | None, iterators: Sequence[IteratorSetting],
                 batch_size: int, isolated: bool = False) -> Iterator[pa.RecordBatch]:
    """As :func:`scan`, one cells batch per ``nextK`` page, decoded natively (empty pages skipped)."""
    for batch in _resumable(conn, table, rng, columns, authorizations, iterators, batch_size, next_k_batch,
                            _last_batch_key, isolated):
        if batch.num_rows:
            yield batch


def batch_scan(conn: Session, table: str, ranges: Sequence[Range], columns: Sequence[Any] | None,
               authorizations: Iterable[BytesLike] | None, iterators: Sequence[IteratorSetting],
               threads: int, batch_size: int) -> Iterator[Cell]:
    # no ranges means everything; upstream's proxy refuses an empty list, so send the whole range
    ranges = ranges or [Range()]
    with _within_server_wait(conn, table):
        if authorizations is None and columns is None and not iterators:  # encoded directly: many ranges
            scanner_id = conn.call_encoded(BATCH_SCANNER, encode_batch_scanner_call(
                conn.shared_secret, table, ranges, threads, conn.server_wait_ms or None))
        else:
            options = proxy.BatchScanOptions(authorizations=_auths(authorizations),
                                             ranges=[r.to_thrift() for r in ranges],
                                             columns=columns_to_thrift(columns),
                                             iterators=[i.to_thrift() for i in iterators] or None, threads=threads,
                                             timeoutMs=conn.server_wait_ms or None)
            scanner_id = conn.call("createBatchScanner", table, options)
        try:
            while True:
                cells, more = _next_page(conn, scanner_id, batch_size)
                yield from cells
                if not more:
                    return
        finally:
            _close_quietly(conn, scanner_id)


def batch_read(conn: Session, table: str, ranges: Sequence[Range], columns: Sequence[Any] | None,
               authorizations: Iterable[BytesLike] | None, iterators: Sequence[IteratorSetting],
               threads: int, batch_size: int) -> list[Cell]:
    """The cells of :func:`batch_scan`, read whole. A batch scanner cannot resume (its pages come in no order), so
    a read cut short by a lost connection or scanner (a gateway killed mid-read) is read again from the start,
    within the connection's retry policy; nothing of the read cut short is returned."""
    again = conn.retry_policy().starting_over((ConnectionLostError, UnknownScannerError))
    return again(lambda: list(batch_scan(conn, table, ranges, columns, authorizations, iterators, threads,
                                         batch_size)))


@contextlib.contextmanager
def _within_server_wait(conn: Session, table: str) -> Iterator[None]:
    """Name the table and the bound in the error of a scan that found no tablet server in time."""
    try:
        yield
    except TimedOutError as exc:
        raise conn.timed_out(table, "served the scan") from exc


def _close_quietly(conn: Session, scanner_id: str) -> None:
    try:
        with conn.raw_client("closeScanner") as client:
            client.closeScanner(scanner_id)
    except Exception as exc:  # noqa: BLE001 - the scanner may be gone with a dead gateway; it expires anyway
        if not isinstance(exc, (ConnectionLostError, proxy.UnknownScanner)):
            log.debug("closeScanner failed: %s", exc)
