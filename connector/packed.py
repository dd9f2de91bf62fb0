"""The ``packed`` queue value encoding: the built-in translators' inputs (difference updates, cell lists,
operation logs) in a binary layout without field names, about a third of their JSON.

A queue chooses it at ``queue init --value-serializer packed``; the choice is stored in the queue's
configuration row, so queues made before keep JSON and every drain reads each queue its own way. The drain
decodes packed values natively (``connector/_native/src/translate/from_packed.rs``); producers encode them
natively too (``connector/_native/src/pack.rs``, :func:`pack`); :func:`unpack` reads them back into Python
objects; the Java example producer (``RowTransactionExample``) writes them as well.

Layout (``varint``: unsigned LEB128; ``bytes``: a varint length then that many bytes)::

    value      = 0xFF 0x01 shape body       0xFF never starts UTF-8 text, so no JSON value looks packed
    shape      = 0x01 difference: body = list(old) list(new)
               | 0x02 cells:      body = list
               | 0x03 operations: body = list
    list       = varint(count) cell*count
    cell       = flags bytes(row) bytes(cf) bytes(cq) [bytes(cv)] [bytes(value)]
    flags      = 0x01 a cv follows (none: empty visibility)
               | 0x02 a value follows (none: a delete; every cell of a difference has one)
               | 0x04 text: every field was text (they decode as str, else as bytes)

Nothing may follow the body, and other flag bits must be clear. What ``dumps`` takes, and what ``loads``
gives back (the canonical form, which the Python translators read as they read JSON):

- a difference update ``{"old": [cell, ...], "new": [cell, ...]}`` (either may be missing or null, ``{}``
  changes nothing), a
  ``DifferenceUpdate``-like object with ``old``/``new`` attributes or an ``(old, new)`` pair: comes back
  as ``{"old": [...], "new": [...]}``;
- a cell or a list of cells ``{"row", "cf", "cq", "cv"?, "value"?, "delete"?}``: comes back as a list;
  a delete (``delete`` true, or a null or missing value) as ``{"row", "cf", "cq", "cv"?, "delete": True}``;
- a list of operations ``{"op": "set" | "delete", "row", "cf", "cq", "cv"?, "value"?}`` (or
  ``{"ops": [...]}``): comes back as the list.

Fields are text (str), bytes, or numbers, which are stored as their decimal text (what the translators
write for them). A ``cv`` is left out when empty. Anything else (an empty row, a missing field, a set
without a value, a mixed list) is refused by ``dumps`` with a ``ValueError`` or ``TypeError`` naming it.
"""

from __future__ import annotations

from typing import Any

from connector import _native

MAGIC = b"\xff\x01"
DIFFERENCE, CELLS, OPERATIONS = 1, 2, 3
HAS_CV, HAS_VALUE, TEXT = 1, 2, 4
_FLAGS = HAS_CV | HAS_VALUE | TEXT
_SHAPES = {DIFFERENCE: "difference", CELLS: "cells", OPERATIONS: "operations"}


def is_packed(data: bytes) -> bool:
    """Whether ``data`` starts as a packed value does (JSON never does)."""
    return data[:2] == MAGIC


def pack(obj: Any) -> bytes:
    """The packed bytes of a difference update, a cell or list of cells, or a list of operations (encoded by
    ``connector._native``: a producer's hot path); ``TypeError``/``ValueError`` naming what it cannot hold."""
    return _native.pack_value(obj)


# --- decoding -------------------------------------------------------------------------------------------

class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ValueError(f"packed value ends early at byte {self.pos}")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        n, shift = 0, 0
        while True:
            b = self.byte()
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7
            if shift > 63:
                raise ValueError(f"packed value has an overlong varint at byte {self.pos}")

    def field(self) -> bytes:
        n = self.varint()
        if n > len(self.data) - self.pos:
            raise ValueError(f"packed value ends early: a field of {n} bytes at byte {self.pos}")
        self.pos += n
        return self.data[self.pos - n:self.pos]


def _read_cell(r: _Reader, shape: int) -> dict[str, Any]:
    flags = r.byte()
    if flags & ~_FLAGS:
        raise ValueError(f"packed value has unknown cell flags {flags:#04x} at byte {r.pos - 1}")
    names = ["row", "cf", "cq"] + (["cv"] if flags & HAS_CV else []) + (["value"] if flags & HAS_VALUE else [])
    raw = [r.field() for _ in names]
    if flags & TEXT:
        try:
            fields: list[Any] = [b.decode("utf-8") for b in raw]
        except UnicodeDecodeError as exc:
            raise ValueError(f"packed value has a text field that is not UTF-8: {exc}") from None
    else:
        fields = raw
    cell = dict(zip(names, fields, strict=True))
    if shape == OPERATIONS:
        return {"op": "set" if flags & HAS_VALUE else "delete", **cell}
    if not flags & HAS_VALUE:
        if shape == DIFFERENCE:
            raise ValueError("packed difference update has a cell without a value")
        cell["delete"] = True
    return cell


def unpack(data: bytes) -> Any:
    """The canonical object of packed bytes (see the module's docs); ``ValueError`` for bytes that are not a
    well-formed packed value."""
    data = bytes(data)
    if not is_packed(data):
        raise ValueError(f"not a packed value (starts {data[:2]!r}, expected {MAGIC!r})")
    r = _Reader(data)
    r.pos = len(MAGIC)
    shape = r.byte()
    if shape not in _SHAPES:
        raise ValueError(f"packed value has an unknown shape {shape}")
    lists = [[_read_cell(r, shape) for _ in range(r.varint())] for _ in range(2 if shape == DIFFERENCE else 1)]
    if r.pos != len(data):
        raise ValueError(f"packed value has {len(data) - r.pos} bytes after its end")
    if shape == DIFFERENCE:
        return {"old": lists[0], "new": lists[1]}
    return lists[0]
