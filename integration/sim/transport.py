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

import struct
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TApplicationException, TException, TMessageType, TProcessor, TType
from thriftpy2.transport import TMemoryBuffer, TTransportException

from connector.accumulo import Connection
from connector.accumulo import connection as _connection
from connector.accumulo._idl import proxy
from connector.accumulo.error_names import SECURITY, SEPARATOR, TABLE_NOT_FOUND
from connector.accumulo.gateways import Address
from connector.accumulo.transport import GatewayClient

from .gateway import SimGateway

Hook = Callable[[str], Any]


def _method_of(message: bytes) -> tuple[str, int, int]:
    """The method name and seqid of a compact-protocol call message, and where its name begins."""
    if message[2] < 0x80 and message[3] < 0x80:  # a one-byte seqid and name length: every call the client makes
        return message[4:4 + message[3]].decode("utf-8"), message[2], 3
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
_result_classes: dict[str, Any] = {}  # a method's result struct, by the method's name


def _reply_header(method: str, seqid: int) -> bytes:
    """A compact-protocol reply message's header, as thriftpy2's ``write_message_begin`` writes it."""
    name = _reply_names.get(method)
    if name is None:
        encoded = method.encode("utf-8")
        name = _reply_names[method] = _encode_varint(len(encoded)) + encoded
    return _REPLY_START + _encode_varint(seqid) + name


_REPLY_START = bytes((TCompactProtocol.PROTOCOL_ID,
                      TCompactProtocol.VERSION | (TMessageType.REPLY << TCompactProtocol.TYPE_SHIFT_AMOUNT)))
_reply_names: dict[str, bytes] = {}  # a method's name as a header holds it (its length, its bytes)


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# --- thriftpy2's compact protocol, written and read in one pass ----------------------------------------------
# thriftpy2 writes and reads its compact protocol a byte at a time through the transport (a Python call per
# byte): this codec does what its TCompactProtocol does (the same bytes, the same objects) on a bytearray or a
# bytes object. Anything it does not expect (an unknown field, a type mismatch, a value out of range) raises
# _NotPlain, and the caller leaves that message to thriftpy2, which then does whatever it does with it.

class _NotPlain(Exception):
    """Not a message this codec handles: thriftpy2 does it."""


_CTYPE = {TType.BOOL: 1, TType.BYTE: 3, TType.I16: 4, TType.I32: 5, TType.I64: 6, TType.DOUBLE: 7,
          TType.STRING: 8, TType.BINARY: 8, TType.LIST: 9, TType.SET: 10, TType.MAP: 11, TType.STRUCT: 12}
_TTYPE = {3: TType.BYTE, 4: TType.I16, 5: TType.I32, 6: TType.I64, 7: TType.DOUBLE, 8: TType.BINARY,
          9: TType.LIST, 10: TType.SET, 11: TType.MAP, 12: TType.STRUCT}
_BITS = {TType.I16: 16, TType.I32: 32, TType.I64: 64}
_BIN_TYPES = (TType.STRING, TType.BINARY)
_pack_byte = struct.Struct("!b").pack
_pack_double, _unpack_double = struct.Struct("<d").pack, struct.Struct("<d").unpack
#: per payload class: its fields as thriftpy2 writes them, (field id, name, type, compact type, element spec)
_fields_of: dict[type, tuple[tuple[int, str, int, int, Any], ...]] = {}


def _fields(cls: type) -> tuple[tuple[int, str, int, int, Any], ...]:
    found = _fields_of.get(cls)
    if found is None:
        found = _fields_of[cls] = tuple(
            (fid, spec[1], spec[0], _CTYPE[spec[0]], spec[2] if len(spec) == 4 else None)
            for fid, spec in cls.thrift_spec.items() if fid is not None)  # type: ignore[attr-defined]
    return found


def _write_varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_int(out: bytearray, n: int, bits: int) -> None:
    if not -(1 << (bits - 1)) <= n < 1 << (bits - 1):
        raise _NotPlain  # thriftpy2 raises its TProtocolException
    _write_varint(out, (n << 1) ^ (n >> (bits - 1)))


