"""Options as strings (a data source's, a config file's): how to reach a gateway (``GatewayOptions``) and the
typed parsers of option values, in one place.

Spark shows data source options in plans and UIs, so a secret is never an option: options name a secret
*file* (``<prefix>secret_file``) or an environment variable (``<prefix>secret_env``) that executors read
themselves. With neither, the client's defaults apply (ACCUMULO_GATEWAY_SECRET_FILE, then
ACCUMULO_GATEWAY_SECRET). A named source that is missing is an error naming it, never a fallback.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from connector.errors import ConnectorError

from .connection import Connection
from .errors import AccumuloSecurityError
from .gateways import parse_addresses
from .secret import SECRET_ENV, SECRET_FILE_ENV

_FORBIDDEN = ("secret", "shared_secret", "sharedsecret", "password")
_TLS_KEYS = ("tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_hostname")


class OptionError(ConnectorError, ValueError):
    """A data source option is missing or wrong; the message names it."""


def str_option(options: Mapping[str, str], name: str, default: str | None = None) -> str:
    value = options.get(name, default)
    if value is None or value == "":
        raise OptionError(f"option {name!r} is required")
    return str(value)


def int_option(options: Mapping[str, str], name: str, default: int | None = None, minimum: int = 0) -> int:
    raw = options.get(name)
    if raw is None or raw == "":
        if default is None:
            raise OptionError(f"option {name!r} is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name!r} must be >= {minimum}, got {value}")
    return value


def float_option(options: Mapping[str, str], name: str, default: float) -> float:
    """A positive number of seconds, say."""
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise OptionError(f"option {name!r} must be a number, got {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise OptionError(f"option {name!r} must be a number > 0, got {raw!r}")
    return value


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name!r} must be true or false, got {raw!r}")


def refuse_secrets(options: Mapping[str, str]) -> None:
    for key in options:
        last = key.lower().rsplit(".", 1)[-1]
        if last in _FORBIDDEN:
            raise OptionError(
                f"option {key!r} would put a secret in the Spark plan; use '<prefix>secret_file' (a file "
                f"readable on every executor) or '<prefix>secret_env' (an environment variable) instead"
            )


@dataclass(frozen=True)
class GatewayOptions:
    """How to reach one cluster's gateway. Holds the secret's *location*, never the secret.

    ``secret_file`` or ``secret_env`` names where the secret is; with neither, the client's defaults
    (ACCUMULO_GATEWAY_SECRET_FILE, then ACCUMULO_GATEWAY_SECRET). ``name`` (the cluster's name in the CLI's
    config) only makes messages clearer. ``tls_ca_file`` turns TLS on (``tls_cert_file``/``tls_key_file``:
    a client certificate; ``tls_server_hostname``: the name the certificate must carry, default ``host``);
    paths only, readable where the connection is made (every executor). ``server_wait``: the connection's
    bound on waiting for a tablet server (see :class:`~connector.accumulo.Connection`). ``hosts``: several
    gateways of the cluster (``"host:port"`` each; the option ``<prefix>hosts`` separates them with commas);
    then ``host`` and ``port`` are the first of them (use :meth:`pool` to make one)."""

    host: str
    port: int
    secret_file: str | None = None
    secret_env: str | None = None
    name: str = field(default="", compare=False)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_server_hostname: str | None = None
    #: seconds a scan or a writer's flush may wait for a tablet server (None: no bound); see ``Connection``
    server_wait: float | None = None
    #: several gateways of the cluster, ``host:port`` each (empty: the one at ``host``/``port``)
    hosts: tuple[str, ...] = ()

    @classmethod
    def pool(cls, hosts: Sequence[str] | str, default_port: int | None = None, **options: Any) -> GatewayOptions:
        """Options naming several gateways (``["gw1:42424", "gw2:42424"]``, or one comma-separated string);
        raises ``OptionError`` for an address that is not ``host:port``."""
        try:
            addresses = parse_addresses(hosts, default_port)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        return cls(addresses[0].host, addresses[0].port, hosts=tuple(str(a) for a in addresses), **options)

    @classmethod
    def parse(cls, options: Mapping[str, str], prefix: str) -> GatewayOptions:
        refuse_secrets(options)
        hosts = options.get(f"{prefix}hosts") or ""
        if hosts.strip() and options.get(f"{prefix}host"):
            raise OptionError(f"options {prefix}host and {prefix}hosts: give one gateway or several, not both")
        several = bool(hosts.strip())
        port = int_option(options, f"{prefix}port", minimum=1) if not several or options.get(f"{prefix}port") else None
        rest: dict[str, Any] = dict(
            secret_file=options.get(f"{prefix}secret_file") or None,
            secret_env=options.get(f"{prefix}secret_env") or None,
            name=options.get(f"{prefix}name") or "",
            **{key: options.get(f"{prefix}{key}") or None for key in _TLS_KEYS},
            server_wait=(float_option(options, f"{prefix}server_wait", 1.0)
                         if options.get(f"{prefix}server_wait") else None),
        )
        if several:
            return cls.pool(hosts, port, **rest)
        assert port is not None
        return cls(host=str_option(options, f"{prefix}host", "127.0.0.1"), port=port, **rest)

    def to_options(self, prefix: str) -> dict[str, str]:
        out = ({f"{prefix}hosts": ",".join(self.hosts)} if self.hosts
               else {f"{prefix}host": self.host, f"{prefix}port": str(self.port)})
        for key, value in (("secret_file", self.secret_file), ("secret_env", self.secret_env), ("name", self.name),
                           *((k, getattr(self, k)) for k in _TLS_KEYS)):
            if value:
                out[f"{prefix}{key}"] = value
        if self.server_wait is not None:
            out[f"{prefix}server_wait"] = repr(float(self.server_wait))
        return out

    def describe(self) -> str:
        """How messages name this cluster: by its name when it has one, else by its gateway address."""
        if self.name:
            return f"cluster {self.name!r}"
        return f"gateways {', '.join(self.hosts)}" if self.hosts else f"gateway {self.host}:{self.port}"

    def secret(self) -> str | None:
        """The secret when it comes from ``secret_env`` (None: the connection reads ``secret_file`` or the
        defaults itself). Raises ``OptionError`` naming the missing source; never falls back to another one."""
        if self.secret_file:
            return None
        if self.secret_env:
            value = os.environ.get(self.secret_env)
            if not value:
                raise OptionError(f"{self.describe()}: its secret_env names the environment variable "
                                  f"{self.secret_env}, which is not set")
            return value
        if not (os.environ.get(SECRET_FILE_ENV) or os.environ.get(SECRET_ENV)):
            raise OptionError(f"{self.describe()} names no secret: give it a secret_file or secret_env, "
                              f"or set {SECRET_FILE_ENV} or {SECRET_ENV}")
        return None

    def connect(self) -> Connection:
        """A new connection (the caller closes it)."""
        secret = self.secret()
        try:
            where: dict[str, Any] = {"hosts": self.hosts} if self.hosts else {"host": self.host, "port": self.port}
            return Connection(shared_secret=secret, **where, secret_file=self.secret_file,
                              tls_ca_file=self.tls_ca_file, tls_cert_file=self.tls_cert_file,
                              tls_key_file=self.tls_key_file, tls_server_hostname=self.tls_server_hostname,
                              server_wait=self.server_wait, name=self.name)
        except (AccumuloSecurityError, ValueError) as exc:  # an unreadable or empty secret file, bad TLS options
            raise OptionError(f"{self.describe()}: {exc}") from None

    def shared(self) -> Connection:
        """A connection cached for this Python process: Spark reuses its Python workers across tasks."""
        with _cache_lock:
            conn = _connections.get(self)
            if conn is None:
                conn = _connections[self] = self.connect()
            return conn


_connections: dict[GatewayOptions, Connection] = {}
_cache_lock = threading.Lock()


