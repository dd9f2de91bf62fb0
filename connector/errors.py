"""The root of every error this package raises on purpose: ``except ConnectorError`` catches them all (the CLI
does, and the Spark drain recognises them by name in a task's trace). Each layer's own root derives from it
(``AccumuloError``, ``QueueError``, ``TransactionError``, ...), often beside the built-in it refines
(``ValueError`` for bad input, ``RuntimeError`` for a job that cannot finish)."""

from __future__ import annotations


class ConnectorError(Exception):
    """An error of the export connector; the message says what went wrong and, where it can, what to do."""


def error_names() -> set[str]:
    """The class names of every ``ConnectorError`` subclass defined so far."""
    names: set[str] = set()
    todo: list[type] = [ConnectorError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names
