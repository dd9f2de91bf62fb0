"""An approximation of an upstream accumulo-proxy 2.x, for tests of how the client behaves against one.

Upstream's proxy speaks the same interface minus this project's extensions: it skips struct fields it does not
know (``ScanOptions.timeoutMs``/``isolated``, ids from 101) and answers calls it does not know (the calls after
the extensions marker in proxy.thrift) with ``TApplicationException(UNKNOWN_METHOD)``. This server is a
thriftpy2 Thrift server (framed transport, compact protocol) loaded from proxy.thrift with those fields and calls
cut out, so it decodes, skips and answers exactly so; every call it knows is forwarded, as decoded, to one of our
gateways (one forwarding socket per client connection, so a connection's one-way updates stay in order).
Everything else that differs in upstream's proxy (its frame limit, its error messages) is not modelled here:
``tests/test_upstream_compat.py`` covers those against our gateway.
"""

from __future__ import annotations

import re
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import thriftpy2
from thriftpy2.protocol import TCompactProtocolFactory
from thriftpy2.rpc import make_server
from thriftpy2.transport import TFramedTransportFactory

from connector.accumulo._idl import IDL_PATH
from connector.accumulo.transport import close_client, open_client

EXTENSIONS_MARKER = "// ---- this gateway's extensions"


def upstream_idl() -> str:
    """proxy.thrift without this project's extensions: no struct field numbered from 101, no call after the
    extensions marker."""
    text = Path(IDL_PATH).read_text()
    text = re.sub(r"^\s*1\d\d:\s*optional .*$", "", text, flags=re.MULTILINE)
    cut = text.index(EXTENSIONS_MARKER)
    return text[:cut] + "}\n"


_module: Any = None
_module_lock = threading.Lock()


def upstream_module() -> Any:
    """The upstream interface, loaded once (module name ending in _thrift, as thriftpy2 wants)."""
    global _module
    with _module_lock:
        if _module is None:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "upstream_proxy.thrift"
                path.write_text(upstream_idl())
                _module = thriftpy2.load(str(path), module_name="upstream_proxy_thrift")
        return _module


class _Forward:
    """The handler: each call, as the upstream interface decoded it, made on this server thread's own client of
    the gateway (speaking the upstream interface too, so nothing it skipped is sent on)."""

    def __init__(self, host: str, port: int, module: Any) -> None:
        self.host, self.port, self.module = host, port, module
        self.local = threading.local()

    def _client(self) -> Any:
        client = getattr(self.local, "client", None)
        if client is None:
            from thriftpy2.thrift import TClient

            sock_client = open_client(self.host, self.port, 120.0)
            client = TClient(self.module.AccumuloProxy, sock_client._iprot)
            self.local.client = client
            self.local.raw = sock_client
        return client

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def forward(*args: Any) -> Any:
            return getattr(self._client(), name)(*args)

        return forward


class UpstreamProxy:
    """The approximated upstream proxy in front of the gateway at ``host:port``, on a free local port; a context
    manager (``with UpstreamProxy(host, port) as proxy: Connection("127.0.0.1", proxy.port, ...)``)."""

    def __init__(self, gateway_host: str, gateway_port: int) -> None:
        module = upstream_module()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.handler = _Forward(gateway_host, gateway_port, module)
        self.server = make_server(module.AccumuloProxy, self.handler, "127.0.0.1", self.port,
                                  proto_factory=TCompactProtocolFactory(), trans_factory=TFramedTransportFactory(),
                                  client_timeout=None)  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self.server.serve, name="upstream-proxy", daemon=True)

    def __enter__(self) -> UpstreamProxy:
        self.thread.start()
        deadline = time.monotonic() + 10
        while True:  # serve() binds on its own thread: wait until it listens
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self.server.close()
        raw = getattr(self.handler.local, "raw", None)
        if raw is not None:
            close_client(raw)
