"""Moved to :mod:`connector.accumulo.wire.frames`. Only ``connector/cli/queue.py`` still imports these two
names from here; this alias goes once it imports them from ``connector.accumulo.wire.frames``."""

from __future__ import annotations

from .wire.frames import DEFAULT_MAX_FRAME_BYTES, mutation_fits

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "mutation_fits"]
