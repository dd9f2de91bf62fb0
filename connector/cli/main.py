"""The ``accumulo-export`` command: its parser and ``main()``. It only wires the layers together; each
command lives in a module of its own (``queue``, ``drain``, ``combine``, ``tx``); see ``--help`` of each.

Clusters are named in a config file (see :mod:`connector.clusters_config`); secrets come from the files or
environment variables that file names, never from a flag.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import platform
import sys
from collections.abc import Sequence

from connector.errors import ConnectorError
from connector.settings import check_environment

from .bootstrap import cmd_bootstrap, cmd_verify, register_bootstrap_commands
from .combine import cmd_combine, register_combine_commands
from .common import EXIT_INTERRUPTED, EXIT_SIGTERM, Terminated, exit_status_lines, exit_status_of, handle_sigterm
from .drain import cmd_drain, register_drain_command
from .options import Parser
from .purge import cmd_purge, register_purge_command
from .queue import cmd_queue, register_queue_commands
from .tx import cmd_tx, register_tx_commands
from .wait import cmd_wait, register_wait_command

log = logging.getLogger("accumulo-export")

DESCRIPTION = "Export committed queue entries from cluster A into Accumulo tables on cluster B, with Spark."
EPILOG = """clusters:
  --cluster/--source/--dest name clusters of a TOML file: accumulo-export/clusters.toml under
  $XDG_CONFIG_HOME (default ~/.config), or the file that ACCUMULO_EXPORT_CONFIG names (`make cluster`
  writes one for the embedded clusters):
      [clusters.A]
      host = "a-gateway-host"
      port = 42424
      secret_file = "/etc/accumulo-export/a.secret"   # or: secret_env = "A_SECRET"
  Secrets come only from that file or variable (or ACCUMULO_GATEWAY_SECRET_FILE / ACCUMULO_GATEWAY_SECRET
  when a cluster names neither), never from a flag, and are never printed.

examples:
  accumulo-export queue init   --cluster A --table exports --queue idx --buckets 64
  accumulo-export queue add    --cluster A --table exports --queue idx < updates.jsonl
  accumulo-export queue status --cluster A --table exports --queue idx
  accumulo-export drain --source A --dest B --table exports --queue idx --dest-table index --create-dest-table
  accumulo-export drain --source A --dest B --table exports --queue idx --dest-table index --stream
  accumulo-export bootstrap --source A --table exports --queue idx --producer-table counts --dest B \\
      --dest-table index --snapshot app:snapshot      (B from A's rows; the stream above runs first)
  accumulo-export verify --source A --table exports --queue idx --producer-table counts --dest B \\
      --dest-table index --snapshot app:snapshot [--repair]
  accumulo-export wait --cluster A --table exports --queue idx --seq 1764312345678901   (read-your-writes)
  accumulo-export queue dead-letters --cluster A --table exports --queue idx [--requeue]
  accumulo-export tx status --cluster A --table counts      (outboxes of row-transaction producers)
  accumulo-export tx relay  --cluster A --table counts

exit statuses (docs/reference.md: Exit statuses):
{EXIT_STATUS_LINES}
-v shows Spark's own output and tracebacks.
""".replace("{EXIT_STATUS_LINES}", exit_status_lines())


def version_text() -> str:
    """What ``--version`` prints: the installed connector's version and the Python and PySpark it runs with
    (read from the installed packages' metadata, so nothing heavy is imported)."""
    def installed(distribution: str) -> str:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (f"accumulo-export {installed('accumulo-export-connector')} (Python {platform.python_version()}, "
            f"PySpark {installed('pyspark')})")


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="accumulo-export", description=DESCRIPTION, epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="show Spark's output, debug logs and tracebacks")
    p.add_argument("--version", action="version", version=version_text(),
                   help="print the connector's version, with Python's and PySpark's, and exit")
    sub = p.add_subparsers(dest="command", required=True,
                           metavar="{queue,drain,bootstrap,verify,wait,purge-tombstones,combine,tx}")
    register_queue_commands(sub)
    register_drain_command(sub)
    register_bootstrap_commands(sub)
    register_wait_command(sub)
    register_purge_command(sub)
    register_tx_commands(sub)
    register_combine_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    handle_sigterm()
    try:
        check_environment()  # a misspelt ACCUMULO_GATEWAY_SECRET_FILE must not quietly mean another secret
        command = {"queue": cmd_queue, "drain": cmd_drain, "bootstrap": cmd_bootstrap, "verify": cmd_verify,
                   "wait": cmd_wait, "purge-tombstones": cmd_purge, "combine": cmd_combine, "tx": cmd_tx}[args.command]
        return command(args)
    except ConnectorError as exc:  # ours, raised on purpose: one line; anything else is a bug, with its trace
        if args.verbose:
            log.exception("failed")
        notes = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
        print(f"accumulo-export: error: {exc}{notes}", file=sys.stderr)
        return exit_status_of(exc)
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"accumulo-export: {'stopped by SIGTERM' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_SIGTERM if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`queue status | head`): not an error; stop Python complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

