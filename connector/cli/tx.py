"""``accumulo-export tx init|relay|status|seq``: a producer table set up, the outboxes row-transaction producers
leave, relayed and shown, and the seq a commit made now gets (a timestamp for writing to a destination by hand)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from connector.accumulo import AccumuloError, Connection
from connector.clusters_config import cluster
from connector.combine.layout import CONFIG_QUALIFIER as COMBINE_CONFIG_QUALIFIER
from connector.combine.layout import OUTBOX_FAMILY as COMBINE_OUTBOX_FAMILY
from connector.export import current_seq
from connector.queue.layout import CONFIG_FAMILY, CONFIG_QUALIFIER
from connector.transactions.layout import DEFAULT_OUTBOX_FAMILY, TxLayout

from .common import EXIT_NOT_CLEAN, UsageError, cluster_error
from .options import Help


def register_tx_commands(sub: Any) -> None:
    """Add the ``tx`` command to the ``accumulo-export`` parser's subcommands."""
    fmt = Help
    t = sub.add_parser("tx", help="outboxes of row-transaction producers: relay and status; the current seq",
                       description="Row transactions (connector.transactions) commit a row's cells and an outbox "
                                   "of its exports and updates together; the producer then relays the outbox into "
                                   "the queues. These commands relay what a crashed producer left, and show it; "
                                   "'seq' prints the sequence number a commit made now gets."
                       ).add_subparsers(dest="tx_command", required=True)
    t.add_parser("seq", formatter_class=fmt, help="print the sequence number a commit made now gets",
                 description="Print the sequence number a commit made now gets at least: this host's clock in "
                             "microseconds. Cells on a destination carry seqs as their timestamps, so a put or "
                             "delete written there by hand takes this as its timestamp "
                             "(docs/operations.md: Writing to a destination by hand).")
    for name, text in (("init", "create a producers' table or set up an existing one: the outbox's locality "
                                "group and the visibility summarizer bootstrap and verify rely on (safe to repeat)"),
                       ("relay", "copy the outbox cells of a table into their queues, then delete them "
                                 "(repeating it is harmless)"),
                       ("status", "outbox cells waiting in a table: count, rows, destination tables, oldest")):
        c = t.add_parser(name, formatter_class=fmt, help=text, description=text[0].upper() + text[1:] + ".")
        c.add_argument("--cluster", required=True, help="cluster name from the config file")
        c.add_argument("--table", required=True, help="the producers' table")
        c.add_argument("--outbox-family", default=DEFAULT_OUTBOX_FAMILY.decode(),
                       help="the outbox column family the producers use")
        if name == "status":
            c.add_argument("--json", action="store_true", help="print JSON instead of text")
        if name == "init":
            c.add_argument("--compact", action="store_true",
                           help="then compact the table once, so that files written before the set-up carry "
                                "visibility summaries too")


def cmd_tx(args: argparse.Namespace) -> int:
    from connector.transactions import outbox_status, relay_table
    from connector.transactions.status import holds_row_transactions

    if args.tx_command == "seq":
        print(current_seq())
        return 0

    gateway = cluster(args.cluster)
    layout = TxLayout(outbox_family=args.outbox_family)
    if args.tx_command == "init":
        return _init(gateway, args, layout)
    try:
        with gateway.connect() as conn:
            if not conn.table_exists(args.table):
                raise UsageError(f"table {args.table!r} does not exist on {gateway.describe()}")
            if not holds_row_transactions(conn, args.table, layout):  # else a relay of it would quietly find 0
                raise UsageError(_not_a_producer_table(conn, args.table, layout, gateway.describe()))
            if args.tx_command == "relay":
                stats = relay_table(conn, args.table, layout)
                print(json.dumps({"relayed": stats.relayed, "exports": stats.exports, "updates": stats.updates,
                                  "malformed": stats.malformed}))
                for error in stats.errors:
                    print(f"accumulo-export: malformed outbox cell left in place: {error}", file=sys.stderr)
                return EXIT_NOT_CLEAN if stats.malformed else 0
            st = outbox_status(conn, args.table, layout)
    except AccumuloError as exc:
        raise cluster_error(exc, gateway.describe()) from None
    if args.json:
        print(json.dumps({"table": st.table, "cells": st.cells, "rows": st.rows, "by_target": dict(st.by_target),
                          "oldest_seq": st.oldest_seq, "age_seconds": st.age_seconds, "malformed": st.malformed}))
    else:
        age = f", oldest {st.age_seconds:.1f} s old (seq {st.oldest_seq})" if st.age_seconds is not None else ""
        targets = ", ".join(f"{n} to {t}" for t, n in sorted(st.by_target.items()))
        print(f"table {st.table}: {st.cells} outbox cells waiting in {st.rows} rows{age}"
              + (f" ({targets})" if targets else "") + (f"; {st.malformed} malformed" if st.malformed else ""))
    return 0


def _init(gateway: Any, args: argparse.Namespace, layout: TxLayout) -> int:
    from connector.accumulo.summaries import visibility_summary
    from connector.transactions import RowTransactions

    try:
        with gateway.connect() as conn:
            created = not conn.table_exists(args.table)
            RowTransactions(conn, args.table, layout=layout).init()
            if args.compact:
                conn.compact_table(args.table, wait=True)
            summary = visibility_summary(conn, args.table)
    except AccumuloError as exc:
        raise cluster_error(exc, gateway.describe()) from None
    state = "ready" if summary.complete else f"not yet complete ({summary.gaps()})"
    print(f"table {args.table} {'created' if created else 'set up'}: outbox family in its own locality group, "
          f"visibility summaries {state}")
    return 0


def _not_a_producer_table(conn: Connection, table: str, layout: TxLayout, where: str) -> str:
    """Why ``table`` is refused: what a producer table looks like, and what this table holds instead."""
    outbox = layout.outbox_family.decode()
    version = f"{layout.version_family.decode()}:{layout.version_qualifier.decode()}"
    queues, combines = _queues_in(conn, table)
    held = ""
    if combines:
        names = ", ".join(repr(c) for c in combines)
        held = (f"; it is the table of combine queue {names}, whose row transactions keep their outbox in family "
                f"{COMBINE_OUTBOX_FAMILY.decode()!r} (--outbox-family {COMBINE_OUTBOX_FAMILY.decode()}; "
                "'combine run' relays it too)")
    elif queues:
        names = ", ".join(repr(q) for q in queues)
        held = (f"; it is the table of export queue {names}, which producers' outboxes feed: name the producers' "
                "own table")
    return (f"table {table!r} on {where} holds no row transactions with outbox family {outbox!r}: a producer "
            f"table (the one RowTransactions(conn, table) commits to) has that family in a locality group of its "
            f"own (RowTransactions.init sets it) or version cells {version!r}{held}")


def _queues_in(conn: Connection, table: str) -> tuple[list[str], list[str]]:
    """The export queues and combine queues whose configuration rows ``table`` holds."""
    queues: list[str] = []
    combines: list[str] = []
    columns = [(CONFIG_FAMILY, CONFIG_QUALIFIER), (CONFIG_FAMILY, COMBINE_CONFIG_QUALIFIER)]
    for cell in conn.scan(table, columns=columns, batch_size=100):
        if not cell.row.endswith(b"#config"):
            continue
        name = cell.row[:-len(b"#config")].decode("utf-8", "replace")
        (combines if cell.cq == COMBINE_CONFIG_QUALIFIER else queues).append(name)
        if len(queues) + len(combines) >= 5:
            break
    return queues, combines
