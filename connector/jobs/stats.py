"""Counters as Arrow rows: how a round's task hands its counters back, whatever engine ran it.

A task returns one counters dataclass (``DrainStats``, ``CombineStats``); an engine that runs tasks elsewhere
(Spark) carries them as one Arrow row each. The schema follows the dataclass's fields in order: ints become
int64, floats float64, lists (of error messages) JSON text.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any, TypeVar

import pyarrow as pa

S = TypeVar("S")


def _kind(field: Any) -> str:
    if field.default_factory is list:
        return "json"
    return "float" if isinstance(field.default, float) else "int"


_TYPES = {"int": pa.int64(), "float": pa.float64(), "json": pa.string()}
_DDL = {"int": "long", "float": "double", "json": "string"}


def stats_schema(stats_type: type) -> pa.Schema:
    """The Arrow schema of one row of ``stats_type`` (a dataclass of counters)."""
    return pa.schema([(f.name, _TYPES[_kind(f)]) for f in fields(stats_type)])


def stats_ddl(stats_type: type) -> str:
    """The same as a Spark DDL string (``entries long, ..., seconds double``)."""
    return ", ".join(f"{f.name} {_DDL[_kind(f)]}" for f in fields(stats_type))


def stats_batch(stats: Any) -> pa.RecordBatch:
    """One counters object as a one-row batch of :func:`stats_schema`."""
    row = asdict(stats)
    for f in fields(stats):
        if _kind(f) == "json":
            row[f.name] = json.dumps(row[f.name])
    return pa.RecordBatch.from_pylist([row], schema=stats_schema(type(stats)))


def stats_from_row(stats_type: type[S], row: dict[str, Any]) -> S:
    """A counters object from one row (a dict of :func:`stats_schema` columns; unknown columns are ignored)."""
    values = {}
    for f in fields(stats_type):  # type: ignore[arg-type]
        if f.name in row:
            values[f.name] = json.loads(row[f.name]) if _kind(f) == "json" else row[f.name]
    return stats_type(**values)
