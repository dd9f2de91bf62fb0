"""The exporter contract: a batch of ``SequencedExport`` in, durable and idempotent writes out."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import pyarrow as pa

from connector.errors import ConnectorError
from connector.serializers import DEFAULT_SERIALIZER

MAX_SEQ = (1 << 63) - 1  # Accumulo timestamps are signed 64-bit; the sequence becomes the timestamp


def current_seq() -> int:
    """The sequence number a commit made now gets at least: this host's wall clock in microseconds (a row
    transaction's seq is ``max(this, the row's previous seq + 1)``). Every cell on a destination carries its
    export's seq as its Accumulo timestamp, so a write by hand to a destination takes its timestamp from here
    (docs/operations.md: Writing to a destination by hand); a write without one gets the tablet server's milliseconds,
    about a thousand times smaller than any seq, and has no effect."""
    return time.time_ns() // 1000


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
    """Receives batches of exports: the contract the drain relies on.

    ``export_batch`` takes a batch of serialized exports (an Arrow batch with columns ``key`` binary,
    ``value`` binary, ``seq`` int64, and the names of the serializers that made them). It must tolerate
    duplicates and any arrival order, return only once everything it wrote is durable, and raise on any
    failure of the batch (never hang, never swallow): the caller deletes the batch's queue entries only after
    it returned. An export that cannot be written (its bytes do not deserialize, its translator refuses it)
    is the entry's fault, not the batch's: it is left out and returned as an :class:`EntryFailure` (in batch
    order), and the drain dead-letters its entry.

    ``export`` is the per-export convenience: a list of ``SequencedExport`` written the same way, raising
    ``BatchTranslationError`` (naming every export that cannot be translated, before writing anything) where
    ``export_batch`` returns failures. An exporter written with ``export`` only becomes an ``Exporter`` with
    :func:`connector.export.adapter.batch_exporter`.
    """

    def export_batch(self, exports: pa.RecordBatch, *, key_serializer: str = DEFAULT_SERIALIZER,
                     value_serializer: str = DEFAULT_SERIALIZER) -> list[EntryFailure]: ...

    def export(self, exports: Sequence[SequencedExport]) -> None: ...


@runtime_checkable
class CountsCells(Protocol):
    """An exporter that also says how many destination cells (puts, deletes, tombstones) the calling thread's
    last ``export``/``export_batch`` wrote: the drain adds them to its ``cells`` counter (and metrics). An
    exporter without it is counted as writing none."""

    def cells_written_by_last_call(self) -> int: ...


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


#: a destination cell: (row, cf, cq, cv)
CellKey = tuple[bytes, bytes, bytes, bytes]


def last_change_per_cell(changes: Iterable[CellChange]) -> dict[CellKey, bytes | None]:
    """The same-cell collapse: the last change to each cell (its value, None for a delete), in the order of
    those last changes. All of an export's changes share one timestamp, so a put and a delete of one cell
    must never both be written. (The native translators do the same in Rust, for whole batches.)"""
    last: dict[CellKey, bytes | None] = {}
    for change in changes:
        last.pop(change.cell, None)  # re-inserted: ordered by each cell's last change
        last[change.cell] = change.value
    return last


class Translator(Protocol):
    """Turns one export into the destination cell changes it implies."""

    def __call__(self, export: SequencedExport) -> Iterable[CellChange]: ...


class TranslationError(ConnectorError, ValueError):
    """An export's value does not have the shape its translator expects; the message says what is wrong."""


class EntryFailure(NamedTuple):
    """An export of a batch that was not written: its ``entry`` (index in the batch), ``kind`` ("undecodable": its
    value could not be deserialized; "translation": its translator rejected it) and the ``reason``."""

    entry: int
    kind: Literal["undecodable", "translation"]
    reason: str


class BatchTranslationError(TranslationError):
    """Some exports of a batch could not be translated, so nothing of the batch was written.

    ``failures`` maps the index of each failed export in the batch to its reason, so that a caller can set
    those exports aside (the drain dead-letters them) and export the rest.
    """

    def __init__(self, failures: dict[int, str]) -> None:
        first = min(failures)
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        super().__init__(f"export {first} of the batch: {failures[first]}{more}")
        self.failures = dict(failures)

    def __reduce__(self) -> tuple[type, tuple[dict[int, str]]]:  # picklable across Spark workers
        return (type(self), (self.failures,))


#: What a translator raises for an export it cannot handle (the export's fault, so it is dead-lettered).
#: Anything else (a lost connection inside a user translator, say) fails the whole batch, to be retried.
DATA_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError, KeyError, IndexError, AttributeError)


def translation_reason(exc: Exception) -> str:
    """The reason recorded for an export that failed translation: a TranslationError's own message, or the
    exception type and message of anything else a (user) translator raised."""
    return str(exc) if isinstance(exc, TranslationError) else f"{type(exc).__name__}: {exc}"
