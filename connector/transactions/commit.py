"""Sending row commits: conditional mutations on rows' version cells, many rows per call.

Shared by :class:`~connector.transactions.RowTransactions` and the combine pass. A status per row comes back:
ACCEPTED, REJECTED (the version changed: re-read and run again), UNKNOWN (the server may or may not have
applied it; Accumulo guarantees it will not apply later, so re-reading the row settles it), VIOLATED or
INVISIBLE_VISIBILITY (errors). A dropped connection makes every row of the call UNKNOWN.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from connector.accumulo import ConditionalMutation, ConditionalWriter, Connection
from connector.accumulo.conditional import write_conditional

from .layout import TxLayout

log = logging.getLogger(__name__)

ACCEPTED, REJECTED, UNKNOWN = "ACCEPTED", "REJECTED", "UNKNOWN"


class Committer:
    """Writes row commits to one table through one conditional writer (opened on first use)."""

    def __init__(self, conn: Connection, table: str, layout: TxLayout) -> None:
        self.conn, self.table, self.layout = conn, table, layout
        self._writer: ConditionalWriter | None = None

    def write(self, mutations: Sequence[ConditionalMutation]) -> dict[bytes, str]:
        """{row: status} for one conditional mutation per row; a row missing from the reply is UNKNOWN."""
        if not mutations:
            return {}
        if self._writer is None:
            self._writer = self.conn.conditional_writer(self.table)
        statuses = write_conditional(self._writer, mutations)  # a lost answer: every row UNKNOWN
        return {m.row: statuses.get(m.row, UNKNOWN) for m in mutations}

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
