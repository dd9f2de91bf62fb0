"""The root of every error this package raises on purpose: ``except ConnectorError`` catches them all (the CLI
does, and the Spark drain recognises them by name in a task's trace). Each layer's own root derives from it
(``AccumuloError``, ``QueueError``, ``TransactionError``, ...), often beside the built-in it refines
(``ValueError`` for bad input, ``RuntimeError`` for a job that cannot finish): :func:`is_input_error` tells the
two kinds apart, and the CLI's exit status follows it."""

from __future__ import annotations

from typing import ClassVar


class ConnectorError(Exception):
    """An error of the export connector; the message says what went wrong and, where it can, what to do."""

    #: the caller's input is wrong, although the class is no ValueError: a cluster refusing what was asked (a
    #: table that does not exist, a secret or permission refused, TLS settings that do not match)
    input_error: ClassVar[bool] = False


def is_input_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the caller's input is wrong (a flag, a name, a table, a configuration, a secret: a
    ``ConnectorError`` that is a ``ValueError``, or whose class sets ``input_error``), so that running again
    unchanged fails again; any other error of ours says a run failed (a cluster not answering, a lease lost, a
    task that failed), which a rerun may finish."""
    return isinstance(exc, ConnectorError) and (isinstance(exc, ValueError) or exc.input_error)


def error_names() -> set[str]:
    """The class names of every ``ConnectorError`` subclass defined so far."""
    names: set[str] = set()
    todo: list[type] = [ConnectorError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names
