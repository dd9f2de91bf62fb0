"""Counters that add up field by field: a job's statistics summed across batches, tasks and rounds."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar, Self


class FieldCounters:
    """A mixin for dataclasses of counters: ``a + b`` adds every field, ``a += b`` too, and ``sum()`` of them
    starts from its default 0. A list field (the first errors) is concatenated and cut to ``MAX_ERRORS``."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    MAX_ERRORS: ClassVar[int] = 20

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        summed = {}
        for f in fields(self):
            value = getattr(self, f.name) + getattr(other, f.name)
            summed[f.name] = value[:self.MAX_ERRORS] if isinstance(value, list) else value
        return type(self)(**summed)

    def __radd__(self, other: object) -> Self:
        if other == 0:
            return self
        return NotImplemented
