"""Errors of building and checking a destination from A's rows."""

from __future__ import annotations

from connector.errors import ConnectorError


class SnapshotError(ConnectorError):
    """Base class: a bootstrap or a verify could not do its work (the message says why and what to do)."""


class BootstrapError(SnapshotError, RuntimeError):
    """A bootstrap could not start or go on: another one holds the destination, its lease was lost, the
    plan it would resume disagrees with what was asked, or the final check could not settle."""


class RangeStopped(BootstrapError):
    """A bootstrap's range was left half written because the job is stopping (Ctrl-C, SIGTERM): it is not
    recorded as done, so the next run writes it again, whole (its writes are idempotent: each cell at its row's
    version)."""


class BootstrapInputError(BootstrapError, ValueError):
    """What a bootstrap was given is wrong (no snapshot function, a table that does not exist, a translator
    that does not load, a plan to resume that disagrees with what was asked): found before anything was
    written."""


class VerifyError(SnapshotError, RuntimeError):
    """A verify could not compare (not a difference: differences are its result)."""


class VerifyRefusedError(SnapshotError, ValueError):
    """A verify, a repair or a bootstrap's final check would not be sound as asked: the destination table is
    missing, or another queue or producer table feeds it (the message says what to give instead)."""


class PurgeRefusedError(SnapshotError, ValueError):
    """A purge of a destination's tombstones was refused before it changed anything: the destination table does
    not exist, another queue feeds it, two rows of A imply one of its cells, or a bootstrap of it is unfinished."""
