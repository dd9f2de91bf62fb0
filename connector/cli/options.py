"""The option types and checks the ``accumulo-export`` commands share: a parser whose errors are one line,
help that shows defaults, numbers with bounds, the queue's flags, and table names Accumulo would refuse."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, NoReturn

from connector.accumulo import Connection
from connector.settings import argparse_type, closest, integer, port, seconds

from .common import UsageError


class Parser(argparse.ArgumentParser):
    """argparse, strict and brief: a usage error is one line naming the problem (and where help is), not the
    usage text; an unknown flag names the closest known one; abbreviated flags are refused (a prefix that
    is unique today would silently change meaning when a flag is added)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            message = self._unknown(message.removeprefix("unrecognized arguments: ").split())
        self.exit(2, f"accumulo-export: error: {message} (see '{self.prog} --help')\n")

    def _unknown(self, extras: list[str]) -> str:
        flags = [e.split("=", 1)[0] for e in extras if e.startswith("-")]
        if not flags:
            return f"unexpected arguments: {' '.join(extras)}"
        near = closest(flags[0], _all_flags(self))
        return f"unknown flag {flags[0]!r}" + (f" (did you mean {near!r}?)" if near else "")


def _all_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every flag of ``parser`` and of its subcommands' parsers."""
    flags: set[str] = set()
    for action in parser._actions:
        flags.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _all_flags(sub)
    return flags


class Help(argparse.HelpFormatter):
    """Shows an option's default where it has a real one (not None, not a flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def int_at_least(minimum: int) -> Callable[[str], int]:
    return argparse_type(integer(minimum), "integer")


#: a TCP port to listen on: 1-65535
port_number = argparse_type(port, "port")
#: a number of seconds > 0
positive_seconds = argparse_type(seconds, "seconds")


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


def source_and_destination_args(p: argparse.ArgumentParser) -> None:
    """The flags of a command that reads a queue on A and works on a destination table on B."""
    queue_args(p, "--source")
    p.add_argument("--dest", required=True, help="destination cluster name from the config file")
    p.add_argument("--dest-table", required=True, help="destination table")


def queue_args(p: argparse.ArgumentParser, cluster_flag: str = "--cluster") -> None:
    """The flags naming an export queue (and the cluster holding it, under ``cluster_flag``)."""
    p.add_argument(cluster_flag, required=True, help="cluster name from the config file")
    p.add_argument("--table", required=True, help="the table holding the queue")
    p.add_argument("--queue", required=True, help="queue id (the row prefix)")
    p.add_argument("--buckets", type=int_at_least(1),
                   help="number of buckets (required by init; later commands read it from the queue)")
    p.add_argument("--key-serializer", help="json (default at init), bytes or module:callable")
    p.add_argument("--value-serializer", help="json (default at init), packed (compact cells for the built-in "
                   "translators, docs/producing.md: Queue value encodings), bytes or module:callable")
