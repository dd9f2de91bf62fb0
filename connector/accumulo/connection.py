"""The entry point: a ``Connection`` to an Accumulo Thrift gateway (ours, or an upstream accumulo-proxy 2.x)."""

from __future__ import annotations

import contextlib
import difflib
import os
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import tenacity

from ._idl import proxy
from .bulk import BulkImport
from .cells import Cell, IteratorSetting, Range
from .conditional import Condition, ConditionalMutation, ConditionalWriter
from .errors import (
    AccumuloError,
    AccumuloSecurityError,
    ConnectionLostError,
    InvalidMutationError,
    TableExistsError,
    TableNotFoundError,
    TimedOutError,
    TlsError,
    translate,
)
from .gateways import Address, Gateways, parse_addresses
from .mutation import BytesLike, Mutation, to_bytes
from .scanner import batch_read, batch_scan, scan, scan_batches
from .secret import resolve_secret
from .tls import TlsOptions, speaks_tls
from .transport import NO_RETRY, RetryPolicy, ThreadClient, close_client, is_transient, open_client, send_frame
from .wire.frames import CALL_OVERHEAD_BYTES, DEFAULT_MAX_FRAME_BYTES, check_max_frame_bytes
from .wire.structs import cells_map, check_sendable
from .writer import BatchWriter

#: how much longer than ``server_wait`` the client waits for a reply before it calls the socket dead, so the
#: gateway's own timeout (which carries the reason) always answers first
SERVER_WAIT_MARGIN = 30.0
DEFAULT_PORT = 42424

#: how many times :meth:`Connection.put_if_absent` sends a put whose outcome was lost and did not take
PUT_IF_ABSENT_ATTEMPTS = 3


def _property_race(exc: BaseException) -> bool:
    """Whether ``exc`` is Accumulo refusing a table property change because another writer changed the table's
    properties at the same moment: its manager reports the ZooKeeper version conflict as "Invalid table
    property". Eight threads setting one property each of one table saw 7 of them refused."""
    return isinstance(exc, AccumuloError) and "Invalid table property" in str(exc)


#: table property changes, made again while they race others (a genuinely invalid property fails after these)
_PROPERTY_RACE = tenacity.Retrying(retry=tenacity.retry_if_exception(_property_race),
                                   wait=tenacity.wait_random_exponential(multiplier=0.05, max=1.0),
                                   stop=tenacity.stop_after_attempt(8), reraise=True)


