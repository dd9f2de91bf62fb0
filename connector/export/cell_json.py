"""Reading destination cells out of export values (JSON-decoded dicts), shared by the translators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connector.accumulo.mutation import to_bytes

from .core import TranslationError


def as_bytes(value: Any, what: str) -> bytes:
    """Text or bytes as bytes; numbers as their decimal text (JSON values often are numbers)."""
    kind = type(value)
    if kind is str:  # the common case, checked first: this runs for every field of every cell
        return value.encode("utf-8")
    if kind is bytes:
        return value
    if isinstance(value, bytes | str | bytearray | memoryview):
        return to_bytes(value, what)
    if isinstance(value, bool) or value is None:
        raise TranslationError(f"{what} must be text or bytes, not {value!r}")
    if isinstance(value, int | float):
        return str(value).encode("utf-8")
    raise TranslationError(f"{what} must be text or bytes, not {type(value).__name__}")


def cell_key(cell: Any, where: str) -> tuple[bytes, bytes, bytes, bytes]:
    """(row, cf, cq, cv) of a cell given as a mapping with row, cf, cq and optional cv."""
    if not isinstance(cell, Mapping):
        raise TranslationError(f"{where}: a cell must be an object with row, cf, cq, value; got {cell!r}")
    try:
        row, cf, cq = cell["row"], cell["cf"], cell["cq"]
    except KeyError:
        missing = [k for k in ("row", "cf", "cq") if k not in cell]
        raise TranslationError(f"{where}: cell {dict(cell)!r} lacks {', '.join(missing)}") from None
    try:
        key = as_bytes(row, "row"), as_bytes(cf, "cf"), as_bytes(cq, "cq"), as_bytes(cell.get("cv") or b"", "cv")
    except TranslationError as exc:  # name the cell only when something is wrong: this is a hot path
        raise TranslationError(f"{where}: {exc}") from None
    if not key[0]:
        raise TranslationError(f"{where}: cell has an empty row")
    return key


def cell_value(cell: Mapping[str, Any], where: str) -> bytes:
    if "value" not in cell:
        raise TranslationError(f"{where}: cell {dict(cell)!r} lacks value")
    return as_bytes(cell["value"], f"{where}: value")
