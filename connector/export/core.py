"""The exporter contract: a batch of ``SequencedExport`` in, durable and idempotent writes out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

MAX_SEQ = (1 << 63) - 1  # Accumulo timestamps are signed 64-bit; the sequence becomes the timestamp


@dataclass(frozen=True, slots=True)
class SequencedExport:
    """One committed change to export: ``key`` and ``value`` as the producer added them, and ``seq``, the
    producing transaction's sequence number (its start timestamp). Newer ``seq`` wins on the destination."""

    key: Any
    value: Any
    seq: int

    def __post_init__(self) -> None:
        if not isinstance(self.seq, int) or isinstance(self.seq, bool) or not 0 <= self.seq <= MAX_SEQ:
            raise ValueError(f"seq must be an int in [0, 2**63-1], got {self.seq!r}")


@runtime_checkable
class Exporter(Protocol):
    """Receives batches of exports.

    ``export`` must tolerate duplicates and any arrival order, return only once everything it wrote is
    durable, and raise on any failure (never hang, never swallow). The caller deletes the exported queue
    entries only after ``export`` returned.
    """

    def export(self, exports: Sequence[SequencedExport]) -> None: ...


@dataclass(frozen=True, slots=True)
class CellChange:
    """What a translator asks for: set a destination cell to ``value``, or delete it (``value`` None).

    Translators never choose timestamps: the exporter writes every change at the export's ``seq``.
    """

    row: bytes
    cf: bytes
    cq: bytes
    cv: bytes = b""
    value: bytes | None = None

    @property
    def is_delete(self) -> bool:
        return self.value is None

    @property
    def cell(self) -> tuple[bytes, bytes, bytes, bytes]:
        return (self.row, self.cf, self.cq, self.cv)


class Translator(Protocol):
    """Turns one export into the destination cell changes it implies."""

    def __call__(self, export: SequencedExport) -> Iterable[CellChange]: ...


class TranslationError(ValueError):
    """An export's value does not have the shape its translator expects; the message says what is wrong."""