class Connection:
    """A connection to an Accumulo Thrift gateway.

    Safe to use from several threads: each thread gets its own socket, opened on first use. Writers open
    a socket of their own. Transient transport errors (refused, reset, timeout) are retried with backoff
    on a fresh socket, within ``retry``'s bounds; then ``ConnectionLostError`` is raised.

    ``hosts`` names several gateways of the cluster instead of one ``host`` (``["gw1:42424", "gw2"]``;
    ``port`` is the port of those without one): each new socket goes to the next one in turn, host-local
    ones first, and a gateway that is unreachable is passed over (see :mod:`connector.accumulo.gateways`).

    The shared secret is checked once, on the first socket, with a call that declares the security error
    on every server (upstream's ``tableExists``/``listTables`` turn a wrong secret into a message-less
    internal error): a wrong secret raises ``AccumuloSecurityError`` whatever the first call is.

    ``max_frame_bytes`` is the largest Thrift frame the client sends (default 15 MiB, under upstream's
    16 MiB ``maxFrameSize``); see :mod:`connector.accumulo.wire.frames`.

    TLS (:mod:`connector.accumulo.tls`): ``tls_ca_file`` turns it on; the gateway's certificate must verify
    against it and name ``tls_server_hostname`` (default: the gateway's host); ``tls_cert_file`` and
    ``tls_key_file`` (PEM) give a client certificate. ``TlsError``: a certificate that does not verify, or a
    plain client on a TLS gateway. Without TLS the secret crosses the network in clear.

    ``server_wait`` (seconds) bounds how long the gateway lets a scan, a writer's flush or a conditional
    write wait for a tablet server (a crashed one being restarted, tablets being recovered): within it they
    wait and carry on; after it they fail with ``TimedOutError``. It travels as the writers' and
    conditional writers' ``timeoutMs`` and as the scanners' ``timeoutMs`` (an extension of this gateway;
    upstream's proxy ignores it, and there only the socket timeout ends a stuck scan). The socket
    ``timeout`` is raised to at least ``server_wait + SERVER_WAIT_MARGIN``, so the client never gives up on a
    call (and retries it) while the gateway is still within the bound. None: no bound on the server side
    (Accumulo waits as long as it takes; only the socket timeout and retries end a call). Table operations
    (create, flush, compact, ...) are not bounded by it. ``name`` (a cluster name, say) makes messages
    clearer.
    """

    def __init__(
        self,
        host: str | None = None,
        port: int = DEFAULT_PORT,
        shared_secret: str | None = None,
        *,
        secret_file: str | os.PathLike[str] | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        tls_ca_file: str | os.PathLike[str] | None = None,
        tls_cert_file: str | os.PathLike[str] | None = None,
        tls_key_file: str | os.PathLike[str] | None = None,
        tls_server_hostname: str | None = None,
        server_wait: float | None = None,
        name: str = "",
        hosts: Sequence[str] | None = None,
    ) -> None:
        if server_wait is not None and not (0 < server_wait < float("inf")):
            raise ValueError(f"server_wait must be a number of seconds > 0 (or None), got {server_wait!r}")
        self.tls = TlsOptions.from_paths(tls_ca_file, tls_cert_file, tls_key_file, tls_server_hostname)
        if hosts and host:
            raise ValueError("give one gateway (host) or several (hosts), not both")
        one = [Address(host or "127.0.0.1", int(port))]
        self.gateways = Gateways(parse_addresses(hosts, int(port)) if hosts else one)
        self.host, self.port = self.gateways.addresses[0]  # the first gateway, for code that names one
        self.name = name
        self.server_wait = server_wait
        self.timeout = timeout if server_wait is None else max(timeout, server_wait + SERVER_WAIT_MARGIN)
        self.retry = retry or RetryPolicy()
        self.max_frame_bytes = check_max_frame_bytes(max_frame_bytes)
        self._secret = resolve_secret(shared_secret, secret_file)
        self._secret_checked = False
        self._reached = False  # a socket to a gateway opened once: from then on, outages are waited for
        self._local = threading.local()
        self._lock = threading.Lock()
        self._clients: weakref.WeakSet[ThreadClient] = weakref.WeakSet()
        self._closed = False

    def __repr__(self) -> str:  # never shows the secret
        return f"Connection(gateways={str(self.gateways)!r}, tls={self.tls is not None})"

    def describe(self) -> str:
        """How messages name this connection's cluster: its ``name``, else the gateway's address."""
        if self.name:
            return f"cluster {self.name!r}"
        return f"gateway {self.gateways}" if len(self.gateways.addresses) == 1 else f"gateways {self.gateways}"

    def address(self) -> str:
        """The gateway this thread's socket talks to (the first one before it has a socket), for messages."""
        held = getattr(self._local, "held", None)
        return str(held.address if held is not None else self.gateways.addresses[0])

    @property
    def server_wait_ms(self) -> int:
        """``server_wait`` in milliseconds, as the Thrift options carry it (0: no bound)."""
        return 0 if self.server_wait is None else max(1, round(self.server_wait * 1000))

    def timed_out(self, table: str, what: str, detail: str = "") -> TimedOutError:
        """The error for a scan or write on ``table`` that found no tablet server within ``server_wait``."""
        bound = f"{self.server_wait:g} s" if self.server_wait is not None else "its timeout"
        return TimedOutError(f"{self.describe()}, table {table!r}: no tablet server {what} within the "
                             f"server_wait bound of {bound}" + (f" ({detail})" if detail else ""))

    # --- plumbing -----------------------------------------------------------------------------------

    def new_client(self) -> Any:
        """Open a dedicated Thrift client (used by writers, which must not share a socket)."""
        return self._open()[0]

    def _open(self) -> tuple[Any, Address]:
        """A new client on the next gateway that answers, and that gateway's address."""
        if self._closed:
            raise RuntimeError("connection is closed")
        opened = self.gateways.open(lambda a: open_client(a.host, a.port, self.timeout, self.tls), is_transient)
        self._reached = True
        return opened

    def _thread_client(self) -> Any:
        held = getattr(self._local, "held", None)
        if held is None:
            client, address = self._open()
            if not self._secret_checked:
                self._check_secret(client, address)
            held = self._local.held = ThreadClient(client, address)
            with self._lock:
                self._clients.add(held)
        return held.client

    @contextlib.contextmanager
    def raw_client(self, what: str) -> Iterator[Any]:
        """This thread's Thrift client, for a call its caller encodes or decodes itself (a ``nextK`` page, a
        pre-encoded conditional update). Not retried. A transport failure inside the block, or in opening this
        thread's socket (its secret check's answer lost, say), drops the socket and raises ``ConnectionLostError``
        naming ``what``, which callers that start over catch; any other error propagates as raised."""
        try:
            client = self._thread_client()
        except Exception as exc:
            if is_transient(exc):
                raise ConnectionLostError(f"{what}: opening a socket to {self.gateways}: {type(exc).__name__}: "
                                          f"{exc}") from exc
            raise
        try:
            yield client
        except Exception as exc:
            if is_transient(exc):
                where = self.address()
                self._drop_thread_client(exc)
                raise ConnectionLostError(f"{what} on {where}: {exc}") from exc
            raise

    def _check_secret(self, client: Any, address: Address) -> None:
        """Prove the secret with ``namespaceExists``, which declares AccumuloSecurityException everywhere."""
        from thriftpy2.thrift import TApplicationException

        try:
            client.namespaceExists(self._secret, "accumulo")
        except proxy.AccumuloSecurityException as exc:
            close_client(client)
            raise AccumuloSecurityError(
                f"{address} refused the shared secret: {exc.msg}") from exc
        except TApplicationException as exc:
            if exc.type != TApplicationException.UNKNOWN_METHOD:  # an older gateway: calls check it anyway
                close_client(client)
                raise translate(exc) from exc
        except Exception as exc:
            close_client(client)
            if self.tls is None and is_transient(exc) and speaks_tls(address.host, address.port):
                raise TlsError(f"{address} closed the connection on the first call and answers "
                               f"TLS: the gateway may require TLS (set tls_ca_file)") from None
            if is_transient(exc):  # its answer lost: the next socket tries the other gateways first
                self.gateways.mark_down(address)
            raise
        self._secret_checked = True

    def _drop_thread_client(self, exc: BaseException | None = None) -> None:
        """Close this thread's socket; after a transport error ``exc``, new sockets pass its gateway over."""
        held = getattr(self._local, "held", None)
        if held is not None:
            if exc is not None:
                self.gateways.mark_down(held.address)
            self._local.held = None
            with self._lock:
                self._clients.discard(held)
            held.close()

    def call(self, method: str, *args: Any, secret: bool = True, retry: bool = True) -> Any:
        """Call a gateway method (with the shared secret first unless ``secret=False``).

        Transient errors are retried on a fresh socket unless ``retry=False`` (for calls that are not
        safe to repeat, such as ``nextK``); then they raise ``ConnectionLostError``.
        """

        def send(client: Any) -> Any:
            return getattr(client, method)(*((self._secret, *args) if secret else args))

        return self._call(method, send, retry)

    def call_encoded(self, method: str, payload: bytes, *, retry: bool = True) -> Any:
        """Send ``method``'s whole call message, encoded by the caller (:mod:`.wire`), and return the reply as
        thriftpy2 reads it; retried and translated as :meth:`call`."""

        def send(client: Any) -> Any:
            send_frame(client, payload)
            return client._recv(method)

        return self._call(method, send, retry)

    def _call(self, method: str, send: Any, retry: bool) -> Any:
        def attempt() -> Any:
            try:
                return send(self._thread_client())  # opening and the secret check fail like calls
            except Exception as exc:
                if is_transient(exc):
                    self._drop_thread_client(exc)
                    raise
                translated = translate(exc)
                if translated is exc:  # already ours (the secret check's errors) or not a Thrift error
                    raise
                raise translated from exc

        policy = self.retry_policy() if retry else NO_RETRY
        return policy.run(attempt, self._drop_thread_client, f"{method} on {self.gateways}")

    def retry_policy(self) -> RetryPolicy:
        """The policy for transient errors now: the short first-contact one until a socket to a gateway opened."""
        return self.retry if self._reached else self.retry.first_contact()

    @property
    def shared_secret(self) -> str:
        return self._secret

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (every later call raises)."""
        return self._closed

    def close(self) -> None:
        """Close every socket this connection opened."""
        self._closed = True
        with self._lock:
            held, self._clients = list(self._clients), weakref.WeakSet()
        for h in held:
            h.close()
        self._local = threading.local()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- tables -------------------------------------------------------------------------------------

    def table_exists(self, table: str) -> bool:
        return bool(self.call("tableExists", table))

    def namespace_exists(self, namespace: str) -> bool:
        return bool(self.call("namespaceExists", namespace))

    def list_tables(self) -> set[str]:
        return set(self.call("listTables"))

    def table_id(self, table: str) -> str:
        """The id Accumulo gave ``table`` (its tablets' rows in ``accumulo.metadata`` start with it)."""
        ids = self.call("tableIdMap")
        if table not in ids:
            raise TableNotFoundError(f"table {table!r} does not exist")
        return str(ids[table])

    def create_table(self, table: str, *, versioning: bool = True, logical_time: bool = False,
                     exist_ok: bool = False) -> bool:
        """Create ``table`` (with the versioning iterator unless ``versioning=False``). Returns True if created."""
        time_type = proxy.TimeType.LOGICAL if logical_time else proxy.TimeType.MILLIS
        try:
            self.call("createTable", table, versioning, time_type)
            return True
        except TableExistsError:
            if exist_ok:
                return False
            raise

    def delete_table(self, table: str, *, missing_ok: bool = False) -> None:
        try:
            self.call("deleteTable", table)
        except TableNotFoundError:
            if not missing_ok:
                raise

    def closest_table(self, name: str) -> str | None:
        """The existing table whose name is closest to ``name`` (for "did you mean"), or None."""
        return next(iter(difflib.get_close_matches(name, sorted(self.list_tables()), n=1, cutoff=0.6)), None)

    def list_splits(self, table: str, max_splits: int = 1 << 20) -> list[bytes]:
        return sorted(self.call("listSplits", table, max_splits))

    def add_splits(self, table: str, splits: Iterable[BytesLike]) -> None:
        self.call("addSplits", table, {to_bytes(s, "split") for s in splits})

    def set_table_property(self, table: str, name: str, value: str) -> None:
        """Set one property of ``table``; a change refused because another changed the table's properties at the
        same moment is made again (:func:`_property_race`)."""
        _PROPERTY_RACE(self.call, "setTableProperty", table, name, value)

    def remove_table_property(self, table: str, name: str) -> None:
        self.call("removeTableProperty", table, name)

    def table_properties(self, table: str) -> dict[str, str]:
        return dict(self.call("getTableProperties", table))

    def attach_iterator(self, table: str, setting: IteratorSetting,
                        scopes: Sequence[str] = ("scan", "minc", "majc")) -> None:
        """Attach a server-side iterator to ``table`` for the given scopes (scan, minc, majc)."""
        scope_ids = {getattr(proxy.IteratorScope, s.upper()) for s in scopes}
        _PROPERTY_RACE(self.call, "attachIterator", table, setting.to_thrift(), scope_ids)

    def flush_table(self, table: str, start_row: BytesLike | None = None, end_row: BytesLike | None = None,
                    wait: bool = True) -> None:
        """Write the table's in-memory data to files (a minor compaction)."""
        self.call("flushTable", table, _opt_bytes(start_row), _opt_bytes(end_row), wait)

    def compact_table(self, table: str, start_row: BytesLike | None = None, end_row: BytesLike | None = None,
                      iterators: Sequence[IteratorSetting] = (), flush: bool = True, wait: bool = True) -> None:
        """Major-compact the table: rewrite all files of each tablet, dropping delete markers."""
        self.call("compactTable", table, _opt_bytes(start_row), _opt_bytes(end_row),
                  [i.to_thrift() for i in iterators], flush, wait, None, None)

    # --- writing and reading ------------------------------------------------------------------------

    def write(self, table: str, mutations: Iterable[Mutation]) -> None:
        """Send mutations in one call and wait until they are applied (small writes; use a BatchWriter
        for bulk). Raises ``InvalidMutationError``, sending nothing, for a mutation without updates or a
        write that does not fit in one frame of ``max_frame_bytes``."""
        mutations = list(mutations)
        size = check_sendable(mutations)
        if size + CALL_OVERHEAD_BYTES > self.max_frame_bytes:
            raise InvalidMutationError(
                f"write() sends one frame and these mutations need about {size} bytes, over "
                f"max_frame_bytes={self.max_frame_bytes}; use a BatchWriter, which splits them")
        self.call("updateAndFlush", table, cells_map(mutations))

    def batch_writer(self, table: str, **options: Any) -> BatchWriter:
        """A BatchWriter for ``table``; see :class:`BatchWriter` for options. Use it as a context manager."""
        return BatchWriter(self, table, **options)

    def scan(self, table: str, range: Range | None = None, columns: Sequence[Any] | None = None,
             authorizations: Iterable[BytesLike] | None = None,
             iterators: Sequence[IteratorSetting] = (), batch_size: int = 1000,
             isolated: bool = False) -> Iterator[Cell]:
        """Yield the cells of ``range`` in key order, fetched ``batch_size`` at a time. ``isolated``: each row
        whole at one version (only this project's gateway: :mod:`.whole_rows`, :mod:`.extensions`)."""
        return scan(self, table, range, columns, authorizations, iterators, batch_size, isolated)

    def scan_batches(self, table: str, range: Range | None = None, columns: Sequence[Any] | None = None,
                     authorizations: Iterable[BytesLike] | None = None,
                     iterators: Sequence[IteratorSetting] = (), batch_size: int = 1000,
                     isolated: bool = False) -> Iterator[pa.RecordBatch]:
        """As :meth:`scan`, but one Arrow batch per page of up to ``batch_size`` cells (columns row, cf,
        cq, cv, ts int64, value), decoded natively. Resumes after the last cell yielded when the
        connection or the scanner is lost."""
        return scan_batches(self, table, range, columns, authorizations, iterators, batch_size, isolated)

    def batch_scan(self, table: str, ranges: Sequence[Range], columns: Sequence[Any] | None = None,
                   authorizations: Iterable[BytesLike] | None = None,
                   iterators: Sequence[IteratorSetting] = (), threads: int = 4,
                   batch_size: int = 1000) -> Iterator[Cell]:
        """Yield the cells of several ranges, read in parallel on the server, in no particular order."""
        return batch_scan(self, table, ranges, columns, authorizations, iterators, threads, batch_size)

    def batch_read(self, table: str, ranges: Sequence[Range], columns: Sequence[Any] | None = None,
                   authorizations: Iterable[BytesLike] | None = None,
                   iterators: Sequence[IteratorSetting] = (), threads: int = 4,
                   batch_size: int = 1000) -> list[Cell]:
        """The cells of several ranges as :meth:`batch_scan` yields them, read whole: a read cut short by a lost
        connection (a gateway killed) is read again from the start, as a batch scan cannot resume."""
        return batch_read(self, table, ranges, columns, authorizations, iterators, threads, batch_size)

    def conditional_writer(self, table: str, **options: Any) -> ConditionalWriter:
        return ConditionalWriter(self, table, **options)

    def put_if_absent(self, table: str, row: BytesLike, cf: BytesLike, cq: BytesLike,
                      value: BytesLike) -> tuple[bool, bytes]:
        """Store ``value`` in the cell unless it holds one (a conditional put: of racing callers, one wins).
        Returns whether this call stored it, and what the cell holds then. An outcome lost with the connection
        is settled by reading the cell (holding ``value``: taken as this call's); an attempt that did not take is
        sent again, up to PUT_IF_ABSENT_ATTEMPTS times."""
        mutation = ConditionalMutation(row, [Condition(cf, cq)])
        mutation.put(cf, cq, value)
        mine = to_bytes(value, "value")
        for _ in range(PUT_IF_ABSENT_ATTEMPTS):
            with self.conditional_writer(table) as writer:
                status = writer.write(mutation)
            if status == "ACCEPTED":
                return True, mine
            for cell in self.scan(table, Range.exact_row(row), columns=[(cf, cq)], batch_size=2):
                return status == "UNKNOWN" and cell.value == mine, cell.value
            if status != "UNKNOWN":
                raise AccumuloError(f"conditional put of {to_bytes(row, 'row')!r} in {table!r}: {status}")
        raise ConnectionLostError(f"conditional put of {to_bytes(row, 'row')!r} in {table!r}: no outcome known "
                                  f"after {PUT_IF_ABSENT_ATTEMPTS} attempts")

    def bulk_import(self, table: str, *, bulk_id: str | None = None) -> BulkImport:
        """A bulk load of sorted RFiles into ``table`` that keeps each cell's timestamp (:mod:`.bulk`; only this
        project's gateway); ``bulk_id`` resumes one created before."""
        return BulkImport(self, table, bulk_id=bulk_id)


def _opt_bytes(value: BytesLike | None) -> bytes | None:
    return None if value is None else to_bytes(value, "row")

