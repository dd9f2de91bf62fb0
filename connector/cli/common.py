"""What every ``accumulo-export`` command shares at run time: the exit statuses (one table, ``EXIT_STATUSES``),
usage errors and failed runs, SIGTERM handling, and keeping Spark's own output off the terminal (the option
types are in :mod:`connector.cli.options`, the engine choice in :mod:`connector.cli.engine`)."""

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

from connector.errors import ConnectorError, is_input_error

# --- exit statuses: the one table (the CLI's epilog and the table in docs/reference.md are made from it) -------

#: done
EXIT_OK = 0
#: done, but what was checked or combined is not all right
EXIT_NOT_CLEAN = 1
#: a usage or input error, and nothing else
EXIT_USAGE = 2
#: a drain dead-lettered entries (without --allow-dead-letters)
EXIT_DEAD_LETTERS = 3
#: a wait that timed out
EXIT_WAIT_TIMED_OUT = 4
#: a run that failed for another reason than its input
EXIT_FAILED = 5
#: interrupted by Ctrl-C (128 + SIGINT)
EXIT_INTERRUPTED = 130
#: a batch command stopped by SIGTERM (128 + 15)
EXIT_SIGTERM = 143

#: every exit status of ``accumulo-export`` and what it means
EXIT_STATUSES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "done; also a stream stopped by SIGTERM (how systemd and Kubernetes stop it), and a batch drain that "
              "drained what was queued when it started and left what came since for the next run"),
    (EXIT_NOT_CLEAN, "done, but not clean: verify found differences (or a bootstrap's final check could not fix "
                     "them all), rows failed their snapshot, a combine left keys failing, a relay left malformed "
                     "outbox cells"),
    (EXIT_USAGE, "a usage or input error, found before anything ran: a bad flag or value, an unknown or misspelt "
                 "name, a table that does not exist, a bad configuration or secret (one line on stderr; the same "
                 "command fails the same way until it is fixed)"),
    (EXIT_DEAD_LETTERS, "a drain dead-lettered entries (--allow-dead-letters: 0)"),
    (EXIT_WAIT_TIMED_OUT, "wait: the commit did not reach every destination within --timeout"),
    (EXIT_FAILED, "the run failed: a cluster did not answer (or had no tablet server within --server-wait), a "
                  "lease was lost, a final check could not settle, a task failed (one line on stderr; nothing "
                  "unexported was deleted: run it again once the cause is gone)"),
    (EXIT_INTERRUPTED, "interrupted by Ctrl-C"),
    (EXIT_SIGTERM, "a batch command stopped by SIGTERM (it stops cleanly; run it again to go on)"),
)


def exit_status_lines(width: int = 110) -> str:
    """The exit statuses as the CLI's help shows them: one wrapped paragraph per status."""
    import textwrap

    return "\n".join(textwrap.fill(text, width, initial_indent=f"  {status:>3}  ", subsequent_indent=" " * 7)
                     for status, text in EXIT_STATUSES)


def exit_status_markdown() -> str:
    """The exit statuses as the table of docs/reference.md."""
    return "\n".join(["| status | meaning |", "|---|---|",
                      *(f"| {status} | {text} |" for status, text in EXIT_STATUSES)]) + "\n"


def exit_status_of(exc: ConnectorError) -> int:
    """The exit status of a command that ended with an error of ours: a usage error for what the user gave
    wrong (:func:`connector.errors.is_input_error`), a failed run for anything else."""
    return EXIT_USAGE if is_input_error(exc) else EXIT_FAILED


class UsageError(ConnectorError, ValueError):
    """A wrong argument or input: printed as one ``accumulo-export: error: ...`` line, exit status 2."""


class RunFailed(ConnectorError, RuntimeError):
    """A command's run failed for another reason than its input (a cluster that does not answer, say): one
    ``accumulo-export: error: ...`` line, exit status 5."""


def cluster_error(exc: ConnectorError, where: str) -> ConnectorError:
    """``exc``, met talking to a cluster, as the command's error naming ``where``: a usage error when it says
    the user's input is wrong (a table that does not exist, a refused secret), else a failed run."""
    return (UsageError if is_input_error(exc) else RunFailed)(f"{where}: {exc}")


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