def encode_struct(out: bytearray, obj: Any) -> None:
    """``obj`` (a thriftpy2 payload) as ``TCompactProtocol.write_struct`` writes it."""
    cls = type(obj)
    if cls is _KeyValue and _encode_key_value(out, obj):
        return
    encode = _encoders.get(cls)
    if encode is None:
        if _used(cls) < _COMPILE_AFTER:
            _encode_fields(out, obj)
            return
        encode = _encoders[cls] = _compiled_encoder(cls)
    encode(out, obj)


def _encode_fields(out: bytearray, obj: Any) -> None:
    """:func:`encode_struct` field by field from the class's spec: what :func:`_compiled_encoder` compiles."""
    last = 0
    for fid, name, ttype, ctype, spec in _fields(type(obj)):
        value = getattr(obj, name, None)
        if value is None:
            continue
        if ttype == TType.BOOL:
            ctype = 1 if value else 2  # a bool field's value is its header's type
        delta = fid - last
        if 0 < delta <= 15:
            out.append(delta << 4 | ctype)
        else:
            out.append(ctype)
            _write_int(out, fid, 16)
        last = fid
        if ttype != TType.BOOL:
            _encode_value(out, ttype, value, spec)
    out.append(0)


_KeyValue, _Key = proxy.KeyValue, proxy.Key
_I64_MIN, _I64_END = -(1 << 63), 1 << 63


def _encode_key_value(out: bytearray, kv: Any) -> bool:
    """A ``KeyValue`` of bytes and an int timestamp (every cell a ``nextK`` page holds), as :func:`encode_struct`
    writes it, in one go; False (nothing written) for any other."""
    key, value = kv.key, kv.value
    if type(key) is not _Key or type(value) is not bytes:
        return False
    row, cf, cq, cv, ts = key.row, key.colFamily, key.colQualifier, key.colVisibility, key.timestamp
    if type(row) is not bytes or type(cf) is not bytes or type(cq) is not bytes or type(cv) is not bytes \
            or type(ts) is not int or not _I64_MIN <= ts < _I64_END:
        return False
    out.append(0x1C)  # field 1, the key: a struct
    for part in (row, cf, cq, cv):  # fields 1-4 of the key, binary
        out.append(0x18)
        _write_varint(out, len(part))
        out += part
    out.append(0x16)  # field 5, the timestamp: an i64
    _write_varint(out, (ts << 1) ^ (ts >> 63))
    out.append(0)  # the key's end
    out.append(0x18)  # field 2, the value: binary
    _write_varint(out, len(value))
    out += value
    out.append(0)
    return True


def _encode_value(out: bytearray, ttype: int, value: Any, spec: Any) -> None:
    if ttype == TType.BINARY:
        out_len = len(value)  # thriftpy2 writes a str's length in characters, then its UTF-8 bytes
        _write_varint(out, out_len)
        out += value.encode() if isinstance(value, str) else value
    elif ttype == TType.STRING:
        data = value if isinstance(value, bytes) else value.encode("utf-8")
        _write_varint(out, len(data))
        out += data
    elif ttype == TType.STRUCT:
        encode_struct(out, value)
    elif ttype in _BITS:
        _write_int(out, value, _BITS[ttype])
    elif ttype == TType.BOOL:
        out.append(1 if value else 2)
    elif ttype == TType.LIST or ttype == TType.SET:
        etype, espec = spec if isinstance(spec, tuple) else (spec, None)
        size = len(value)
        if size <= 14:
            out.append(size << 4 | _CTYPE[etype])
        else:
            out.append(0xF0 | _CTYPE[etype])
            _write_varint(out, size)
        for element in value:
            _encode_value(out, etype, element, espec)
    elif ttype == TType.MAP:
        ktype, kspec = (spec[0], None) if isinstance(spec[0], int) else spec[0]
        vtype, vspec = (spec[1], None) if isinstance(spec[1], int) else spec[1]
        if not value:
            out.append(0)
            return
        _write_varint(out, len(value))
        out.append(_CTYPE[ktype] << 4 | _CTYPE[vtype])
        for k in value:
            _encode_value(out, ktype, k, kspec)
            _encode_value(out, vtype, value[k], vspec)
    elif ttype == TType.BYTE:
        out += _pack_byte(value)
    elif ttype == TType.DOUBLE:
        out += _pack_double(value)
    else:
        raise _NotPlain


