"""Finding a translator by name: ``difference``, ``replicator``, ``cells``, ``value[=CF[:CQ]]`` or
``module:callable``."""

from __future__ import annotations

from connector.plugins import callable_from_name

from .cell_rows import cell_rows
from .core import Translator
from .difference import difference
from .replicator import replicator
from .value import ValueTranslator, parse_value_translator

BUILT_IN: dict[str, Translator] = {"difference": difference, "replicator": replicator, "cells": cell_rows,
                                   "value": ValueTranslator()}


def translator_from_name(name: str) -> Translator:
    """The built-in translator of that name (``value=CF[:CQ]`` names the value translator's cell), or the
    callable at ``package.module:attribute``."""
    value = parse_value_translator(name)
    if value is not None:
        return value
    return callable_from_name("translator", name, BUILT_IN)  # type: ignore[no-any-return]
