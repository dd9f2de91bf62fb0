"""Finding a translator by name: ``difference``, ``replicator``, ``cells`` or ``module:callable``."""

from __future__ import annotations

from connector.plugins import callable_from_name

from .cell_rows import cell_rows
from .core import Translator
from .difference import difference
from .replicator import replicator

BUILT_IN: dict[str, Translator] = {"difference": difference, "replicator": replicator, "cells": cell_rows}


def translator_from_name(name: str) -> Translator:
    """The built-in translator of that name, or the callable at ``package.module:attribute``."""
    return callable_from_name("translator", name, BUILT_IN)  # type: ignore[no-any-return]