def decode_struct(data: bytes, pos: int, cls: type) -> tuple[Any, int]:
    """The payload of class ``cls`` at ``pos`` as ``TCompactProtocol.read_struct`` reads it, and where it ends."""
    obj = cls()
    return obj, decode_into(data, pos, obj)


def decode_into(data: bytes, pos: int, obj: Any) -> int:
    """The fields of the payload at ``pos`` set on ``obj`` as ``TCompactProtocol.read_struct(obj)`` sets them;
    where it ends. On an exception the fields before the failing one are set, with the values thriftpy2 reads
    for them too: thriftpy2 may read ``obj`` again from the start."""
    cls = type(obj)
    decode = _decoders.get(cls)
    if decode is None:
        if _used(cls) < _COMPILE_AFTER:
            return _decode_fields(data, pos, obj)
        decode = _decoders[cls] = _compiled_decoder(cls)
    return decode(data, pos, obj)


def _decode_fields(data: bytes, pos: int, obj: Any) -> int:
    """:func:`decode_into` field by field from the class's spec: what :func:`_compiled_decoder` compiles."""
    spec_of = obj.thrift_spec
    last = 0
    while True:
        header = data[pos]
        pos += 1
        ctype = header & 0x0F
        if ctype == 0:
            return pos
        delta = header >> 4
        if delta:
            fid = last + delta
        else:
            zigzag, pos = _varint(data, pos)
            fid = (zigzag >> 1) ^ -(zigzag & 1)
        last = fid
        spec = spec_of.get(fid)
        if spec is None:
            raise _NotPlain  # thriftpy2 skips the field
        ttype = spec[0]
        if ctype == 1 or ctype == 2:
            if ttype != TType.BOOL:
                raise _NotPlain
            value: Any = ctype == 1
        else:
            wire_type = _TTYPE.get(ctype)
            if wire_type != ttype and not (wire_type in _BIN_TYPES and ttype in _BIN_TYPES):
                raise _NotPlain
            value, pos = _decode_value(data, pos, ttype, spec[2] if len(spec) == 4 else None)
        setattr(obj, spec[1], value)


def _decode_value(data: bytes, pos: int, ttype: int, spec: Any) -> tuple[Any, int]:
    if ttype == TType.BINARY or ttype == TType.STRING:
        size, pos = _varint(data, pos)
        end = pos + size
        if end > len(data):
            raise _NotPlain
        raw = data[pos:end]
        if ttype == TType.STRING:
            try:
                return raw.decode("utf-8"), end
            except UnicodeDecodeError:  # thriftpy2 keeps the bytes
                return raw, end
        return raw, end
    if ttype in _BITS:
        zigzag, pos = _varint(data, pos)
        return (zigzag >> 1) ^ -(zigzag & 1), pos
    if ttype == TType.STRUCT:
        return decode_struct(data, pos, spec)
    if ttype == TType.LIST or ttype == TType.SET:  # thriftpy2 reads a set as a list, whatever the element type sent
        etype, espec = spec if isinstance(spec, tuple) else (spec, None)
        size = data[pos] >> 4
        pos += 1
        if size == 15:
            size, pos = _varint(data, pos)
        items = []
        for _ in range(size):
            item, pos = _decode_value(data, pos, etype, espec)
            items.append(item)
        return items, pos
    if ttype == TType.MAP:
        size, pos = _varint(data, pos)
        if size == 0:
            return {}, pos
        ktype, kspec = (spec[0], None) if isinstance(spec[0], int) else spec[0]
        vtype, vspec = (spec[1], None) if isinstance(spec[1], int) else spec[1]
        types = data[pos]
        pos += 1
        sent_k, sent_v = _TTYPE.get(types >> 4), _TTYPE.get(types & 0x0F)
        if (sent_k != ktype and not (sent_k in _BIN_TYPES and ktype in _BIN_TYPES)) or \
                (sent_v != vtype and not (sent_v in _BIN_TYPES and vtype in _BIN_TYPES)):
            raise _NotPlain  # thriftpy2 skips the entries (and a bool's type byte is not in _TTYPE)
        result = {}
        for _ in range(size):
            k, pos = _decode_value(data, pos, ktype, kspec)
            result[k], pos = _decode_value(data, pos, vtype, vspec)
        return result, pos
    if ttype == TType.BOOL:
        return data[pos] == 1, pos + 1
    if ttype == TType.BYTE:
        return data[pos] - 256 if data[pos] > 127 else data[pos], pos + 1
    if ttype == TType.DOUBLE:
        if pos + 8 > len(data):
            raise _NotPlain
        return _unpack_double(data[pos:pos + 8])[0], pos + 8
    raise _NotPlain


