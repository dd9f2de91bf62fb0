"""Scanning: page through a range with ``nextK``; a dropped connection resumes after the last cell."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ._idl import proxy
from .cells import Cell, IteratorSetting, Key, Range, columns_to_thrift
from .errors import ConnectionLostError, UnknownScannerError
from .mutation import BytesLike, to_bytes
from .transport import is_transient

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger(__name__)


def _auths(authorizations: Iterable[BytesLike] | None) -> set[bytes] | None:
    if authorizations is None:
        return None
    return {to_bytes(a, "authorization") for a in authorizations}


def _cell(kv: Any) -> Cell:
    k = kv.key
    return Cell(k.row, k.colFamily, k.colQualifier, k.colVisibility, k.timestamp, kv.value)


def scan(conn: Connection, table: str, rng: Range | None, columns: Sequence[Any] | None,
         authorizations: Iterable[BytesLike] | None, iterators: Sequence[IteratorSetting],
         batch_size: int) -> Iterator[Cell]:
    rng = rng or Range()
    auths = _auths(authorizations)
    thrift_columns = columns_to_thrift(columns)
    thrift_iters = [i.to_thrift() for i in iterators] or None
    last: Key | None = None
    failures = 0
    while True:
        current = rng if last is None else rng.after(last)
        options = proxy.ScanOptions(authorizations=auths, range=current.to_thrift(), columns=thrift_columns,
                                    iterators=thrift_iters, bufferSize=batch_size)
        scanner_id = conn.call("createScanner", table, options)
        try:
            while True:
                result = conn.call("nextK", scanner_id, batch_size, secret=False, retry=False)
                for kv in result.results:
                    cell = _cell(kv)
                    last = Key.of(cell)
                    yield cell
                if not result.more:
                    return
        except (ConnectionLostError, UnknownScannerError) as exc:
            # nextK is not safe to repeat (a lost reply skips cells): resume on a fresh scanner right
            # after the last cell we yielded
            failures += 1
            if failures >= conn.retry.attempts:
                raise
            log.warning("scan of %s interrupted (%s); resuming after %r", table, exc, last)
            time.sleep(min(conn.retry.max_wait, conn.retry.initial_wait * 2**failures))
        finally:
            _close_quietly(conn, scanner_id)


def batch_scan(conn: Connection, table: str, ranges: Sequence[Range], columns: Sequence[Any] | None,
               authorizations: Iterable[BytesLike] | None, iterators: Sequence[IteratorSetting],
               threads: int, batch_size: int) -> Iterator[Cell]:
    options = proxy.BatchScanOptions(authorizations=_auths(authorizations),
                                     ranges=[r.to_thrift() for r in ranges],
                                     columns=columns_to_thrift(columns),
                                     iterators=[i.to_thrift() for i in iterators] or None, threads=threads)
    scanner_id = conn.call("createBatchScanner", table, options)
    try:
        while True:
            result = conn.call("nextK", scanner_id, batch_size, secret=False, retry=False)
            for kv in result.results:
                yield _cell(kv)
            if not result.more:
                return
    finally:
        _close_quietly(conn, scanner_id)


def _close_quietly(conn: Connection, scanner_id: str) -> None:
    try:
        conn._thread_client().closeScanner(scanner_id)
    except Exception as exc:  # noqa: BLE001 - the scanner may be gone with a dead gateway; it expires anyway
        if not (is_transient(exc) or isinstance(exc, proxy.UnknownScanner)):
            log.debug("closeScanner failed: %s", exc)
