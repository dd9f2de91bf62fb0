"""Finding user code by name: a built-in name, or ``package.module:attribute`` naming a callable.

Translators, combiners and observers are all named this way (so Spark executors can load them by name).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from connector.settings import OptionError


def callable_from_name(kind: str, name: str, built_in: Mapping[str, Any]) -> Any:
    """The built-in ``kind`` called ``name``, or the callable at ``package.module:attribute``; an
    ``OptionError`` (a ``ValueError``) that says what is wrong otherwise."""
    if name in built_in:
        return built_in[name]
    if ":" not in name:
        raise OptionError(f"unknown {kind} {name!r}: use one of {sorted(built_in)} or module:callable")
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise OptionError(f"{kind} {name!r}: cannot import {module_name!r}: {exc}") from None
    target = getattr(module, attr, None)
    if not callable(target):
        raise OptionError(f"{kind} {name!r}: {module_name} has no callable {attr!r}")
    return target
