"""Several gateways for one cluster: which one a new socket goes to, and failing over when one is unreachable.

A cluster may be served by a pool of gateways (``hosts = ["gw1:42424", "gw2:42424"]``): one beside each
Spark worker, or several behind a TCP load balancer (then the client names only the balancer). Every new
socket (a thread's, a writer's) takes the next gateway in turn, host-local ones first, so the threads and
Spark tasks of a process spread over the gateways of their own machine, or over all when none is local. A
gateway that refuses a connection, or whose socket died, is passed over for ``DOWN_SECONDS``: new sockets go
to the others, and come back to it afterwards. Nothing is replayed here: what a lost socket carried is
replayed by the caller exactly as after a reconnect to the same gateway (writers resend what was not
acknowledged, scanners resume after their last cell, conditional writes re-read what is unknown), since a
restarted gateway knows as little of the old socket's writers and scanners as another one does.
"""

from __future__ import annotations

import functools
import itertools
import random
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

T = TypeVar("T")

#: how long a gateway that failed is passed over by new sockets (while others answer)
DOWN_SECONDS = 10.0


class Address(NamedTuple):
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str, default_port: int | None = None) -> Address:
    """``host:port``, ``[ipv6]:port``, or ``host`` alone when ``default_port`` is given. Raises ValueError
    naming the address for anything else."""
    raw = str(text).strip()
    host, port_text = raw, ""
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0 or (raw[end + 1:] and not raw[end + 1:].startswith(":")):
            raise ValueError(f"gateway address {text!r}: expected [ipv6]:port")
        host, port_text = raw[1:end], raw[end + 2:]
    elif raw.count(":") == 1:
        host, port_text = raw.split(":")
    elif ":" in raw:
        raise ValueError(f"gateway address {text!r}: write an IPv6 address as [address]:port")
    if not host or any(c.isspace() for c in host):
        raise ValueError(f"gateway address {text!r}: expected host:port")
    if not port_text:
        if default_port is None:
            raise ValueError(f"gateway address {text!r} has no port (host:port)")
        return Address(host, int(default_port))
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"gateway address {text!r}: the port {port_text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"gateway address {text!r}: the port must be 1-65535")
    return Address(host, port)


def parse_addresses(texts: Sequence[str] | str, default_port: int | None = None) -> tuple[Address, ...]:
    """Several addresses (a sequence, or one comma-separated string); at least one, none twice."""
    items = [t for t in (texts.split(",") if isinstance(texts, str) else texts) if str(t).strip()]
    if not items:
        raise ValueError("no gateway address given")
    out = tuple(parse_address(t, default_port) for t in items)
    twice = sorted({str(a) for a in out if out.count(a) > 1})
    if twice:
        raise ValueError(f"gateway address {twice[0]} is given twice")
    return out


@functools.lru_cache(maxsize=1)
def _own_addresses() -> frozenset[str]:
    names = {socket.gethostname(), socket.getfqdn(), "localhost"}
    found: set[str] = set()
    for name in names:
        try:
            found.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
        except OSError:
            continue
    return frozenset(found)


def is_local(host: str) -> bool:
    """True when ``host`` is this machine: a loopback address, or a name or address of this host."""
    try:
        resolved = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return any(a.startswith("127.") or a == "::1" or a in _own_addresses() for a in resolved)


class Gateways:
    """The gateways of one cluster, in the order new sockets try them. Thread-safe."""

    def __init__(self, addresses: Sequence[Address], down_seconds: float = DOWN_SECONDS) -> None:
        if not addresses:
            raise ValueError("no gateway address given")
        self.addresses = tuple(addresses)
        self.down_seconds = down_seconds
        self._down_until: dict[Address, float] = {}
        self._lock = threading.Lock()
        self._local: tuple[Address, ...] | None = None
        # a random start per process: Spark workers on one host do not all begin with the same gateway
        self._turn = itertools.count(random.randrange(len(self.addresses)))

    def __str__(self) -> str:
        return ", ".join(str(a) for a in self.addresses)

    def order(self) -> list[Address]:
        """The order for the next socket: host-local gateways first, each group starting at the next in turn;
        gateways that failed recently last."""
        if len(self.addresses) == 1:
            return list(self.addresses)
        if self._local is None:
            self._local = tuple(a for a in self.addresses if is_local(a.host))
        turn = next(self._turn)
        local = [a for a in self.addresses if a in self._local]
        remote = [a for a in self.addresses if a not in self._local]
        ordered = [*_rotated(local, turn), *_rotated(remote, turn)]
        now = time.monotonic()
        with self._lock:
            up = [a for a in ordered if self._down_until.get(a, 0.0) <= now]
        return up + [a for a in ordered if a not in up]

    def mark_down(self, address: Address) -> None:
        """Pass ``address`` over for ``down_seconds`` (it refused a connection or its socket died)."""
        if len(self.addresses) > 1:
            with self._lock:
                self._down_until[address] = time.monotonic() + self.down_seconds

    def open(self, connect: Callable[[Address], T], transient: Callable[[BaseException], bool]) -> tuple[T, Address]:
        """``connect`` to the gateways in :meth:`order` until one answers; a transient failure marks that one
        down and tries the next. When every one fails, the last error is raised (the caller's retry policy
        decides whether to try again)."""
        last: BaseException | None = None
        for address in self.order():
            try:
                return connect(address), address
            except Exception as exc:
                if not transient(exc):
                    raise
                self.mark_down(address)
                last = exc
        assert last is not None
        raise last


def _rotated(items: list[Address], turn: int) -> list[Address]:
    if not items:
        return items
    k = turn % len(items)
    return items[k:] + items[:k]