# --- the codec compiled per struct class -----------------------------------------------------------------------
# _encode_fields and _decode_fields walk a class's spec for every struct; these write that walk out once per class
# as straight-line Python (a field's header byte, its type check and its scalar coding inlined): the same bytes, the
# same objects, the same exceptions, at about half the cost.

_encoders: dict[type, Callable[[bytearray, Any], None]] = {}
_decoders: dict[type, Callable[[bytes, int, Any], int]] = {}
#: a class is compiled once it was coded this many times: compiling costs about what 50 uses of it save
_COMPILE_AFTER = 50
_uses: dict[type, int] = {}


def _used(cls: type) -> int:
    """Count a use of ``cls``'s generic coding; how many so far."""
    n = _uses[cls] = _uses.get(cls, 0) + 1
    return n
_CODEGEN_ENV: dict[str, Any] = {}  # filled below, once the helpers exist


def _compiled_encoder(cls: type) -> Callable[[bytearray, Any], None]:
    lines = ["def encode(out, obj):", "    last = 0"]
    for n, (fid, name, ttype, ctype, _) in enumerate(_fields(cls)):
        lines += [f"    v = getattr(obj, {name!r}, None)", "    if v is not None:"]
        header = "(1 if v else 2)" if ttype == TType.BOOL else str(ctype)
        lines += [f"        d = {fid} - last",
                  f"        if 0 < d <= 15: out.append(d << 4 | {header})",
                  f"        else: out.append({header}); _write_int(out, {fid}, 16)",
                  f"        last = {fid}"]
        if ttype == TType.BOOL:
            continue
        if ttype == TType.BINARY:  # thriftpy2 writes a str's length in characters, then its UTF-8 bytes
            lines += ["        _write_varint(out, len(v))", "        out += v.encode() if isinstance(v, str) else v"]
        elif ttype == TType.STRING:
            lines += ["        b = v if isinstance(v, bytes) else v.encode('utf-8')",
                      "        _write_varint(out, len(b))", "        out += b"]
        elif ttype in _BITS:
            bits = _BITS[ttype]
            lines += [f"        if not {-(1 << (bits - 1))} <= v < {1 << (bits - 1)}: raise _NotPlain",
                      f"        _write_varint(out, (v << 1) ^ (v >> {bits - 1}))"]
        elif ttype == TType.STRUCT:
            lines += ["        encode_struct(out, v)"]
        else:
            lines += [f"        _encode_value(out, {ttype}, v, _spec_{n})"]
    lines += ["    out.append(0)"]
    env = dict(_CODEGEN_ENV)
    env.update({f"_spec_{n}": spec for n, (_, _, _, _, spec) in enumerate(_fields(cls))})
    exec("\n".join(lines), env)  # noqa: S102 - code written above from the IDL's own spec
    return env["encode"]  # type: ignore[no-any-return]


