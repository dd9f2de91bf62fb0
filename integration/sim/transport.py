"""Real ``Connection`` objects whose sockets lead to a :class:`~integration.sim.gateway.SimGateway` in memory.

:func:`sim_connection` returns a :class:`SimConnection`, a ``connector.accumulo.Connection`` that differs in one
method only, ``_open``: its clients are the client's own ``GatewayClient`` (thriftpy2, compact protocol) on a
:class:`SimWire` instead of a socket. Everything above runs unchanged: the hand-encoded ``nextK``,
``createBatchScanner``, ``updateRowsConditionally`` and ``update`` frames, the Rust decoder of ``nextK`` replies,
retries and error translation. A :class:`SimWire` is both the client's transport (thriftpy2 and
``transport.send_frame`` write a whole message and flush) and its raw socket (``nextK`` sends a length-prefixed
frame with ``sendall`` and reads the reply with ``recv_into``). Each message is handed, on ``flush``, to
thriftpy2's processor over the gateway, and the reply waits in the wire for the client's reads.

Hooks, for the simulation's scheduler: ``before_call(method)`` runs before a call is applied (it may let other
simulated threads run first, or raise to crash the caller there); ``after_call(method)`` runs once it is applied,
before the reply is readable (raising a ``TTransportException`` there loses the answer of an applied call; the
wire is then closed, as a dropped socket is).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TApplicationException, TException, TMessageType, TProcessor
from thriftpy2.transport import TMemoryBuffer, TTransportException

from connector.accumulo import Connection
from connector.accumulo._idl import proxy
from connector.accumulo.error_names import SECURITY, SEPARATOR, TABLE_NOT_FOUND
from connector.accumulo.gateways import Address
from connector.accumulo.transport import GatewayClient

from .gateway import SimGateway

Hook = Callable[[str], Any]


def _method_of(message: bytes) -> tuple[str, int, int]:
    """The method name and seqid of a compact-protocol call message, and where its name begins."""
    seqid, pos = _varint(message, 2)
    n, start = _varint(message, pos)
    return message[start:start + n].decode("utf-8"), seqid, pos


def _varint(message: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        b = message[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos


#: decoded calls by their message (less its seqid): (method, its arguments in the IDL's order). The same calls
#: come again and again (a scanner's pages, a relay's polls); the gateway never changes the arguments it is given
_decoded: dict[bytes, tuple[str, tuple[Any, ...]]] = {}
_DECODED_MAX = 20_000
#: encoded replies (the message less its header) by (method, type, value) of a result that is nothing, a bool, a
#: number, a string or bytes, and no exception: most replies are one of a few (a scanner closed, a flag)
_replies: dict[tuple[str, type, Any], bytes] = {}
_SIMPLE_RESULTS = (type(None), bool, int, str, bytes)


def _reply_header(method: str, seqid: int) -> bytes:
    """A compact-protocol reply message's header, as thriftpy2's ``write_message_begin`` writes it."""
    name = method.encode("utf-8")
    return bytes((TCompactProtocol.PROTOCOL_ID, TCompactProtocol.VERSION
                  | (TMessageType.REPLY << TCompactProtocol.TYPE_SHIFT_AMOUNT))) + _encode_varint(seqid) \
        + _encode_varint(len(name)) + name


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class SimServer:
    """thriftpy2's processor over a gateway, with the hooks: one per connection (the hooks are its caller's).

    A call is decoded by thriftpy2's compact protocol once per distinct message (:data:`_decoded`), applied as
    ``TProcessor.process`` applies it (its declared exceptions in the result, any other as an undeclared one)
    and its reply encoded by thriftpy2."""

    def __init__(self, gateway: SimGateway, before_call: Hook | None = None, after_call: Hook | None = None) -> None:
        self.gateway = gateway
        self.processor = TProcessor(proxy.AccumuloProxy, gateway)
        self.before_call = before_call
        self.after_call = after_call
        #: calls applied, for statistics
        self.calls = 0

    def handle(self, message: bytes) -> bytes | None:
        """Apply one call message; its reply message (None for a oneway call)."""
        method, seqid, name_at = _method_of(message)
        if self.before_call is not None:
            self.before_call(method)
        out = TMemoryBuffer()
        oprot = TCompactProtocol(out)
        try:
            self._process(message, seqid, name_at, oprot)
        except TException as exc:  # a proxy exception the IDL does not declare for this call
            name = {"AccumuloSecurityException": SECURITY, "TableNotFoundException": TABLE_NOT_FOUND}.get(
                type(exc).__name__, type(exc).__name__)
            reply = TApplicationException(TApplicationException.INTERNAL_ERROR,
                                          f"{name}{SEPARATOR}{getattr(exc, 'msg', None) or exc}")
            out = TMemoryBuffer()
            oprot = TCompactProtocol(out)
            oprot.write_message_begin(method, TMessageType.EXCEPTION, seqid)
            reply.write(oprot)
            oprot.write_message_end()
        self.calls += 1
        if self.after_call is not None:
            self.after_call(method)
        value = out.getvalue()
        return value or None

    def _process(self, message: bytes, seqid: int, name_at: int, oprot: TCompactProtocol) -> None:
        """``TProcessor.process`` with the decoding of the call cached."""
        key = message[1:2] + message[name_at:]
        decoded = _decoded.get(key)
        if decoded is None:
            iprot = TCompactProtocol(TMemoryBuffer(message))
            api, _, _ = iprot.read_message_begin()
            if api not in proxy.AccumuloProxy.thrift_services:
                self.processor.send_exception(
                    oprot, api, TApplicationException(TApplicationException.UNKNOWN_METHOD), seqid)
                return
            call_args = getattr(proxy.AccumuloProxy, api + "_args")()
            call_args.read(iprot)
            iprot.read_message_end()
            decoded = (api, tuple(call_args.__dict__[spec[1]] for spec in call_args.thrift_spec.values()))
            if len(_decoded) >= _DECODED_MAX:
                _decoded.clear()
            _decoded[key] = decoded
        api, args = decoded
        result = getattr(proxy.AccumuloProxy, api + "_result")()
        try:
            value = result.success = getattr(self.gateway, api)(*args)
        except TApplicationException as exc:
            self.processor.send_exception(oprot, api, exc, seqid)
            return
        except Exception as exc:
            if not self.processor.handle_exception(exc, result):
                raise
            value = exc  # never a simple result: encoded in full
        if result.oneway:
            return
        if type(value) not in _SIMPLE_RESULTS or seqid < 0:
            self.processor.send_result(oprot, api, result, seqid)
            return
        reply_key = (api, type(value), value)
        body = _replies.get(reply_key)
        out: Any = oprot.trans
        if body is None:
            self.processor.send_result(oprot, api, result, seqid)
            body = out.getvalue()[len(_reply_header(api, seqid)):]
            if len(_replies) >= _DECODED_MAX:
                _replies.clear()
            _replies[reply_key] = body
            return
        out.write(_reply_header(api, seqid) + body)


class SimWire:
    """A client's transport and raw socket in one, over a :class:`SimServer` (see the module's description)."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.sock = self  # the raw ``nextK`` path reads ``client.raw_socket.sock``
        self._message = bytearray()  # what the client wrote since its last flush
        self.write = self._message.extend  # type: ignore[method-assign, assignment]  # thriftpy2 writes byte by byte
        self._raw = bytearray()  # length-prefixed frames sent with sendall, not complete yet
        self._reply = io.BytesIO()
        self._open = True

    # --- the transport (thriftpy2, send_frame) ----------------------------------------------------------

    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        self._open = True

    def close(self) -> None:
        self._open = False

    def _check_open(self) -> None:
        if not self._open:
            raise TTransportException(TTransportException.NOT_OPEN, "simulated socket is closed")

    def write(self, data: bytes) -> None:  # replaced per instance by the buffer's own extend (see __init__)
        self._message += data

    def flush(self) -> None:
        message = bytes(self._message)
        self._message.clear()
        self._check_open()  # a write to a closed socket fails here, within the same call
        self._send(message, framed=False)

    def read(self, size: int) -> bytes:
        chunk = self._reply.read(size)
        if not chunk and size:
            self._check_open()
            raise TTransportException(TTransportException.END_OF_FILE, "simulated gateway sent no reply")
        return chunk

    def _send(self, message: bytes, framed: bool) -> None:
        try:
            reply = self.server.handle(message)
        except TTransportException:
            self._open = False  # a lost answer: the socket is gone
            raise
        if reply is not None:
            self._reply = io.BytesIO((len(reply).to_bytes(4, "big") + reply) if framed else reply)

    # --- the raw socket (nextK) -------------------------------------------------------------------------

    def sendall(self, data: bytes) -> None:
        self._check_open()
        self._raw += data
        while len(self._raw) >= 4:
            size = int.from_bytes(self._raw[:4], "big")
            if len(self._raw) < 4 + size:
                return
            message = bytes(self._raw[4:4 + size])
            del self._raw[:4 + size]
            self._send(message, framed=True)

    def recv_into(self, view: Any, size: int = 0) -> int:
        self._check_open()
        chunk = self.read(size or len(view))
        view[:len(chunk)] = chunk
        return len(chunk)


