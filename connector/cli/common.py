"""What every ``accumulo-export`` command shares: usage errors, exit statuses, SIGTERM handling, argument
types, table-name checks and keeping Spark's own output off the terminal."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from connector.accumulo import Connection
from connector.errors import ConnectorError

EXIT_DEAD_LETTERS = 3


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


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (and where help is), not the usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"accumulo-export: error: {message} (see '{self.prog} --help')\n")


class Help(argparse.HelpFormatter):
    """Shows an option's default where it has a real one (not None, not a flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def port_number(text: str) -> int:
    """A TCP port to listen on: 1-65535."""
    port = int_at_least(1)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port (1-65535), got {port}")
    return port


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text}")
    return value


_TABLE_NAME = re.compile(r"(?:\w+\.)?\w+", re.ASCII)


def check_table_name(name: str, flag: str, where: str) -> None:
    """Refuse a table name Accumulo would refuse, before anything runs (Spark would start first, then fail
    with a Java exception), naming the flag and the cluster."""
    if not _TABLE_NAME.fullmatch(name):
        raise UsageError(f"{flag} {name!r} is not a valid table name on {where}: Accumulo allows letters, digits "
                         "and _ only, optionally after a namespace and a dot (ns.table)")


def check_namespace(conn: Connection, table: str, flag: str, where: str) -> None:
    """A table about to be created needs its namespace to exist (Accumulo does not create namespaces)."""
    namespace, dot, _ = table.rpartition(".")
    if dot and not conn.namespace_exists(namespace):
        raise UsageError(f"{flag} {table!r}: namespace {namespace!r} does not exist on {where}; create it first "
                         f"(Accumulo shell: createnamespace {namespace}) or use a table outside it")


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
