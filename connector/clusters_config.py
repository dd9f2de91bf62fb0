"""Named clusters for the CLI: a TOML file mapping names to gateway addresses and secret locations.

Default path ``~/.config/accumulo-export/clusters.toml``; the ACCUMULO_EXPORT_CONFIG environment variable
overrides it. The embedded harness writes one for the clusters it starts. Example::

    [clusters.A]
    host = "127.0.0.1"
    port = 42424
    secret_file = "/etc/accumulo-export/a.secret"   # or: secret_env = "A_GATEWAY_SECRET"
    tls_ca_file = "/etc/accumulo-export/ca.pem"      # optional: TLS, the CA that signed the gateway's cert
    # tls_cert_file, tls_key_file: a client certificate (PEM); tls_server_hostname: the certificate's name

    [clusters.B]
    hosts = ["gw1.example:42424", "gw2.example:42424"]  # several gateways: spread over, failed over
    secret_env = "B_GATEWAY_SECRET"

A cluster that names neither uses ACCUMULO_GATEWAY_SECRET_FILE or ACCUMULO_GATEWAY_SECRET; one that names a
source that is missing is an error, never a fall-back to another secret.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from connector.accumulo.options import GatewayOptions, OptionError
from connector.errors import ConnectorError

CONFIG_ENV = "ACCUMULO_EXPORT_CONFIG"
TLS_KEYS = ("tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_hostname")
DEFAULT_PATH = Path("~/.config/accumulo-export/clusters.toml")


class ConfigError(ConnectorError, ValueError):
    pass


def config_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV) or DEFAULT_PATH).expanduser()


def load_clusters(path: Path | None = None) -> dict[str, GatewayOptions]:
    path = path or config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no cluster config at {path} (set {CONFIG_ENV} or create it)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    out = {}
    for name, entry in (data.get("clusters") or {}).items():
        if "secret" in entry or "shared_secret" in entry:
            raise ConfigError(f"{path}: cluster {name!r} holds a secret; use secret_file or secret_env")
        rest = dict(secret_file=entry.get("secret_file"), secret_env=entry.get("secret_env"), name=name,
                    **{k: entry.get(k) for k in TLS_KEYS})
        if "hosts" in entry:
            out[name] = _pool(path, name, entry, rest)
            continue
        if "port" not in entry:
            raise ConfigError(f"{path}: cluster {name!r} has no port")
        out[name] = GatewayOptions(host=str(entry.get("host", "127.0.0.1")), port=int(entry["port"]), **rest)
    return out


def _pool(path: Path, name: str, entry: dict[str, Any], rest: dict[str, Any]) -> GatewayOptions:
    """A cluster entry naming several gateways: ``hosts = ["gw1:42424", "gw2:42424"]`` (``port``: the port of
    those without one)."""
    hosts = entry["hosts"]
    if "host" in entry:
        raise ConfigError(f"{path}: cluster {name!r} has both host and hosts; give one gateway or several")
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise ConfigError(f'{path}: cluster {name!r}: hosts must be a list of "host:port" strings')
    try:
        return GatewayOptions.pool(hosts, int(entry["port"]) if "port" in entry else None, **rest)
    except OptionError as exc:
        raise ConfigError(f"{path}: cluster {name!r}: {exc}") from None


def cluster(name: str, path: Path | None = None) -> GatewayOptions:
    known = load_clusters(path)
    if name not in known:
        raise ConfigError(f"unknown cluster {name!r}; {config_path()} defines {sorted(known) or 'none'}")
    return known[name]


def write_clusters(path: Path, clusters: dict[str, GatewayOptions]) -> None:
    """Write a config file (secret locations only) with mode 0600."""
    lines = []
    for name, g in clusters.items():
        lines.append(f"[clusters.{name}]")
        if g.hosts:
            lines.append("hosts = [" + ", ".join(f'"{h}"' for h in g.hosts) + "]")
        else:
            lines += [f'host = "{g.host}"', f"port = {g.port}"]
        if g.secret_file:
            lines.append(f'secret_file = "{g.secret_file}"')
        elif g.secret_env:
            lines.append(f'secret_env = "{g.secret_env}"')
        lines += [f'{k} = "{getattr(g, k)}"' for k in TLS_KEYS if getattr(g, k)]
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines))