def open_sim_client(gateway: SimGateway, before_call: Hook | None = None,
                    after_call: Hook | None = None) -> GatewayClient:
    """A client of the connector's own kind on a new :class:`SimWire` to ``gateway``."""
    wire = SimWire(SimServer(gateway, before_call, after_call))
    return GatewayClient(proxy.AccumuloProxy, TCompactProtocol(wire), wire)  # type: ignore[arg-type]


class SimConnection(Connection):
    """A ``Connection`` whose sockets are :class:`SimWire` objects to one simulated gateway."""

    def __init__(self, gateway: SimGateway, *, name: str = "", before_call: Hook | None = None,
                 after_call: Hook | None = None, **options: Any) -> None:
        super().__init__(f"sim-{name or 'gateway'}", 42424, gateway.secret, name=name, **options)
        self.sim_gateway = gateway
        self.before_call = before_call
        self.after_call = after_call

    def _open(self) -> tuple[Any, Address]:
        if self._closed:
            raise RuntimeError("connection is closed")
        self._reached = True
        return open_sim_client(self.sim_gateway, self.before_call, self.after_call), self.gateways.addresses[0]


def sim_connection(gateway: SimGateway, *, name: str = "", before_call: Hook | None = None,
                   after_call: Hook | None = None, **options: Any) -> Connection:
    """A real ``Connection`` to ``gateway`` (``options``: the ``Connection``'s own, ``retry`` or ``server_wait``
    say)."""
    return SimConnection(gateway, name=name, before_call=before_call, after_call=after_call, **options)