def _compiled_decoder(cls: type) -> Callable[[bytes, int, Any], int]:
    spec_of = cls.thrift_spec  # type: ignore[attr-defined]
    lines = ["def decode(data, pos, obj):", "    last = 0", "    while True:",
             "        header = data[pos]", "        pos += 1", "        ctype = header & 0x0F",
             "        if ctype == 0: return pos", "        delta = header >> 4",
             "        if delta: fid = last + delta",
             "        else:", "            zigzag, pos = _varint(data, pos)",
             "            fid = (zigzag >> 1) ^ -(zigzag & 1)", "        last = fid"]
    env = dict(_CODEGEN_ENV)
    for n, (fid, spec) in enumerate((f, sp) for f, sp in spec_of.items() if f is not None):
        ttype, name, element = spec[0], spec[1], spec[2] if len(spec) == 4 else None
        lines += [f"        {'if' if n == 0 else 'elif'} fid == {fid}:"]
        if ttype == TType.BOOL:
            lines += ["            if ctype != 1 and ctype != 2: raise _NotPlain", "            v = ctype == 1"]
        else:
            lines += [f"            if ctype != {_CTYPE[ttype]}: raise _NotPlain"]
            if ttype == TType.BINARY or ttype == TType.STRING:
                lines += ["            size, pos = _varint(data, pos)", "            end = pos + size",
                          "            if end > len(data): raise _NotPlain", "            v = data[pos:end]",
                          "            pos = end"]
                if ttype == TType.STRING:  # thriftpy2 keeps the bytes of what is not UTF-8
                    lines += ["            try: v = v.decode('utf-8')", "            except UnicodeDecodeError: pass"]
            elif ttype in _BITS:
                lines += ["            zigzag, pos = _varint(data, pos)",
                          "            v = (zigzag >> 1) ^ -(zigzag & 1)"]
            elif ttype == TType.STRUCT:
                lines += [f"            v = _spec_{n}()", "            pos = decode_into(data, pos, v)"]
            else:
                lines += [f"            v, pos = _decode_value(data, pos, {ttype}, _spec_{n})"]
        lines += [f"            setattr(obj, {name!r}, v)"]
        env[f"_spec_{n}"] = element
    lines += ["        else: raise _NotPlain"] if len(lines) > 13 else ["        raise _NotPlain"]
    exec("\n".join(lines), env)  # noqa: S102 - code written above from the IDL's own spec
    return env["decode"]  # type: ignore[no-any-return]


class SimServer:
    """thriftpy2's processor over a gateway, with the hooks: one per connection (the hooks are its caller's).

    A call is decoded once per distinct message (:data:`_decoded`), applied as ``TProcessor.process`` applies it
    (its declared exceptions in the result, any other as an undeclared one) and its reply encoded, both with the
    bytes and objects thriftpy2's compact protocol makes (:func:`decode_struct`, :func:`encode_struct`; thriftpy2
    itself for what they leave to it)."""

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
        try:
            reply = self._process(message, seqid, name_at)
        except TException as exc:  # a proxy exception the IDL does not declare for this call
            name = {"AccumuloSecurityException": SECURITY, "TableNotFoundException": TABLE_NOT_FOUND}.get(
                type(exc).__name__, type(exc).__name__)
            undeclared = TApplicationException(TApplicationException.INTERNAL_ERROR,
                                               f"{name}{SEPARATOR}{getattr(exc, 'msg', None) or exc}")
            reply = _with_thriftpy2(lambda oprot: self.processor.send_exception(oprot, method, undeclared, seqid))
        self.calls += 1
        if self.after_call is not None:
            self.after_call(method)
        return reply or None

    def _process(self, message: bytes, seqid: int, name_at: int) -> bytes:
        """``TProcessor.process``, the call's decoding cached; the reply message (empty for a oneway call)."""
        key = message[1:2] + message[name_at:]
        decoded = _decoded.get(key)
        if decoded is None:
            decoded = _decode_call(message, name_at)
            if decoded is None:
                iprot = TCompactProtocol(TMemoryBuffer(message))
                api, _, _ = iprot.read_message_begin()
                if api not in proxy.AccumuloProxy.thrift_services:
                    unknown = TApplicationException(TApplicationException.UNKNOWN_METHOD)
                    return _with_thriftpy2(lambda oprot: self.processor.send_exception(oprot, api, unknown, seqid))
                call_args = getattr(proxy.AccumuloProxy, api + "_args")()
                call_args.read(iprot)
                iprot.read_message_end()
                decoded = (api, tuple(call_args.__dict__[spec[1]] for spec in call_args.thrift_spec.values()))
            if len(_decoded) >= _DECODED_MAX:
                _decoded.clear()
            _decoded[key] = decoded
        api, args = decoded
        result_class = _result_classes.get(api)
        if result_class is None:
            result_class = _result_classes[api] = getattr(proxy.AccumuloProxy, api + "_result")
        try:
            value = getattr(self.gateway, api)(*args)
        except TApplicationException as exc:
            failure = exc
            return _with_thriftpy2(lambda oprot: self.processor.send_exception(oprot, api, failure, seqid))
        except Exception as exc:
            result = result_class()
            if not self.processor.handle_exception(exc, result):
                raise
            value = exc  # never a simple result: encoded in full
        else:
            result = None  # made only when the reply is not cached: most are
        if result_class.oneway:
            return b""
        simple = type(value) in _SIMPLE_RESULTS and seqid >= 0
        if simple:
            reply_key = (api, type(value), value)
            body = _replies.get(reply_key)
            if body is not None:
                return _reply_header(api, seqid) + body
        if result is None:
            result = result_class()
            result.success = value
        if seqid < 0:
            return _with_thriftpy2(lambda oprot: self.processor.send_result(oprot, api, result, seqid))
        out = bytearray()
        try:
            encode_struct(out, result)
        except Exception:  # noqa: BLE001 - thriftpy2 writes it, or raises what it raises
            whole = _with_thriftpy2(lambda oprot: self.processor.send_result(oprot, api, result, seqid))
            out = bytearray(whole[len(_reply_header(api, seqid)):])
        body = bytes(out)
        if simple:
            if len(_replies) >= _DECODED_MAX:
                _replies.clear()
            _replies[reply_key] = body
        return _reply_header(api, seqid) + body


