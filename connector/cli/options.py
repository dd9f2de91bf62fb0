"""The option types and checks the ``accumulo-export`` commands share: a parser whose errors are one line,
help that shows defaults, numbers with bounds, the queue's flags, and table names Accumulo would refuse."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable
from typing import Any, NoReturn

from connector.accumulo import Connection
from connector.queue.layout import MAX_BUCKETS
from connector.settings import argparse_type, closest, integer, port, seconds

from .common import UsageError


class Parser(argparse.ArgumentParser):
    """argparse, strict and brief: a usage error is one line naming the problem (and where help is), not the
    usage text; an unknown flag names the closest flag of the command given (never one of another command);
    a missing required flag names the misspelling given for it; abbreviated flags are refused (a prefix that
    is unique today would silently change meaning when a flag is added)."""

    #: the namespace attribute where the innermost parser that ran names itself (a subcommand's, if any)
    _USED = "_cli_parser_used"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._given: list[str] = []

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = [str(a) for a in (args or [])]
        parsed, extras = super().parse_known_args(args, namespace)
        if not hasattr(parsed, self._USED):  # a subcommand's parser returns first: the innermost one names itself
            setattr(parsed, self._USED, self)
        return parsed, extras

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = self.parse_known_args(args, namespace)
        used = getattr(parsed, self._USED, self)
        delattr(parsed, self._USED)
        if extras:
            used.exit(2, f"accumulo-export: error: {used._unknown(extras)} (see '{used.prog} --help')\n")
        return parsed

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required: "):
            message += self._misspelt_required(message.removeprefix("the following arguments are required: "))
        self.exit(2, f"accumulo-export: error: {message} (see '{self.prog} --help')\n")

    def _flags(self) -> set[str]:
        return {s for action in self._actions for s in action.option_strings if s.startswith("--")}

    def _unknown(self, extras: list[str]) -> str:
        flags = [e.split("=", 1)[0] for e in extras if e.startswith("-")]
        if not flags:
            return f"unexpected arguments: {' '.join(extras)}"
        near = closest(flags[0], self._flags())
        return f"unknown flag {flags[0]!r}" + (f" (did you mean {near!r}?)" if near else "")

    def _misspelt_required(self, missing: str) -> str:
        """For a missing required flag, the flag given that misspells it (`` ('--sorce' given: did you mean
        '--source'?)``), or nothing."""
        wanted = {m.strip() for m in missing.split(",")}
        known = self._flags()
        for token in self._given:
            flag = token.split("=", 1)[0]
            if flag.startswith("--") and flag not in known:
                near = closest(flag, known)
                # a close likeness only: a flag of another command ('--source' to wait) is no misspelling
                if near in wanted and difflib.SequenceMatcher(None, flag, near).ratio() >= 0.75:
                    return f" ({flag!r} given: did you mean {near!r}?)"
        return ""


class Help(argparse.HelpFormatter):
    """Shows an option's default where it has a real one (not None, not a flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def int_at_least(minimum: int) -> Callable[[str], int]:
    return argparse_type(integer(minimum), "integer")


#: a queue's bucket count: 1 to the layout's bound
bucket_count = argparse_type(integer(1, MAX_BUCKETS), "integer")
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
    p.add_argument("--buckets", type=bucket_count,
                   help="number of buckets (required by init; later commands read it from the queue)")
    p.add_argument("--key-serializer", help="json (default at init), bytes or module:callable")
    p.add_argument("--value-serializer", help="json (default at init), packed (compact cells for the built-in "
                   "translators, docs/producing.md: Queue value encodings), bytes or module:callable")
