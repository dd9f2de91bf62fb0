"""The errors of the jobs: one line each, saying why the drain or the combine cannot run or finish."""

from __future__ import annotations

from connector.errors import ConnectorError


class DrainError(ConnectorError, RuntimeError):
    """The drain cannot finish; the message says why (nothing was deleted that was not exported)."""


class CombineError(ConnectorError, RuntimeError):
    """The combine job cannot run or finish; the message says why."""
