"""``accumulo-export tx relay|status``: the outboxes row-transaction producers leave, relayed and shown."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from connector.accumulo import AccumuloError
from connector.clusters_config import cluster
from connector.transactions.layout import DEFAULT_OUTBOX_FAMILY

from .common import UsageError
from .options import Help


def register_tx_commands(sub: Any) -> None:
    """Add the ``tx`` command to the ``accumulo-export`` parser's subcommands."""
    fmt = Help
    t = sub.add_parser("tx", help="outboxes of row-transaction producers: relay and status",
                       description="Row transactions (connector.transactions) commit a row's cells and an outbox "
                                   "of its exports and updates together; the producer then relays the outbox into "
                                   "the queues. These commands relay what a crashed producer left, and show it."
                       ).add_subparsers(dest="tx_command", required=True)
    for name, text in (("relay", "copy the outbox cells of a table into their queues, then delete them "
                                 "(repeating it is harmless)"),
                       ("status", "outbox cells waiting in a table: count, rows, destination tables, oldest")):
        c = t.add_parser(name, formatter_class=fmt, help=text, description=text[0].upper() + text[1:] + ".")
        c.add_argument("--cluster", required=True, help="cluster name from the config file")
        c.add_argument("--table", required=True, help="the producers' table")
        c.add_argument("--outbox-family", default=DEFAULT_OUTBOX_FAMILY.decode(),
                       help="the outbox column family the producers use")
        if name == "relay":
            c.add_argument("--min-age", type=float, default=0.0, metavar="SECONDS",
                           help="leave outbox cells younger than this (a live producer relays them itself)")
        else:
            c.add_argument("--json", action="store_true", help="print JSON instead of text")


def cmd_tx(args: argparse.Namespace) -> int:
    from connector.transactions import TxLayout, outbox_status, relay_table

    gateway = cluster(args.cluster)
    layout = TxLayout(outbox_family=args.outbox_family)
    try:
        with gateway.connect() as conn:
            if not conn.table_exists(args.table):
                raise UsageError(f"table {args.table!r} does not exist on {gateway.describe()}")
            if args.tx_command == "relay":
                stats = relay_table(conn, args.table, layout, max(0.0, args.min_age))
                print(json.dumps({"relayed": stats.relayed, "exports": stats.exports, "updates": stats.updates,
                                  "young": stats.young, "malformed": stats.malformed}))
                for error in stats.errors:
                    print(f"accumulo-export: malformed outbox cell left in place: {error}", file=sys.stderr)
                return 1 if stats.malformed else 0
            st = outbox_status(conn, args.table, layout)
    except AccumuloError as exc:
        raise UsageError(f"{gateway.describe()}: {exc}") from None
    if args.json:
        print(json.dumps({"table": st.table, "cells": st.cells, "rows": st.rows, "by_target": dict(st.by_target),
                          "oldest_seq": st.oldest_seq, "age_seconds": st.age_seconds, "malformed": st.malformed}))
    else:
        age = f", oldest {st.age_seconds:.1f} s old (seq {st.oldest_seq})" if st.age_seconds is not None else ""
        targets = ", ".join(f"{n} to {t}" for t, n in sorted(st.by_target.items()))
        print(f"table {st.table}: {st.cells} outbox cells waiting in {st.rows} rows{age}"
              + (f" ({targets})" if targets else "") + (f"; {st.malformed} malformed" if st.malformed else ""))
    return 0

