"""Named clusters: a TOML file mapping names to gateway addresses and the locations of their secrets.

Default path ``$XDG_CONFIG_HOME/accumulo-export/clusters.toml`` (``~/.config`` when XDG_CONFIG_HOME is unset or
empty); the ACCUMULO_EXPORT_CONFIG environment variable overrides it. The embedded harness writes one for the
clusters it starts. Example::

    [clusters.A]
    host = "127.0.0.1"
    port = 42424
    secret_file = "/etc/accumulo-export/a.secret"   # or: secret_env = "A_GATEWAY_SECRET"
    tls_ca_file = "/etc/accumulo-export/ca.pem"      # optional: TLS, the CA that signed the gateway's cert
    # tls_cert_file, tls_key_file: a client certificate (PEM); tls_server_hostname: the certificate's name
    # server_wait = 300                              # seconds a read or write may wait for a tablet server

    [clusters.B]
    hosts = ["gw1.example:42424", "gw2.example:42424"]  # several gateways: spread over, failed over
    secret_env = "B_GATEWAY_SECRET"

The file is read strictly: a table other than ``[clusters.<name>]`` or a key that is not one of
:data:`CLUSTER_KEYS` is refused, naming the file, the cluster, the key and the closest known key (a misspelt
``tls_ca_file`` must never mean plain text, a misspelt ``secret_file`` never another secret). A cluster that
names neither ``secret_file`` nor ``secret_env`` uses ACCUMULO_GATEWAY_SECRET_FILE or ACCUMULO_GATEWAY_SECRET;
one that names a source that is missing is an error, never a fall-back to another secret.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from pathlib import Path
from typing import Any

from connector.accumulo.options import GatewayOptions, refuse_secrets
from connector.settings import Group, OptionError, Surface, check_environment, refuse_unknown

CONFIG_ENV = "ACCUMULO_EXPORT_CONFIG"
#: the file's place under the user's configuration folder
CONFIG_RELATIVE = Path("accumulo-export/clusters.toml")
#: the keys of a ``[clusters.<name>]`` table (the table's name is the cluster's name)
CLUSTER_KEYS = GatewayOptions.option_names() - {"name"}
#: the surface the property tests walk: every key a cluster may have
SURFACE = Surface("clusters.toml", "clusters.toml [clusters.<name>]",
                  (Group(GatewayOptions, exclude=frozenset({"name"})),), what="key")
_TLS_KEYS = tuple(sorted(k for k in CLUSTER_KEYS if k.startswith("tls_")))


class ConfigError(OptionError):
    """The cluster file is missing, unreadable or wrong; the message names the file, the cluster and the key."""


def default_path() -> Path:
    """The cluster file's place when ACCUMULO_EXPORT_CONFIG is not set: under XDG_CONFIG_HOME (the XDG base
    directory rule: used only when set to an absolute path), else under ``~/.config``."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    folder = Path(base) if os.path.isabs(base) else Path("~/.config").expanduser()
    return folder / CONFIG_RELATIVE


def config_path() -> Path:
    check_environment()
    given = os.environ.get(CONFIG_ENV)
    return Path(given).expanduser() if given else default_path()


def load_clusters(path: Path | None = None) -> dict[str, GatewayOptions]:
    """Every cluster the file defines (see the module's description)."""
    path = path or config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no cluster config at {path} (set {CONFIG_ENV} or create it)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        refuse_unknown(data, {"clusters"}, str(path), "table")
        clusters = data.get("clusters") or {}
        if not isinstance(clusters, dict):
            raise ConfigError(f"{path}: 'clusters' must be tables [clusters.<name>]")
        return {name: _cluster(path, name, entry) for name, entry in clusters.items()}
    except ConfigError:
        raise
    except OptionError as exc:
        raise ConfigError(str(exc)) from None


def _cluster(path: Path, name: str, entry: Any) -> GatewayOptions:
    where = f"{path}: cluster {name!r}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a table ([clusters.{name}])")
    refuse_secrets(entry, f"{where}: key")
    refuse_unknown(entry, CLUSTER_KEYS, where, "key")
    options = dict(entry)
    if "hosts" in options:
        hosts = options["hosts"]
        if "host" in options:
            raise ConfigError(f"{where} has both host and hosts; give one gateway or several")
        if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
            raise ConfigError(f'{where}: hosts must be a list of "host:port" strings')
        options["hosts"] = ",".join(hosts)
    elif "port" not in options:
        raise ConfigError(f"{where} has no port (give port, or hosts = [\"host:port\", ...])")
    for key, value in options.items():
        if isinstance(value, bool | list | dict):
            kind = "number" if key in ("port", "server_wait") else "string"
            raise ConfigError(f"{where}: key {key!r} must be a {kind}, got {value!r}")
    try:
        return dataclasses.replace(GatewayOptions.parse(options, "", f"{where}: key"), name=name)
    except OptionError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith(str(path)) else f"{where}: {message}") from None


def cluster(name: str, path: Path | None = None) -> GatewayOptions:
    """The cluster of that name in the cluster file (``path``, else ACCUMULO_EXPORT_CONFIG's, else the
    default path)."""
    known = load_clusters(path)
    if name not in known:
        raise ConfigError(f"unknown cluster {name!r}; {path or config_path()} defines {sorted(known) or 'none'}")
    return known[name]


def write_clusters(path: Path, clusters: dict[str, GatewayOptions]) -> None:
    """Write a config file (secret locations only) with mode 0600. Every name and value is quoted, so the file
    parses back to what was given whatever characters a path or a cluster's name holds."""
    lines = []
    for name, g in clusters.items():
        lines.append(f"[clusters.{_toml_string(name)}]")
        if g.hosts:
            lines.append("hosts = [" + ", ".join(_toml_string(str(h)) for h in g.hosts) + "]")
        else:
            lines += [f"host = {_toml_string(g.host)}", f"port = {int(g.port)}"]
        if g.secret_file:
            lines.append(f"secret_file = {_toml_string(str(g.secret_file))}")
        elif g.secret_env:
            lines.append(f"secret_env = {_toml_string(g.secret_env)}")
        lines += [f"{k} = {_toml_string(str(getattr(g, k)))}" for k in _TLS_KEYS if getattr(g, k)]
        if g.server_wait is not None:
            lines.append(f"server_wait = {float(g.server_wait)!r}")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def _toml_string(text: str) -> str:
    # a JSON string is a TOML basic string (both escape '"', '\\' and control characters alike) once characters
    # beyond U+FFFF stay whole (TOML refuses JSON's surrogate pairs) and DEL, which TOML wants escaped, is
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
