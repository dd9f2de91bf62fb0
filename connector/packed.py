"""The ``packed`` queue value encoding: the built-in translators' inputs (difference updates, cell lists,
operation logs) in a binary layout without field names, about a third of their JSON.

A queue chooses it at ``queue init --value-serializer packed``; the choice is stored in the queue's
configuration row, so queues made before keep JSON and every drain reads each queue its own way. The drain
decodes packed values natively (``connector/_native/src/translate/packed.rs``), this module is the Python
encoder and decoder, and the Java example producer (``RowTransactionExample``) writes it too.

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

from collections.abc import Mapping
from typing import Any

MAGIC = b"\xff\x01"
DIFFERENCE, CELLS, OPERATIONS = 1, 2, 3
HAS_CV, HAS_VALUE, TEXT = 1, 2, 4
_FLAGS = HAS_CV | HAS_VALUE | TEXT
_SHAPES = {DIFFERENCE: "difference", CELLS: "cells", OPERATIONS: "operations"}


def is_packed(data: bytes) -> bool:
    """Whether ``data`` starts as a packed value does (JSON never does)."""
    return data[:2] == MAGIC


# --- encoding -------------------------------------------------------------------------------------------

def _field(value: Any, what: str) -> tuple[bytes, bool]:
    """A field's bytes, and whether it was text."""
    kind = type(value)
    if kind is str:
        return value.encode("utf-8"), True
    if kind is bytes:
        return value, False
    if isinstance(value, bytearray | memoryview):
        return bytes(value), False
    if isinstance(value, bool) or value is None:
        raise TypeError(f"{what} must be text, bytes or a number, not {value!r}")
    if isinstance(value, int | float):
        return str(value).encode("utf-8"), True
    raise TypeError(f"{what} must be text, bytes or a number, not {type(value).__name__}")


def _varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _cell(out: bytearray, cell: Any, where: str, value_needed: bool, delete: bool) -> None:
    if not isinstance(cell, Mapping):
        raise TypeError(f"{where}: a cell must be a mapping with row, cf, cq, value; got {type(cell).__name__}")
    missing = [k for k in ("row", "cf", "cq") if k not in cell]
    if missing:
        raise ValueError(f"{where}: the cell lacks {', '.join(missing)}")
    parts = [_field(cell["row"], f"{where}: row"), _field(cell["cf"], f"{where}: cf"),
             _field(cell["cq"], f"{where}: cq")]
    if not parts[0][0]:
        raise ValueError(f"{where}: the cell has an empty row")
    flags = 0
    cv = cell.get("cv")
    if cv:  # as the translators read it: any empty cv is no visibility
        parts.append(_field(cv, f"{where}: cv"))
        flags |= HAS_CV
    if not delete:
        if cell.get("value") is None:
            if value_needed:
                raise ValueError(f"{where}: the cell lacks a value")
        else:
            parts.append(_field(cell["value"], f"{where}: value"))
            flags |= HAS_VALUE
    if all(text for _, text in parts):
        flags |= TEXT
    out.append(flags)
    for data, _ in parts:
        _varint(out, len(data))
        out += data


def _list(out: bytearray, cells: Any, where: str) -> None:
    if cells is None:
        cells = ()
    if not isinstance(cells, list | tuple):
        raise TypeError(f"{where} must be a list of cells, not {type(cells).__name__}")
    _varint(out, len(cells))
    for i, cell in enumerate(cells):
        _cell(out, cell, f"{where}[{i}]", value_needed=True, delete=False)


def pack(obj: Any) -> bytes:
    """The packed bytes of a difference update, a cell or list of cells, or a list of operations."""
    out = bytearray(MAGIC)
    if isinstance(obj, Mapping) and ("old" in obj or "new" in obj or not obj) and "row" not in obj:
        unknown = set(obj) - {"old", "new"}
        if unknown:
            raise ValueError(f"difference update has unknown fields {sorted(unknown)}; expected old, new")
        out.append(DIFFERENCE)
        _list(out, obj.get("old"), "old")
        _list(out, obj.get("new"), "new")
        return bytes(out)
    if hasattr(obj, "old") and hasattr(obj, "new") and not isinstance(obj, Mapping | list | tuple):
        out.append(DIFFERENCE)
        _list(out, obj.old, "old")
        _list(out, obj.new, "new")
        return bytes(out)
    if isinstance(obj, Mapping) and "ops" in obj and "row" not in obj:
        obj = obj["ops"]
        if not isinstance(obj, list | tuple):
            raise TypeError(f"ops must be a list of operations, not {type(obj).__name__}")
    elif isinstance(obj, Mapping):
        obj = [obj]
    if isinstance(obj, list | tuple) and len(obj) == 2 and all(x is None or isinstance(x, list | tuple) for x in obj):
        out.append(DIFFERENCE)
        _list(out, obj[0], "old")
        _list(out, obj[1], "new")
        return bytes(out)
    if not isinstance(obj, list | tuple):
        raise TypeError(f"packed takes a difference update, cells or operations, not {type(obj).__name__}")
    operations = bool(obj) and isinstance(obj[0], Mapping) and "op" in obj[0]
    out.append(OPERATIONS if operations else CELLS)
    _varint(out, len(obj))
    for i, cell in enumerate(obj):
        where = f"operation {i}" if operations else f"cell {i}"
        if not isinstance(cell, Mapping):
            raise TypeError(f"{where} must be a mapping, not {type(cell).__name__}")
        if operations:
            op = cell.get("op")
            if op not in ("set", "delete"):
                raise ValueError(f"{where}: op must be 'set' or 'delete', got {op!r}")
            _cell(out, cell, where, value_needed=True, delete=op == "delete")
        else:
            if "op" in cell:
                raise ValueError(f"{where}: a list mixes operations and cells")
            _cell(out, cell, where, value_needed=False, delete=bool(cell.get("delete")))
    return bytes(out)


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
