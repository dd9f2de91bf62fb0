"""Turning client mutations into the Thrift structs of the generic (non hot-path) calls."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._idl import proxy
from .mutation import ColumnUpdate, Mutation


def column_update_to_thrift(u: ColumnUpdate) -> Any:
    return proxy.ColumnUpdate(
        colFamily=u.cf,
        colQualifier=u.cq,
        colVisibility=u.cv,
        timestamp=u.timestamp,
        value=None if u.delete else u.value,
        deleteCell=True if u.delete else None,
    )


def cells_map(mutations: Iterable[Mutation]) -> dict[bytes, list[Any]]:
    """Mutations as the ``map<row, list<ColumnUpdate>>`` of the proxy, merging mutations of the same row
    (a Thrift map keeps only one entry per row)."""
    out: dict[bytes, list[Any]] = {}
    for m in mutations:
        out.setdefault(m.row, []).extend(column_update_to_thrift(u) for u in m.updates)
    return out