def _decode_call(message: bytes, name_at: int) -> tuple[str, tuple[Any, ...]] | None:
    """(method, its arguments in the IDL's order) of a call message; None when thriftpy2 must read it."""
    try:
        if message[0] != TCompactProtocol.PROTOCOL_ID or message[1] & TCompactProtocol.VERSION_MASK \
                != TCompactProtocol.VERSION:
            return None
        size, start = _varint(message, name_at)
        api = message[start:start + size].decode("utf-8")
        if api not in proxy.AccumuloProxy.thrift_services:
            return None
        cls = getattr(proxy.AccumuloProxy, api + "_args")
        call_args, _ = decode_struct(message, start + size, cls)
        return api, tuple(call_args.__dict__[spec[1]] for spec in cls.thrift_spec.values())
    except Exception:  # noqa: BLE001 - thriftpy2 reads it, or raises what it raises
        return None


_CODEGEN_ENV.update(_NotPlain=_NotPlain, _write_int=_write_int, _write_varint=_write_varint, _varint=_varint,
                    encode_struct=encode_struct, decode_into=decode_into, _encode_value=_encode_value,
                    _decode_value=_decode_value)


def _with_thriftpy2(write: Callable[[TCompactProtocol], None]) -> bytes:
    """What ``write`` writes with thriftpy2's own protocol."""
    out = TMemoryBuffer()
    write(TCompactProtocol(out))
    return out.getvalue()


#: call message headers by (method, message type, seqid): a client's seqid is always 0, its methods few
_call_headers: dict[tuple[str, int, int], bytes] = {}


