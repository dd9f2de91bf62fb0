"""TLS to the gateway: what upstream's accumulo-proxy 2.x speaks with ``thriftServerType=ssl`` (TLS, then
framed transport and compact protocol inside it).

The client verifies the gateway's certificate against ``ca_file`` and checks that it names the host
(``server_hostname``, default: the host connected to). A client certificate (``cert_file`` and
``key_file``, PEM) is sent when given, for gateways that require one. Only paths are held here, never key
material.
"""

from __future__ import annotations

import functools
import os
import socket
import ssl
from dataclasses import dataclass

from .errors import TlsError

PathArg = str | os.PathLike[str] | None


@dataclass(frozen=True)
class TlsOptions:
    """Where the TLS material is (paths only); see the module docstring."""

    ca_file: str
    cert_file: str | None = None
    key_file: str | None = None
    server_hostname: str | None = None

    def __post_init__(self) -> None:
        if not self.ca_file:
            raise ValueError("TLS needs tls_ca_file: the CA that signed the gateway's certificate")
        if self.key_file and not self.cert_file:
            raise ValueError("tls_key_file needs tls_cert_file")

    @classmethod
    def from_paths(cls, ca_file: PathArg, cert_file: PathArg = None, key_file: PathArg = None,
                   server_hostname: str | None = None) -> TlsOptions | None:
        """None when no TLS setting is given; an error when a certificate is given without a CA file."""
        if not ca_file:
            if cert_file or key_file or server_hostname:
                raise ValueError("tls_cert_file, tls_key_file and tls_server_hostname need tls_ca_file")
            return None
        return cls(os.fspath(ca_file), os.fspath(cert_file) if cert_file else None,
                   os.fspath(key_file) if key_file else None, server_hostname or None)

    def context(self) -> ssl.SSLContext:
        """The client context (built once per options): CA verification and hostname check on, TLS >= 1.2."""
        return _context(self)

    def wrap(self, sock: socket.socket, host: str, port: int) -> ssl.SSLSocket:
        """Do the handshake on a connected socket. A certificate that does not verify raises ``TlsError``
        (no retry can cure it); other handshake failures raise ``ConnectionError`` (transient: the gateway
        may be restarting) whose message asks whether the gateway has TLS on."""
        name = self.server_hostname or host
        try:
            return self.context().wrap_socket(sock, server_hostname=name)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise TlsError(f"TLS: certificate verify failed for host {name} (gateway {host}:{port}): "
                           f"{exc.verify_message}: check tls_ca_file ({self.ca_file})"
                           + ("" if self.server_hostname else " and that the certificate names this host")
                           ) from None
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            reason = getattr(exc, "reason", None) or exc
            raise ConnectionError(f"TLS handshake with {host}:{port} failed ({reason}): is TLS enabled on "
                                  f"the gateway?") from None


@functools.cache
def _context(options: TlsOptions) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=options.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"TLS: cannot read tls_ca_file {options.ca_file}: {exc}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if options.cert_file:
        try:
            ctx.load_cert_chain(options.cert_file, options.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"TLS: cannot load tls_cert_file {options.cert_file} / tls_key_file "
                           f"{options.key_file}: {exc}") from None
    return ctx


def speaks_tls(host: str, port: int, timeout: float = 5.0) -> bool:
    """Whether ``host:port`` completes a TLS handshake (certificate not checked; nothing is sent after it).
    Used only to explain a plain connection that the server dropped."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=host):
            return True
    except (OSError, ssl.SSLError):
        return False
