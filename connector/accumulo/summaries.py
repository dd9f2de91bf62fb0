"""Which visibility labels a table holds, from Accumulo's own summaries (this project's gateway only).

A scan shows only the cells the user's authorizations can read, and says nothing of the others: a row read by
a user who lacks one of its labels comes back partial, with no error. Accumulo's ``VisibilitySummarizer``
counts, per file, the cells of each visibility expression; the gateway retrieves those counts (flushing the
table first, since summaries cover files only) and answers which expressions its user cannot read
(``unreadableVisibilities``). :func:`ensure_visibility_summary` configures the summarizer on a table;
files written before that carry no summary until they are compacted, and the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import AccumuloError
from .extensions import SUMMARY_VISIBILITY, is_unknown_method, require_extension
from .session import Session

#: the table property that configures the summarizer (its id: accumulo_export_vis)
SUMMARIZER_PROPERTY = "table.summarizer.accumulo_export_vis"
SUMMARIZER_CLASS = "org.apache.accumulo.core.client.summary.summarizers.VisibilitySummarizer"


@dataclass(frozen=True)
class VisibilitySummary:
    """What a table's visibility summaries say: ``hidden`` expressions (cells each) the gateway's user cannot
    read; whether the summarizer is ``configured``; ``files`` summarized, ``files_missing`` (written before
    it was configured), ``files_large`` (summaries too large to keep); expressions not counted
    (``too_many``, ``too_long``)."""

    configured: bool
    hidden: dict[str, int] = field(default_factory=dict)
    files: int = 0
    files_missing: int = 0
    files_large: int = 0
    too_many: int = 0
    too_long: int = 0

    @property
    def complete(self) -> bool:
        """Every cell of every file was counted: ``hidden`` is the whole answer."""
        return self.configured and not (self.files_missing or self.files_large or self.too_many or self.too_long)

    def gaps(self) -> str:
        """Why the answer is not complete, in words (empty when it is)."""
        if not self.configured:
            return "no visibility summarizer is configured on it"
        parts = [f"{n} {what}" for n, what in (
            (self.files_missing, "files written before the summarizer was configured (compact the table once)"),
            (self.files_large, "files whose summaries were too large to keep"),
            (self.too_many, "cells of expressions beyond the summarizer's 1024 distinct ones"),
            (self.too_long, "cells of expressions too long to count")) if n]
        return "; ".join(parts)


def visibility_summary(conn: Session, table: str) -> VisibilitySummary:
    """What ``table``'s visibility summaries say this gateway's user cannot read (see the module)."""
    require_extension(conn, SUMMARY_VISIBILITY, f"checking the visibility labels of table {table!r}")
    try:
        raw: dict[str, int] = dict(conn.call("unreadableVisibilities", table))
    except AccumuloError as exc:
        if is_unknown_method(exc):
            raise AccumuloError(f"checking the visibility labels of table {table!r} needs this project's gateway "
                                f"({exc})") from exc
        raise
    hidden = {k.removeprefix("hidden:"): int(v) for k, v in raw.items() if k.startswith("hidden:")}
    return VisibilitySummary(bool(raw.get("configured")), hidden, int(raw.get("files", 0)),
                             int(raw.get("files.missing", 0)), int(raw.get("files.large", 0)),
                             int(raw.get("tooMany", 0)), int(raw.get("tooLong", 0)))


def ensure_visibility_summary(conn: Session, table: str) -> bool:
    """Configure the visibility summarizer on ``table`` unless it is (needs the permission to alter the
    table); True if it was configured now."""
    if conn.call("getTableProperties", table).get(SUMMARIZER_PROPERTY) == SUMMARIZER_CLASS:
        return False
    conn.call("setTableProperty", table, SUMMARIZER_PROPERTY, SUMMARIZER_CLASS)
    return True