class SimProtocol(TCompactProtocol):
    """The client's ``TCompactProtocol`` on a :class:`SimWire`, each struct and message header written and read
    in one pass (:func:`encode_struct`, :func:`decode_into`) rather than a transport call per byte: the same bytes
    written, the same objects read; thriftpy2's own methods do whatever the codec leaves to them."""

    trans: SimWire  # type: ignore[assignment]

    def write_message_begin(self, name: str, ttype: int, seqid: int) -> None:
        header = _call_headers.get((name, ttype, seqid))
        if header is None:
            if seqid < 0 or not isinstance(name, str):
                super().write_message_begin(name, ttype, seqid)
                return
            encoded = name.encode("utf-8")
            header = bytes((TCompactProtocol.PROTOCOL_ID, TCompactProtocol.VERSION
                            | (ttype << TCompactProtocol.TYPE_SHIFT_AMOUNT))) \
                + _encode_varint(seqid) + _encode_varint(len(encoded)) + encoded
            if len(_call_headers) >= _DECODED_MAX:
                _call_headers.clear()
            _call_headers[name, ttype, seqid] = header
        self.trans.write(header)

    def write_struct(self, obj: Any) -> None:
        out = bytearray()
        try:
            encode_struct(out, obj)
        except Exception:  # noqa: BLE001 - thriftpy2 writes it, or raises what it raises
            super().write_struct(obj)
            return
        self.trans.write(out)

    def read_message_begin(self) -> tuple[str, int, int]:
        wire = self.trans
        data, pos = wire._in, wire._in_pos
        try:
            if data[pos] == TCompactProtocol.PROTOCOL_ID and data[pos + 1] & TCompactProtocol.VERSION_MASK \
                    == TCompactProtocol.VERSION:
                mtype = (data[pos + 1] >> TCompactProtocol.TYPE_SHIFT_AMOUNT) & TCompactProtocol.TYPE_BITS
                seqid, at = _varint(data, pos + 2)
                size, at = _varint(data, at)
                if at + size <= len(data):
                    name = data[at:at + size].decode("utf-8")
                    wire._in_pos = at + size
                    return name, mtype, seqid
        except (IndexError, UnicodeDecodeError):
            pass
        return super().read_message_begin()  # type: ignore[no-any-return]

    def read_struct(self, obj: Any) -> None:
        wire = self.trans
        try:
            wire._in_pos = decode_into(wire._in, wire._in_pos, obj)
        except Exception:  # noqa: BLE001 - thriftpy2 reads it from the start, or raises what it raises
            super().read_struct(obj)


class SimWire:
    """A client's transport and raw socket in one, over a :class:`SimServer` (see the module's description)."""

    def __init__(self, server: SimServer) -> None:
        self.server = server
        self.sock = self  # the raw ``nextK`` path reads ``client.raw_socket.sock``
        self._message = bytearray()  # what the client wrote since its last flush
        self.write = self._message.extend  # type: ignore[method-assign, assignment]  # thriftpy2 writes byte by byte
        self._raw = bytearray()  # length-prefixed frames sent with sendall, not complete yet
        self._in = b""  # the last reply (framed for the raw socket), read from _in_pos on
        self._in_pos = 0
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

    def write(self, data: bytes | bytearray) -> None:  # replaced per instance by the buffer's own extend (see __init__)
        self._message += data

    def flush(self) -> None:
        message = bytes(self._message)
        self._message.clear()
        self._check_open()  # a write to a closed socket fails here, within the same call
        self._send(message, framed=False)

    def read(self, size: int) -> bytes:
        pos = self._in_pos
        chunk = self._in[pos:pos + size]
        self._in_pos = pos + len(chunk)
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
            self._in = (len(reply).to_bytes(4, "big") + reply) if framed else reply
            self._in_pos = 0

    # --- the raw socket (nextK) -------------------------------------------------------------------------

    def sendall(self, data: bytes) -> None:
        self._check_open()
        if not self._raw and len(data) >= 4 and int.from_bytes(data[:4], "big") == len(data) - 4:
            self._send(bytes(data[4:]), framed=True)  # one whole frame, as the client sends a nextK
            return
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
    return GatewayClient(proxy.AccumuloProxy, SimProtocol(wire), wire)  # type: ignore[arg-type]


_real_speaks_tls = _connection.speaks_tls


def _speaks_tls(host: str, port: int, timeout: float = 5.0) -> bool:
    """A simulated gateway never speaks TLS. The connection asks when its first call's answer is lost; the real
    probe would look the made-up host name up in DNS (real time and the network, in a simulation)."""
    if host.startswith("sim-"):
        return False
    return _real_speaks_tls(host, port, timeout)


_connection.speaks_tls = _speaks_tls  # type: ignore[assignment]


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
