"""The value translator: one cell per key, holding the key's newest value (a combine queue's path to B).

Name: ``value`` (column family ``value``, empty qualifier) or ``value=CF`` / ``value=CF:CQ``. Each export
``(key, value, seq)`` sets the cell ``row = key, cf, cq`` to the value; a null value deletes the cell.
A value shaped like the combine observer ``changes`` exports, ``{"old": ..., "new": ...}``, stands for
its ``new`` part, so ``combine run --observer changes`` followed by ``drain --translator value=count``
leaves each key's combined value on B. The key must be text, bytes or a number; text, bytes and numbers
are written as they are, other values (true/false, lists, objects) as compact JSON.

Python only (the drain's per-export slow path): it needs the key, which the native translators never
decode, and a combine's exports are few per key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .cell_json import as_bytes
from .core import CellChange, SequencedExport, TranslationError

PREFIX = "value"


@dataclass(frozen=True)
class ValueTranslator:
    """Writes each export's value into the cell ``(key, cf, cq)``."""

    cf: bytes = b"value"
    cq: bytes = b""

    def __call__(self, export: SequencedExport) -> Iterable[CellChange]:
        key = export.key
        if isinstance(key, bool) or not isinstance(key, str | bytes | int | float):
            raise TranslationError(f"value translator: the key must be text, bytes or a number, got {key!r}")
        row = as_bytes(key, "key")
        if not row:
            raise TranslationError("value translator: the key is empty (a row cannot be)")
        value = export.value
        if isinstance(value, Mapping) and "new" in value and set(value) <= {"old", "new"}:
            value = value["new"]  # the `changes` observer's {"old": ..., "new": ...}
        if value is None:
            return [CellChange(row, self.cf, self.cq)]
        if isinstance(value, bool) or not isinstance(value, str | bytes | int | float):
            data = json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")
        else:
            data = as_bytes(value, "value")
        return [CellChange(row, self.cf, self.cq, value=data)]


def parse_value_translator(name: str) -> ValueTranslator | None:
    """The value translator a name asks for (``value``, ``value=CF``, ``value=CF:CQ``), None for other names;
    ``ValueError`` for a malformed one."""
    if name == PREFIX:
        return ValueTranslator()
    if not name.startswith(PREFIX + "="):
        return None
    cf, _, cq = name[len(PREFIX) + 1:].partition(":")
    if not cf:
        raise ValueError(f"translator {name!r}: name the column family, as in value=count or value=count:total")
    return ValueTranslator(cf.encode("utf-8"), cq.encode("utf-8"))
