"""What scans return and take: cells, keys, ranges, column selections and iterator settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ._idl import MAX_TIMESTAMP, proxy
from .mutation import BytesLike, to_bytes


class Cell(NamedTuple):
    """One key/value read from Accumulo."""

    row: bytes
    cf: bytes
    cq: bytes
    cv: bytes
    ts: int
    value: bytes


@dataclass(frozen=True)
class Key:
    """A position in a table; missing parts sort first (timestamp sorts descending)."""

    row: bytes
    cf: bytes = b""
    cq: bytes = b""
    cv: bytes = b""
    ts: int = MAX_TIMESTAMP

    @classmethod
    def of(cls, cell: Cell) -> Key:
        return cls(cell.row, cell.cf, cell.cq, cell.cv, cell.ts)

    def to_thrift(self):  # noqa: ANN201 - thriftpy2 struct
        return proxy.Key(row=self.row, colFamily=self.cf, colQualifier=self.cq, colVisibility=self.cv,
                         timestamp=self.ts)


@dataclass(frozen=True)
class Range:
    """A range of keys. Build it with ``Range.exact_row``, ``Range.prefix``, ``Range.rows`` or ``Range()``."""

    start: Key | None = None
    start_inclusive: bool = True
    stop: Key | None = None
    stop_inclusive: bool = False

    @classmethod
    def rows(cls, start: BytesLike | None = None, end: BytesLike | None = None, *,
             start_inclusive: bool = True, end_inclusive: bool = True) -> Range:
        """All cells of the rows from ``start`` to ``end`` (None: unbounded), like Java's Range(Text, Text)."""
        start_key = None
        if start is not None:
            s = to_bytes(start, "start row")
            start_key = Key(s if start_inclusive else s + b"\x00")
        stop_key = None
        if end is not None:
            e = to_bytes(end, "end row")
            stop_key = Key(e + b"\x00" if end_inclusive else e)
        return cls(start_key, True, stop_key, False)

    @classmethod
    def exact_row(cls, row: BytesLike) -> Range:
        """All cells of one row."""
        return cls.rows(row, row)

    @classmethod
    def prefix(cls, prefix: BytesLike) -> Range:
        """All cells of rows that start with ``prefix``."""
        p = to_bytes(prefix, "row prefix")
        end = following_prefix(p)
        return cls(Key(p), True, Key(end) if end is not None else None, False)

    def after(self, key: Key) -> Range:
        """The rest of this range strictly after ``key`` (used to resume a scan)."""
        return Range(key, False, self.stop, self.stop_inclusive)

    def to_thrift(self):  # noqa: ANN201 - thriftpy2 struct
        return proxy.Range(
            start=self.start.to_thrift() if self.start else None,
            startInclusive=self.start_inclusive,
            stop=self.stop.to_thrift() if self.stop else None,
            stopInclusive=self.stop_inclusive,
        )


def following_prefix(prefix: bytes) -> bytes | None:
    """The smallest row greater than every row starting with ``prefix`` (None when there is none)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


@dataclass(frozen=True)
class IteratorSetting:
    """A server-side iterator to run at scan or compaction time."""

    priority: int
    name: str
    iterator_class: str
    properties: dict[str, str] = field(default_factory=dict)

    def to_thrift(self):  # noqa: ANN201 - thriftpy2 struct
        return proxy.IteratorSetting(priority=self.priority, name=self.name, iteratorClass=self.iterator_class,
                                     properties=dict(self.properties))


def columns_to_thrift(columns):  # noqa: ANN001, ANN201
    """Columns as a list of ``cf`` or ``(cf, cq)``; None means all columns."""
    if columns is None:
        return None
    out = []
    for col in columns:
        if isinstance(col, tuple):
            cf, cq = col
            out.append(proxy.ScanColumn(colFamily=to_bytes(cf, "column family"),
                                        colQualifier=to_bytes(cq, "column qualifier")))
        else:
            out.append(proxy.ScanColumn(colFamily=to_bytes(col, "column family")))
    return out
