"""Client mutations as the thriftpy2 structs of the generic (non hot-path) calls: ``updateAndFlush``
(``Connection.write``) and ``updateRowsConditionally`` through ``ConditionalWriter.write_all``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._idl import proxy
from ..errors import InvalidMutationError
from ..mutation import ColumnUpdate, Mutation
from .frames import largest_binary


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


def check_sendable(mutations: Iterable[Mutation]) -> int:
    """Refuse what a server could fail to convert, before anything is sent; return the bytes to send.

    Upstream's proxy converts an ``update`` call row by row and, at the first row it cannot convert, logs
    the error and drops that row and the rest (an ``updateAndFlush`` keeps the rows before it). Cells
    are checked when a :class:`Mutation` is built (visibility, timestamp, types); what remains is a
    mutation without updates, which Accumulo's BatchWriter refuses. The result counts the frame rule of
    :mod:`.frames` (bytes plus the largest binary).
    """
    size = 0
    largest = 0
    for m in mutations:
        if not m.updates:
            raise InvalidMutationError(f"mutation for row {m.row!r} has no updates")
        size += m.size
        largest = max(largest, largest_binary(m.row, m.updates, m.size))
    return size + largest
