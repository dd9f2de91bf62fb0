"""Finding a translator by name: ``difference``, ``replicator``, ``cells`` or ``module:callable``."""

from __future__ import annotations

import importlib

from .cell_rows import cell_rows
from .core import Translator
from .difference import difference
from .replicator import replicator

BUILT_IN: dict[str, Translator] = {"difference": difference, "replicator": replicator, "cells": cell_rows}


def translator_from_name(name: str) -> Translator:
    """The built-in translator of that name, or the callable at ``package.module:attribute``."""
    if name in BUILT_IN:
        return BUILT_IN[name]
    if ":" not in name:
        raise ValueError(f"unknown translator {name!r}: use one of {sorted(BUILT_IN)} or module:callable")
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"translator {name!r}: cannot import {module_name!r}: {exc}") from None
    target = getattr(module, attr, None)
    if not callable(target):
        raise ValueError(f"translator {name!r}: {module_name} has no callable {attr!r}")
    return target
