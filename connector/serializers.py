"""How keys and values become bytes in the queue, and back (shared by the queue, which stores them, and the
exporter, which reads them).

A key's bytes choose its bucket and its row, so a key serializer must be deterministic: the same key must give
the same bytes in every process, every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from connector import packed
from connector.plugins import object_from_name
from connector.settings import OptionError


@runtime_checkable
class Serializer(Protocol):
    """Turns objects into bytes and back. ``loads(dumps(x))`` must equal ``x`` for the objects you queue."""

    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class JsonSerializer:
    """Compact JSON in UTF-8 with sorted object keys, so equal objects always give equal bytes.

    Strict JSON: NaN and infinities are refused (another language's reader could not parse them). Tuples come
    back as lists.
    """

    def dumps(self, obj: Any) -> bytes:
        """Serialize ``obj`` (raises ``TypeError``/``ValueError`` for what JSON cannot hold)."""
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
            "utf-8"
        )

    def loads(self, data: bytes) -> Any:
        """Parse bytes written by ``dumps`` (raises ``ValueError`` for bytes that are not UTF-8 JSON)."""
        return json.loads(bytes(data).decode("utf-8"))

    def __repr__(self) -> str:
        return "JsonSerializer()"


class BytesSerializer:
    """Raw bytes, unchanged; text is encoded as UTF-8. ``loads`` always returns bytes."""

    def dumps(self, obj: Any) -> bytes:
        """The bytes of ``obj`` (bytes-like, or str as UTF-8); anything else is a ``TypeError``."""
        if isinstance(obj, bytes):
            return obj
        if isinstance(obj, bytearray | memoryview):
            return bytes(obj)
        if isinstance(obj, str):
            return obj.encode("utf-8")
        raise TypeError(f"BytesSerializer takes bytes or str, not {type(obj).__name__}")

    def loads(self, data: bytes) -> bytes:
        return bytes(data)

    def __repr__(self) -> str:
        return "BytesSerializer()"


class PackedSerializer:
    """The ``packed`` encoding of the built-in translators' inputs (:mod:`connector.packed`): difference
    updates, cells and operation logs in about a third of their JSON, decoded natively by the drain.
    ``loads`` gives their canonical form (fields as str when written as text, else bytes)."""

    def dumps(self, obj: Any) -> bytes:
        """Pack ``obj`` (raises ``TypeError``/``ValueError`` naming what it cannot hold)."""
        return packed.pack(obj)

    def loads(self, data: bytes) -> Any:
        """Unpack bytes written by ``dumps`` (raises ``ValueError`` for bytes that are not packed)."""
        return packed.unpack(data)

    def __repr__(self) -> str:
        return "PackedSerializer()"


_BUILTIN: dict[str, Callable[[], Serializer]] = {"json": JsonSerializer, "bytes": BytesSerializer,
                                                  "packed": PackedSerializer}
#: the serializer of keys and values when none is named (a queue's configuration, an exporter's batch)
DEFAULT_SERIALIZER = "json"
#: the serializers whose values the drain translates natively (the built-in translators' inputs)
NATIVE_ENCODINGS = ("json", "packed")


def serializer_from_name(name: str) -> Serializer:
    """The serializer called ``name``: ``"json"``, ``"bytes"``, ``"packed"``, or ``"module:attr"`` naming a
    Serializer class, a factory that returns one, or a Serializer instance (``attr`` may be dotted)."""
    if not isinstance(name, str) or not name.strip():
        raise OptionError(f"serializer name must be a non-empty string, got {name!r}")
    name = name.strip()
    if name in _BUILTIN:
        return _BUILTIN[name]()
    target: Any = object_from_name("serializer", name, _BUILTIN)
    # an instance is used as is; a class or factory is called with no arguments
    if isinstance(target, type) or not isinstance(target, Serializer):
        if not callable(target):
            raise OptionError(f"serializer {name!r} is neither a Serializer nor a callable returning one")
        target = target()
    if not isinstance(target, Serializer):
        raise OptionError(f"serializer {name!r} did not give an object with dumps() and loads()")
    return target
