"""Finding user code by name: a built-in name, or ``package.module:attribute`` naming a callable.

Translators, combiners and observers are all named this way (so Spark executors can load them by name).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from connector.settings import OptionError


def object_from_name(kind: str, name: str, built_in: Mapping[str, Any]) -> Any:
    """The built-in ``kind`` called ``name``, or the object at ``package.module:attribute`` (``attribute`` may
    be dotted: ``module:Class.factory``); an ``OptionError`` (a ``ValueError``) that says what is wrong
    otherwise. The one loader of user code by name."""
    if name in built_in:
        return built_in[name]
    if ":" not in name:
        raise OptionError(f"unknown {kind} {name!r}: use one of {sorted(built_in)} or module:callable")
    module_name, _, attr_path = name.partition(":")
    if not module_name or not attr_path:
        raise OptionError(f"{kind} {name!r}: expected 'module:callable'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise OptionError(f"{kind} {name!r}: cannot import {module_name!r}: {exc}") from None
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise OptionError(f"{kind} {name!r}: {module_name} has no attribute {attr_path!r}") from None
    return target


def callable_from_name(kind: str, name: str, built_in: Mapping[str, Any]) -> Any:
    """:func:`object_from_name`, which must be callable."""
    target = object_from_name(kind, name, built_in)
    if not callable(target):
        raise OptionError(f"{kind} {name!r}: {name.partition(':')[0]} has no callable {name.partition(':')[2]!r}")
    return target
