"""The cells translator, for DataFrames: each export carries ready-made destination cells.

Value shape: one cell or a list of cells ``{"row", "cf", "cq", "cv" (optional), "value", "delete"
(optional bool)}``, as a DataFrame with columns row, cf, cq, cv, value, delete yields them. A cell with
``delete`` true (or a null value) becomes a delete.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .cell_json import as_bytes, cell_key
from .core import CellChange, SequencedExport, TranslationError


def cell_rows(export: SequencedExport) -> Iterable[CellChange]:
    value: Any = export.value
    cells = [value] if isinstance(value, Mapping) else value
    if not isinstance(cells, list | tuple):
        raise TranslationError(f"cells value must be a cell or a list of cells, got {type(value).__name__}")
    last: dict[tuple[bytes, bytes, bytes, bytes], bytes | None] = {}
    for i, cell in enumerate(cells):
        where = f"cell {i}"
        key = cell_key(cell, where)
        delete = bool(cell.get("delete")) or cell.get("value") is None
        last.pop(key, None)
        last[key] = None if delete else as_bytes(cell["value"], f"{where}: value")
    return [CellChange(*key, value=v) for key, v in last.items()]
