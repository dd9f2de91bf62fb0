"""Opening Thrift clients to the gateway, and the retry policy for transient transport errors."""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import tenacity
from thriftpy2.protocol import TCompactProtocolFactory
from thriftpy2.thrift import TClient
from thriftpy2.transport import TFramedTransportFactory, TSocket, TTransportException

from ._idl import proxy
from .errors import ConnectionLostError
from .gateways import Address
from .tls import TlsOptions

log = logging.getLogger(__name__)
T = TypeVar("T")

_TRANSIENT_ERRNOS = {errno.ECONNREFUSED, errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED, errno.ETIMEDOUT,
                     errno.EHOSTUNREACH, errno.ENETUNREACH}


def is_transient(exc: BaseException) -> bool:
    """True for errors that a fresh connection may cure: refused, reset, closed, timed out."""
    if isinstance(exc, TTransportException | socket.timeout | TimeoutError | EOFError | BrokenPipeError):
        return True
    if isinstance(exc, ConnectionError):
        return not isinstance(exc, ConnectionLostError)
    return isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try again after a transient transport error: bounded attempts and time, with backoff.

    Once a connection has reached a gateway, a call is retried until ``attempts`` or ``max_seconds`` run out,
    whichever comes first: a gateway restarted in the middle of a drain is waited for. Before that, at most
    ``first_contact_attempts`` (about a second): a wrong address or a gateway that is not up fails quickly."""

    attempts: int = 40
    max_seconds: float = 60.0
    initial_wait: float = 0.1
    max_wait: float = 5.0
    first_contact_attempts: int = 4

    def first_contact(self) -> RetryPolicy:
        """This policy for a connection that has not reached a gateway yet."""
        return replace(self, attempts=min(self.attempts, self.first_contact_attempts))

    def wait(self) -> tenacity.wait.wait_base:
        """How long to wait before a retry: exponential from ``initial_wait`` up to ``max_wait``, with full
        jitter, so that many clients cut off together (a gateway restart) do not come back in lockstep."""
        return tenacity.wait_random_exponential(multiplier=self.initial_wait, max=self.max_wait)

    def pause(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failures in a row, by :meth:`wait`: for loops that cannot be a
        tenacity call (a scan that resumes between the pages it yields)."""
        state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
        state.attempt_number = max(1, failures)
        return self.wait()(state)

    def starting_over(self, error: type[BaseException] | tuple[type[BaseException], ...]) -> tenacity.Retrying:
        """A tenacity loop within this policy's bounds that tries again after ``error``: for work that starts
        over from scratch when a connection was lost in its middle (a read rebuilt, a question asked again)."""
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts) | tenacity.stop_after_delay(self.max_seconds),
            wait=self.wait(),
            retry=tenacity.retry_if_exception_type(error),
            reraise=True,
        )

    def run(self, call: Callable[[], T], on_retry: Callable[[BaseException], None], what: str) -> T:
        """Run ``call``; on a transient error call ``on_retry`` (reconnect) and try again, within bounds (the time
        bound counts from the first attempt)."""
        deadline = time.monotonic() + self.max_seconds
        try:
            return call()  # most calls succeed at once: no retry loop is built for them (13 us a call)
        except Exception as exc:
            if not is_transient(exc):
                raise
            failed: list[BaseException] = [exc]

        def attempt() -> T:
            if failed:  # the loop's first attempt is the one that just failed
                raise failed.pop()
            return call()

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.info("%s: transient error (%s), retry %d of %d", what, exc, state.attempt_number,
                        self.attempts - 1)
            if exc is not None:
                on_retry(exc)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts) | _StopAt(deadline),
            wait=self.wait(),
            retry=tenacity.retry_if_exception(is_transient),
            before_sleep=before_sleep,
            reraise=False,
        )
        try:
            return retrying(attempt)
        except tenacity.RetryError as exc:
            last = exc.last_attempt.exception()
            raise ConnectionLostError(
                f"{what}: gateway unreachable after {exc.last_attempt.attempt_number} attempts: {last}"
            ) from last


NO_RETRY = RetryPolicy(attempts=1)


class _StopAt(tenacity.stop.stop_base):
    """Stop once the monotonic clock reaches ``deadline`` (a time bound counted from before the loop began)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return time.monotonic() >= self.deadline


class TlsSocket(TSocket):
    """A thriftpy2 socket that connects, then does the TLS handshake itself, so a certificate that does not
    verify surfaces as ``TlsError`` (thriftpy2's own TSSLSocket reports every failure as "could not
    connect", and its ``validate=True`` does not check the host name)."""

    def __init__(self, host: str, port: int, tls: TlsOptions, socket_timeout: int, connect_timeout: int) -> None:
        super().__init__(host, port, socket_timeout=socket_timeout, connect_timeout=connect_timeout)
        self.tls = tls

    def open(self) -> None:
        super().open()  # TCP: failures are TTransportException (transient)
        assert self.sock is not None
        self.sock = self.tls.wrap(self.sock, self.host, self.port)


def open_client(host: str, port: int, timeout: float, tls: TlsOptions | None = None) -> GatewayClient:
    """A new Thrift client on its own socket (framed transport, compact protocol; inside TLS if ``tls``)."""
    socket_timeout, connect_timeout = int(timeout * 1000), int(min(timeout, 10.0) * 1000)
    sock = (TlsSocket(host, port, tls, socket_timeout, connect_timeout) if tls
            else TSocket(host, port, socket_timeout=socket_timeout, connect_timeout=connect_timeout))
    transport = TFramedTransportFactory().get_transport(sock)
    transport.open()
    return GatewayClient(proxy.AccumuloProxy, TCompactProtocolFactory().get_protocol(transport), sock)


class GatewayClient(TClient):
    """A thriftpy2 client that also keeps its socket, for the raw ``nextK`` call (:mod:`.wire.next_k`)."""

    def __init__(self, service: Any, protocol: Any, raw_socket: TSocket) -> None:
        super().__init__(service, protocol)
        self.raw_socket = raw_socket


def send_frame(client: Any, payload: bytes) -> None:
    """Send an already-encoded message (a oneway call) as one frame on the client's transport."""
    trans = client._oprot.trans
    trans.write(payload)
    trans.flush()


def close_client(client: Any) -> None:
    # closing a broken socket must not mask the real error
    with contextlib.suppress(Exception):
        client.close()


class ThreadClient:
    """One thread's client. It lives in that thread's ``threading.local`` storage only, so when the thread
    ends (a pool's worker, a prefetch thread) the holder goes away and closes its socket: threads that come
    and go do not leave sockets behind."""

    __slots__ = ("client", "address", "__weakref__")

    def __init__(self, client: Any, address: Address) -> None:
        self.client = client
        self.address = address

    def close(self) -> None:
        close_client(self.client)

    def __del__(self) -> None:
        self.close()
