"""The errors of the jobs: one line each, saying why the drain or the combine cannot run or finish.

A job's own error is a ``RuntimeError`` (the run failed: a rerun may finish it); what its checks find wrong
with what it was given, before any task runs, is the ``...InputError`` beside it, also a ``ValueError``
(:func:`connector.errors.is_input_error`: exit status 2 on the command line)."""

from __future__ import annotations

from connector.errors import ConnectorError, is_input_error


class DrainError(ConnectorError, RuntimeError):
    """The drain cannot finish; the message says why (nothing was deleted that was not exported)."""


class DrainInputError(DrainError, ValueError):
    """What the drain was given is wrong (a translator that does not load, a table that does not exist, a
    queue configuration that disagrees, a secret a cluster refuses): found before any task ran."""


class CombineError(ConnectorError, RuntimeError):
    """The combine job cannot run or finish; the message says why."""


class CombineInputError(CombineError, ValueError):
    """What the combine was given is wrong (a combiner or observer that does not load, a queue not
    initialised as given): found before any task ran."""


def checked_error(exc: BaseException, message: str, failed: type[Exception],
                  wrong_input: type[Exception]) -> Exception:
    """The job's error for ``exc``, met while checking what the job was given: ``wrong_input`` when ``exc`` says
    the input is wrong (or is a plain ``ValueError``), else ``failed``."""
    return (wrong_input if is_input_error(exc) or type(exc) is ValueError else failed)(message)
