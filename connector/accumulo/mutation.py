"""Mutations in the pyaccumulo shape: ``Mutation(row).put(cf, cq, value, ...)`` and ``.delete(cf, cq, ...)``."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ._idl import MAX_TIMESTAMP
from .errors import InvalidMutationError
from .visibility import VisibilityError, check_visibility

BytesLike = bytes | str


def to_bytes(value: BytesLike | bytearray | memoryview, what: str) -> bytes:
    """Accept bytes or text (UTF-8) for a row, column or value; refuse anything else by name."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise InvalidMutationError(f"{what} must be bytes or str, not {type(value).__name__}")


class ColumnUpdate(NamedTuple):
    """One put or delete inside a mutation. ``timestamp`` None lets the tablet server choose."""

    cf: bytes
    cq: bytes
    cv: bytes
    timestamp: int | None
    value: bytes
    delete: bool


_new_update = tuple.__new__  # builds a ColumnUpdate without NamedTuple's argument parsing
_checked_visibility = lru_cache(maxsize=4096)(check_visibility)  # the same expressions recur


class Mutation:
    """All changes to one row, sent together. Each put/delete may carry its own timestamp."""

    __slots__ = ("row", "updates", "size")

    def __init__(self, row: BytesLike) -> None:
        self.row = to_bytes(row, "row")
        if not self.row:
            raise InvalidMutationError("row must not be empty")
        self.updates: list[ColumnUpdate] = []
        #: estimated bytes on the wire, used to size writer chunks
        self.size = len(self.row) + 8

    def put(
        self,
        cf: BytesLike,
        cq: BytesLike,
        value: BytesLike = b"",
        visibility: BytesLike = b"",
        timestamp: int | None = None,
    ) -> Mutation:
        """Set the cell (cf, cq, visibility) to ``value`` at ``timestamp``; without one the tablet server stamps
        it with its own time in milliseconds, below every cell of an export destination (whose timestamps are
        seqs in microseconds): there the put is hidden by the cell's newer version
        (docs/operations.md: Writing to a destination by hand)."""
        # the common case (bytes everywhere) is checked inline: this is the hot path of writing
        if type(value) is not bytes:
            value = to_bytes(value, "value")
        self._add(cf, cq, visibility, timestamp, value, False)
        return self

    def delete(
        self,
        cf: BytesLike,
        cq: BytesLike,
        visibility: BytesLike = b"",
        timestamp: int | None = None,
    ) -> Mutation:
        """Delete the cell: hides every version at or below ``timestamp``. Without one the tablet server stamps
        the delete with its own time in milliseconds, so it hides only versions written at or below that time:
        all of them in a table whose timestamps are the servers' own, none of an export destination's cells
        (their timestamps are seqs in microseconds, about a thousand times larger). On a destination give the
        cell's own timestamp, or ``connector.export.current_seq()``
        (docs/operations.md: Writing to a destination by hand)."""
        self._add(cf, cq, visibility, timestamp, b"", True)
        return self

    def _add(self, cf: BytesLike, cq: BytesLike, cv: BytesLike, ts: int | None, value: bytes,
             delete: bool) -> None:
        if type(cf) is not bytes:
            cf = to_bytes(cf, "column family")
        if type(cq) is not bytes:
            cq = to_bytes(cq, "column qualifier")
        if type(cv) is not bytes:
            cv = to_bytes(cv, "visibility")
        if ts is not None and (type(ts) is not int or not 0 <= ts <= MAX_TIMESTAMP):
            raise InvalidMutationError(f"timestamp must be an int in [0, 2**63-1], got {ts!r}")
        if cv:
            try:
                _checked_visibility(cv)
            except VisibilityError as exc:
                raise InvalidMutationError(f"row {self.row!r}: {exc}") from None
        self.updates.append(_new_update(ColumnUpdate, (cf, cq, cv, ts, value, delete)))
        self.size += len(cf) + len(cq) + len(cv) + len(value) + 16

    def __repr__(self) -> str:
        return f"Mutation(row={self.row!r}, updates={len(self.updates)})"
