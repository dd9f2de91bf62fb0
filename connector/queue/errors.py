"""Errors of the export queue."""

from __future__ import annotations

from connector.errors import ConnectorError


class QueueError(ConnectorError):
    """Base class: the export queue was misconfigured or found data it cannot handle."""


class QueueConfigError(QueueError, ValueError):
    """A queue's configuration is invalid, missing, unreadable, or disagrees with the one stored."""


class MalformedEntryError(QueueError, ValueError):
    """A queue row or value that cannot be decoded. ``row`` is the raw row, ``reason`` says what is wrong."""

    def __init__(self, row: bytes, reason: str) -> None:
        super().__init__(f"malformed queue entry {row!r}: {reason}")
        self.row = row
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[bytes, str]]:  # picklable across Spark workers
        return (type(self), (self.row, self.reason))


class EntryTranslationError(QueueError, ValueError):
    """Fail-fast stopped at an entry its translator rejects; nothing of that entry's batch was deleted.

    ``row``, ``key`` and ``seq`` name the entry, ``reason`` is the translator's message."""

    def __init__(self, row: bytes, key: object, seq: int, reason: str) -> None:
        super().__init__(f"entry {row!r} (key {key!r}, seq {seq}) cannot be translated: {reason}; "
                         "fail-fast: nothing of its batch was deleted")
        self.row, self.key, self.seq, self.reason = row, key, seq, reason

    def __reduce__(self) -> tuple[type, tuple[bytes, object, int, str]]:
        return (type(self), (self.row, self.key, self.seq, self.reason))
