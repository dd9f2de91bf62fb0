"""The difference translator: an update carries the old and the new cells of a derived record.

It deletes the cells only in old, puts the cells that are new or whose value changed, and leaves
unchanged cells alone (the export-queue recipe's ``CountUpdate(old, new)`` shape). Unlike the upstream
recipe it keeps each cell's visibility. It never emits a put and a delete for the same cell.

Value shape (JSON): ``{"old": [cell, ...], "new": [cell, ...]}``, a cell being
``{"row", "cf", "cq", "cv" (optional), "value"}``; ``old`` or ``new`` may be missing or null (insert,
removal). A ``DifferenceUpdate`` or a 2-tuple ``(old, new)`` is accepted too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .cell_json import cell_key, cell_value
from .core import CellChange, SequencedExport, TranslationError


@dataclass(frozen=True)
class DifferenceUpdate:
    old: list[Mapping[str, Any]] = field(default_factory=list)
    new: list[Mapping[str, Any]] = field(default_factory=list)


def _cells(cells: Any, where: str) -> dict[tuple[bytes, bytes, bytes, bytes], bytes]:
    if cells is None:
        return {}
    if not isinstance(cells, list | tuple):
        raise TranslationError(f"{where} must be a list of cells, not {type(cells).__name__}")
    out: dict[tuple[bytes, bytes, bytes, bytes], bytes] = {}
    for i, cell in enumerate(cells):
        key = cell_key(cell, f"{where}[{i}]")
        out[key] = cell_value(cell, f"{where}[{i}]")
    return out


def difference(export: SequencedExport) -> Iterable[CellChange]:
    """Translate one difference update into deletes of vanished cells and puts of new or changed ones."""
    value = export.value
    old_cells: Any
    new_cells: Any
    if isinstance(value, DifferenceUpdate):
        old_cells, new_cells = value.old, value.new
    elif isinstance(value, Mapping):
        unknown = set(value) - {"old", "new"}
        if unknown:
            raise TranslationError(f"difference update has unknown fields {sorted(unknown)}; expected old, new")
        old_cells, new_cells = value.get("old"), value.get("new")
    elif isinstance(value, list | tuple) and len(value) == 2:
        old_cells, new_cells = value
    else:
        raise TranslationError(f"difference update must be {{'old': [...], 'new': [...]}}, got {value!r}")
    old = _cells(old_cells, "old")
    new = _cells(new_cells, "new")
    changes = [CellChange(*key) for key in old if key not in new]
    changes += [CellChange(*key, value=v) for key, v in new.items() if old.get(key) != v]
    return changes
