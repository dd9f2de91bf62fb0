"""What every ``accumulo-export`` command shares at run time: usage errors, exit statuses, SIGTERM handling,
and keeping Spark's own output off the terminal (the option types are in :mod:`connector.cli.options`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from connector.errors import ConnectorError

#: exit status of a drain that dead-lettered entries (without --allow-dead-letters)
EXIT_DEAD_LETTERS = 3
#: exit status of a batch command stopped by SIGTERM (128 + 15)
EXIT_SIGTERM = 143


class UsageError(ConnectorError, ValueError):
    """A wrong argument or input: printed as one ``accumulo-export: error: ...`` line, exit status 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (systemd, Kubernetes, ``kill``): handled where Ctrl-C is, so a stream finishes or
    abandons its micro-batch safely and prints its summary."""


def _on_sigterm(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: let the first stop finish
    raise Terminated()


def handle_sigterm() -> None:
    """From now on SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in the main thread."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


@contextlib.contextmanager
def sigterm_as_event() -> Iterator[threading.Event]:
    """Within the block SIGTERM only sets the event: an exception raised in the middle of a py4j call breaks
    Spark's gateway connection (the query could not be stopped cleanly afterwards)."""
    received = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: received.set())
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class SparkLog:
    path: str
    keep: bool = False


@contextlib.contextmanager
def spark_output(verbose: bool) -> Iterator[SparkLog | None]:
    """Send what the JVMs and Python workers print (start-up lines, task traces) to a log file instead of
    the terminal, so the user sees our lines only; ``-v`` shows everything. The log is removed after a
    run that succeeded."""
    if verbose:
        yield None
        return
    fd, path = tempfile.mkstemp(prefix="accumulo-export-spark-", suffix=".log")
    log_file = SparkLog(path)
    sys.stderr.flush()
    terminal = os.dup(2)
    os.dup2(fd, 2)  # inherited by the JVM that Spark starts, and by everything it starts
    os.close(fd)
    python_stderr = sys.stderr
    sys.stderr = os.fdopen(os.dup(terminal), "w", buffering=1)  # our own lines still reach the terminal
    try:
        yield log_file
    finally:
        sys.stderr.close()
        sys.stderr = python_stderr
        os.dup2(terminal, 2)
        os.close(terminal)
        if not log_file.keep:
            os.unlink(path)
