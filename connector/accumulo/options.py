"""How to reach a cluster's gateway (``GatewayOptions``): settings given as data source options (under a
prefix such as ``dest.``) or as the keys of a cluster in ``clusters.toml``, declared once
(:mod:`connector.settings`).

Spark shows data source options in plans and UIs, so a secret is never an option: options name a secret
*file* (``<prefix>secret_file``) or an environment variable (``<prefix>secret_env``) that executors read
themselves. With neither, the client's defaults apply (ACCUMULO_GATEWAY_SECRET_FILE, then
ACCUMULO_GATEWAY_SECRET). A named source that is missing is an error naming it, never a fallback.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

from connector.settings import OptionError, Settings, port, seconds, setting

from .connection import Connection
from .errors import AccumuloSecurityError
from .gateways import parse_addresses
from .secret import SECRET_ENV, SECRET_FILE_ENV

__all__ = ["GatewayOptions", "OptionError", "refuse_secrets"]

_FORBIDDEN = ("secret", "shared_secret", "sharedsecret", "password")


def refuse_secrets(options: Mapping[str, Any], where: str = "option") -> None:
    """A secret is never an option (Spark shows options in plans and UIs) nor a config-file value."""
    for key in options:
        last = key.lower().rsplit(".", 1)[-1]
        if last in _FORBIDDEN:
            raise OptionError(
                f"{where} {key!r} would put a secret in plain sight; name where it is instead: "
                f"'<prefix>secret_file' (a file readable on every executor) or '<prefix>secret_env' (an "
                "environment variable)"
            )


def _hosts(raw: str) -> tuple[str, ...]:
    items = tuple(h.strip() for h in raw.split(",") if h.strip())
    if not items:
        raise ValueError("must name at least one gateway as host:port")
    return items


@dataclass(frozen=True)
class GatewayOptions(Settings):
    """How to reach one cluster's gateway. Holds the secret's *location*, never the secret.

    ``secret_file`` or ``secret_env`` names where the secret is; with neither, the client's defaults
    (ACCUMULO_GATEWAY_SECRET_FILE, then ACCUMULO_GATEWAY_SECRET). ``name`` (the cluster's name in the CLI's
    config) only makes messages clearer. ``tls_ca_file`` turns TLS on (``tls_cert_file``/``tls_key_file``:
    a client certificate; ``tls_server_hostname``: the name the certificate must carry, default ``host``);
    paths only, readable where the connection is made (every executor). ``server_wait``: the connection's
    bound on waiting for a tablet server (see :class:`~connector.accumulo.Connection`). ``hosts``: several
    gateways of the cluster (``"host:port"`` each; the option ``<prefix>hosts`` separates them with commas);
    then ``host`` and ``port`` are the first of them (use :meth:`pool` to make one)."""

    host: str = setting(MISSING, "the gateway's host", flag=None, shown_default="127.0.0.1")
    port: int = setting(MISSING, "the gateway's port", parse=port, flag=None, shown_default="required, unless hosts")
    secret_file: str | None = setting(None, "a file holding the gateway's shared secret, readable where the "
                                            "connection is made (every executor)", flag=None)
    secret_env: str | None = setting(None, "an environment variable holding the shared secret", flag=None)
    name: str = setting("", "the cluster's name, for messages", flag=None, compare=False)
    tls_ca_file: str | None = setting(None, "TLS: the CA certificate (PEM) that signed the gateway's; turns TLS "
                                            "on", flag=None)
    tls_cert_file: str | None = setting(None, "TLS: a client certificate (PEM), for gateways that require one",
                                        flag=None)
    tls_key_file: str | None = setting(None, "TLS: the client certificate's key (PEM)", flag=None)
    tls_server_hostname: str | None = setting(None, "TLS: the name the gateway's certificate must carry "
                                                    "(default: the host)", flag=None)
    #: seconds a scan or a writer's flush may wait for a tablet server (None: no bound); see ``Connection``
    server_wait: float | None = setting(None, "seconds a scan or flush may wait for a tablet server (a crashed "
                                              "one restarting) before it fails", parse=seconds,
                                        flag="--server-wait", metavar="SECONDS")
    #: several gateways of the cluster, ``host:port`` each (empty: the one at ``host``/``port``)
    hosts: tuple[str, ...] = setting((), "several gateways of the cluster, host:port each (comma-separated as "
                                         "an option, a list in clusters.toml): spread over, failed over",
                                     parse=_hosts, flag=None)

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
    def parse(cls, options: Mapping[str, Any], prefix: str, where: str = "option") -> GatewayOptions:
        """The gateway the options under ``prefix`` name (``<prefix>host``, ``<prefix>port`` or
        ``<prefix>hosts``, the secret's location, TLS paths, ``server_wait``). Unknown names are the
        surface's to refuse (:class:`connector.settings.Surface`); a secret given as a value is refused here."""
        refuse_secrets({k: v for k, v in options.items() if k.startswith(prefix)}, where)
        values = cls.values_from_options(options, prefix, where)
        hosts = values.pop("hosts", ())
        if hosts and "host" in values:
            raise OptionError(f"{where}s {prefix}host and {prefix}hosts: give one gateway or several, not both")
        if hosts:
            return cls.pool(hosts, values.pop("port", None), **values)
        if "port" not in values:
            raise OptionError(f"{where} {prefix + 'port'!r} is required")
        values.setdefault("host", "127.0.0.1")
        return cls(**values)

    def to_options(self, prefix: str = "", tags: Any = None) -> dict[str, str]:
        """These options as text under ``prefix`` (what :meth:`parse` reads back)."""
        out = super().to_options(prefix, tags)
        if self.hosts:  # host and port are the first of the hosts: not options of their own then
            out.pop(prefix + "host", None)
            out.pop(prefix + "port", None)
        else:
            out.pop(prefix + "hosts", None)
        if not self.name:
            out.pop(prefix + "name", None)
        return out

    @property
    def label(self) -> str:
        """How stored records name this cluster (a bootstrap's state row, a destination's metrics): its name, else
        its gateway address."""
        return self.name or f"{self.host}:{self.port}"

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


