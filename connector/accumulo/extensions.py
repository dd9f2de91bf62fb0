"""This project's gateway extensions of the Accumulo Proxy 2.x interface, and how the client makes sure the
gateway it talks to serves one before relying on it.

An upstream accumulo-proxy skips struct fields it does not know (``ScanOptions.isolated``, field 102) and
answers calls it does not know (the bulk calls) with ``TApplicationException(UNKNOWN_METHOD)``. A skipped
field is silent: a scan asked to be isolated would simply not be. So before the client relies on an
extension it asks the gateway that serves the call, with ``gatewayExtensions()`` (itself an extension: an
upstream proxy answers UNKNOWN_METHOD, which counts as "none"), and refuses with :class:`AccumuloError` when the
gateway does not name it. The answer is kept per gateway address of a connection, so it costs one round trip
per gateway.

The names (:data:`SCAN_TIMEOUT`, :data:`SCAN_ISOLATED`, :data:`BULK_RFILE`, :data:`SUMMARY_VISIBILITY`) are
spelt here and in the gateway's ``Gateway.EXTENSIONS``; ``tests/test_isolated_scan.py`` checks that the two
agree.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any

from .errors import AccumuloError, ConnectionLostError
from .session import Session

#: ``ScanOptions.timeoutMs`` / ``BatchScanOptions.timeoutMs`` (field 101) bound a scan's wait for tablet servers
SCAN_TIMEOUT = "scan.timeoutMs"
#: ``ScanOptions.isolated`` (field 102): each row read whole at one version (``Scanner.enableIsolation()``)
SCAN_ISOLATED = "scan.isolated"
#: ``createBulkImport``, ``createBulkFileWriter``, ``importBulk``, ``bulkFilesLeft``, ``deleteBulkImport``
BULK_RFILE = "bulk.rfile"
#: ``unreadableVisibilities``: what a table's visibility summaries hold that the gateway's user cannot read
SUMMARY_VISIBILITY = "summary.visibility"

_known: weakref.WeakKeyDictionary[Any, dict[str, frozenset[str]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def is_unknown_method(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a server's UNKNOWN_METHOD answer: a call that an
    upstream accumulo-proxy (or an older gateway) does not have."""
    from thriftpy2.thrift import TApplicationException

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TApplicationException) and seen.type == TApplicationException.UNKNOWN_METHOD:
            return True
        seen = seen.__cause__
    return False


def gateway_extensions(conn: Session) -> tuple[str, frozenset[str]]:
    """The gateway this thread's socket talks to (``host:port``) and the extensions it names (none for an
    upstream proxy). Asked once per gateway of ``conn``, then remembered. A socket lost while asking (a
    gateway restarted, or failed over to another of the pool) is replaced and the question asked again, within
    the connection's retry policy."""
    return conn.retry_policy().starting_over(ConnectionLostError)(_ask_extensions, conn)


def _ask_extensions(conn: Session) -> tuple[str, frozenset[str]]:
    where = conn.address()
    cached = None
    with _lock, contextlib.suppress(TypeError):
        cached = _known.get(conn, {}).get(where)
    if cached is not None:
        return where, cached
    try:
        with conn.raw_client("gatewayExtensions") as client:
            names = frozenset(client.gatewayExtensions(conn.shared_secret))
    except ConnectionLostError:
        raise
    except Exception as exc:
        if not is_unknown_method(exc):
            from .errors import translate

            translated = translate(exc)
            raise translated from exc
        names = frozenset()
    if conn.address() != where:  # the socket went to another gateway meanwhile: the answer is not where's
        raise ConnectionLostError(f"the connection to {where} was lost while asking for its extensions")
    with _lock, contextlib.suppress(TypeError):  # a session that takes no weak reference: asked every time
        _known.setdefault(conn, {})[where] = names
    return where, names


def require_extension(conn: Session, name: str, what: str) -> None:
    """Raise :class:`AccumuloError` unless the gateway this thread's socket talks to serves extension ``name``;
    ``what`` says what needs it (for the message)."""
    where, names = gateway_extensions(conn)
    if name not in names:
        raise AccumuloError(
            f"{what} needs this project's gateway (integration/gateway): the gateway at {where} does not "
            f"confirm the {name!r} extension (an upstream accumulo-proxy does not have it)")
