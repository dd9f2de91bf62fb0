"""Spark's filters on the ``accumulo`` source's columns, turned into what its scans read (Spark 4.1+, option
``pushdown``): a pure function of the filters and the rows and columns the options asked for.

Pushed, and then not evaluated by Spark again (the scan returns exactly the cells they keep):

- on ``row``, ``=``, ``<=>``, ``<``, ``<=``, ``>``, ``>=`` with a binary value: the scanned rows are narrowed;
- on ``cf``, ``=`` and ``IN`` (without the ``columns`` option): only those families are fetched;
- on ``cq``, ``=`` and ``IN`` beside such a ``cf`` filter: only those (family, qualifier) pairs are fetched
  (up to ``MAX_COLUMNS`` pairs);
- ``IS NOT NULL`` on any column (no column is ever null).

Narrowed but left for Spark too: ``row IN (...)`` (the scan reads from its least to its greatest value).
Every other filter is Spark's alone. Filters are ANDed (Spark's contract), so each one only narrows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

#: the most (family, qualifier) pairs fetched for ``cf`` and ``cq`` filters; past it ``cq`` stays Spark's
MAX_COLUMNS = 1000

Column = bytes | tuple[bytes, bytes]


@dataclass(frozen=True)
class Scan:
    """What a scan reads: rows from ``start`` (inclusive) to before ``stop`` (exclusive; None: unbounded),
    ``columns`` as the ``columns`` option gives them (None: all), ``empty`` when no cell can match."""

    start: bytes | None
    stop: bytes | None
    columns: tuple[Column, ...] | None
    empty: bool = False


def push_filters(filters: Sequence[Filter], scan: Scan) -> tuple[Scan, list[Filter]]:
    """``scan`` narrowed by the ``filters`` it can take, and the filters Spark must still evaluate (the very
    objects given, as Spark requires)."""
    start, stop = scan.start, scan.stop
    families: set[bytes] | None = None
    qualifiers: set[bytes] | None = None
    cq_filters: list[Filter] = []
    left: list[Filter] = []
    for f in filters:
        attribute: tuple[str, ...] = getattr(f, "attribute", ())  # Not(...) has a child instead
        column = attribute[0] if len(attribute) == 1 else None
        values = _values(f)
        if isinstance(f, IsNotNull) and column is not None:
            continue
        if column == "row" and values is not None:
            if isinstance(f, EqualTo | EqualNullSafe):
                start, stop = _later(start, values[0]), _earlier(stop, values[0] + b"\x00")
            elif isinstance(f, GreaterThan):
                start = _later(start, values[0] + b"\x00")
            elif isinstance(f, GreaterThanOrEqual):
                start = _later(start, values[0])
            elif isinstance(f, LessThan):
                stop = _earlier(stop, values[0])
            elif isinstance(f, LessThanOrEqual):
                stop = _earlier(stop, values[0] + b"\x00")
            elif isinstance(f, In) and values:
                start, stop = _later(start, min(values)), _earlier(stop, max(values) + b"\x00")
                left.append(f)
            else:
                left.append(f)
        elif column == "cf" and values is not None and scan.columns is None and isinstance(f, EqualTo | In):
            families = set(values) if families is None else families & set(values)
        elif column == "cq" and values is not None and scan.columns is None and isinstance(f, EqualTo | In):
            qualifiers = set(values) if qualifiers is None else qualifiers & set(values)
            cq_filters.append(f)
        else:
            left.append(f)
    columns = scan.columns
    empty = scan.empty or (start is not None and stop is not None and start >= stop)
    if families is not None:
        empty = empty or not families
        if qualifiers is not None and len(families) * len(qualifiers) <= MAX_COLUMNS:
            columns = tuple((fam, q) for fam in sorted(families) for q in sorted(qualifiers))
            empty = empty or not qualifiers
        else:
            columns = tuple(sorted(families))
            left.extend(cq_filters)
    else:
        left.extend(cq_filters)
    return Scan(start, stop, columns, empty), left


def _values(f: Filter) -> list[bytes] | None:
    """The filter's binary value(s), or None when it has none or any is not binary."""
    raw: Any = getattr(f, "value", None)
    items = list(raw) if isinstance(f, In) else [raw]
    if not all(isinstance(v, bytes | bytearray) for v in items):
        return None
    return [bytes(v) for v in items]


def _later(a: bytes | None, b: bytes) -> bytes:
    return b if a is None else max(a, b)


def _earlier(a: bytes | None, b: bytes) -> bytes:
    return b if a is None else min(a, b)
