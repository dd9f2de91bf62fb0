"""What writers, scanners and conditional writers need from a ``Connection``: the seam between the
connection (sockets per thread, the secret, retries) and the objects it hands out.

``Connection`` satisfies :class:`Session`; :mod:`.writer`, :mod:`.scanner` and :mod:`.conditional` name only
this protocol, so they never import :mod:`.connection`, which imports them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from .errors import TimedOutError
from .transport import RetryPolicy


class Session(Protocol):
    """A connection to one gateway, as the objects it hands out use it."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def retry(self) -> RetryPolicy: ...

    @property
    def server_wait(self) -> float | None: ...

    @property
    def server_wait_ms(self) -> int: ...

    @property
    def max_frame_bytes(self) -> int: ...

    @property
    def shared_secret(self) -> str: ...

    def address(self) -> str:
        """The gateway this thread's socket talks to, for messages."""

    def retry_policy(self) -> RetryPolicy:
        """The policy for transient errors now (short until a gateway has answered)."""

    def call(self, method: str, *args: Any, secret: bool = True, retry: bool = True) -> Any:
        """A gateway method called on this thread's socket, with retries (see ``Connection.call``)."""

    def call_encoded(self, method: str, payload: bytes, *, retry: bool = True) -> Any:
        """A call whose message the caller encoded, with retries (see ``Connection.call_encoded``)."""

    def new_client(self) -> Any:
        """A dedicated Thrift client (a writer's own socket)."""

    def raw_client(self, what: str) -> AbstractContextManager[Any]:
        """This thread's Thrift client for a call its caller encodes or decodes itself (see
        ``Connection.raw_client``)."""

    def timed_out(self, table: str, what: str, detail: str = "") -> TimedOutError:
        """The error for a scan or write on ``table`` that found no tablet server within ``server_wait``."""
