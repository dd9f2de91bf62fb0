"""Errors of the export queue."""

from __future__ import annotations


class QueueError(Exception):
    """Base class: the export queue was misconfigured or found data it cannot handle."""


class MalformedEntryError(QueueError, ValueError):
    """A queue row or value that cannot be decoded. ``row`` is the raw row, ``reason`` says what is wrong."""

    def __init__(self, row: bytes, reason: str) -> None:
        super().__init__(f"malformed queue entry {row!r}: {reason}")
        self.row = row
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[bytes, str]]:  # picklable across Spark workers
        return (type(self), (self.row, self.reason))
