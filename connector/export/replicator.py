"""The replicator translator: replays a transaction log of sets and deletes.

Value shape (JSON): a list of operations ``{"op": "set" | "delete", "row", "cf", "cq", "cv" (optional),
"value" (for set)}`` in the order the transaction made them. Several operations on one cell collapse to
the last one: the upstream recipe emits both a delete and a put at the same timestamp, and Accumulo then
lets the delete win, whatever the order was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .cell_json import cell_key, cell_value
from .core import CellChange, SequencedExport, TranslationError


def replicator(export: SequencedExport) -> Iterable[CellChange]:
    """Translate a transaction log into one put or delete per touched cell (the last operation wins)."""
    log: Any = export.value
    if isinstance(log, Mapping) and "ops" in log:
        log = log["ops"]
    if not isinstance(log, list | tuple):
        raise TranslationError(f"replicator value must be a list of operations, got {type(log).__name__}")
    last: dict[tuple[bytes, bytes, bytes, bytes], bytes | None] = {}
    for i, op in enumerate(log):
        where = f"operation {i}"
        if not isinstance(op, Mapping) or op.get("op") not in ("set", "delete"):
            raise TranslationError(f"{where}: expected {{'op': 'set'|'delete', ...}}, got {op!r}")
        key = cell_key(op, where)
        last.pop(key, None)  # re-insert so the dict keeps the order of the last operations
        last[key] = cell_value(op, where) if op["op"] == "set" else None
    return [CellChange(*key, value=v) for key, v in last.items()]
