"""The row-transaction protocol: the cells a transaction commits beside a row's own cells, and what a relay
makes of them. Python producers (:mod:`connector.transactions`), the combine pass and Java producers
(``integration/gateway/harness/src/main/java/exportconnector/examples/RowTransactions.java``) all follow it::

    a row of a producer's table (defaults; the families are configurable, see TxLayout)
      !tx:v        version: ASCII "<seq>" or "<seq> <token> [<older token> ...]", ts = seq; the condition of
                   every commit
      !txo:e:<queue table>:<entry row>             outbox: one export, value = the serialized export value
      !txo:u:<combine table>:<update id>:<key row>  outbox: one combine update, value = the serialized delta
      <cf>:<cq>    the row's own cells, ts = seq of the transaction that wrote them
    the config row of a queue fed by outboxes (<qid>#config or <cid>#config)
      x:<table>    JSON {"version": [family, qualifier], "outbox": family}: outboxes of <table> feed this queue

A commit is ONE conditional mutation on the row: condition "the version cell still holds the value read"
(absent, if none was read), then the row's own cells at timestamp = seq, the new version and one outbox cell
per export or update, every one at timestamp = seq. ``seq = max(wall-clock µs, previous seq + 1)``, so a
row's sequence numbers rise strictly and its exports replay on cluster B in commit order. Outbox cells carry
no visibility.

A relay copies each outbox cell to its queue, idempotently, then deletes it at its own timestamp:

- ``e``: put ``<entry row>`` ``e:v`` = value (no timestamp: the drain deletes the entry at the time the
  server gave it) into ``<queue table>``; the entry row (``<qid>:<bucketHex>:<key><seq, 8 bytes>``) already
  holds key and seq, so a relay repeated after a crash writes the same entry again (replayed by version on
  B: harmless). Once durable, set the bucket's mark ``<qid>#mark:<bucketHex>`` ``m:t`` to a fresh token.
- ``u``: put ``<key row>`` ``u:<update id>`` = value at timestamp = the outbox cell's timestamp into
  ``<combine table>``: a repeat rewrites the same version, which a combine's delete of the update hides too.

Why the version family sorts first (``!`` sorts before digits and letters): scans are not isolated, but a
scan reads a row's cells in key order. Reading the version before every other cell means that a commit
landing during the read changes the version after we read it, so our condition fails and we read again;
otherwise everything read is one consistent state. A transaction's own families must therefore sort after the
version family (checked), and the outbox family is its own locality group, so a relay's scan for leftovers
reads only the outbox's files.

Table names hold word characters and ``.`` only, and update ids are ASCII without ``:``, so ``:`` separates
the fields of an outbox qualifier and the destination row is the rest, whatever bytes it holds.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from connector.accumulo import Condition, ConditionalMutation
from connector.export.core import current_seq

from .errors import LayoutError, MalformedOutboxError

DEFAULT_VERSION_FAMILY = b"!tx"
DEFAULT_VERSION_QUALIFIER = b"v"
DEFAULT_OUTBOX_FAMILY = b"!txo"
EXPORT_KIND = b"e"
UPDATE_KIND = b"u"
#: the combine queue's update cells (``connector.combine.layout`` takes it from here: the relay writes them)
UPDATE_FAMILY = b"u"
#: in a queue's config row: the tables whose outboxes feed the queue
SOURCES_FAMILY = b"x"
#: the outbox family's locality group in a producer's table
OUTBOX_GROUP = "txoutbox"


def clock_us() -> int:
    """Wall-clock microseconds, the lower bound of a commit's sequence number (:func:`current_seq`)."""
    return current_seq()


def next_seq(previous: int, clock: Callable[[], int] = clock_us) -> int:
    """The sequence number of a row's next commit: ``max(wall-clock µs, previous + 1)``."""
    return max(clock(), previous + 1)


def new_token() -> bytes:
    """A commit's token in its version cell: tells our commit from another one at the same seq when the
    outcome of a conditional write is unknown."""
    return secrets.token_hex(8).encode("ascii")


#: tokens a version cell keeps: its commit's and those of the commits before it, newest first
TOKEN_HISTORY = 8


def version_value(seq: int, token: bytes | None = None, previous: bytes | None = None) -> bytes:
    """A version cell's value: the seq, this commit's token, then the newest tokens of ``previous`` (the
    version it replaces). The history settles an unknown outcome even after other commits followed ours; a
    writer that keeps none (``"<seq> <token>"``) only shortens it."""
    if not token:
        return str(seq).encode("ascii")
    older = previous.split(b" ")[1:TOKEN_HISTORY] if previous else []
    return b" ".join([str(seq).encode("ascii"), token, *older])


def version_tokens(value: bytes | None) -> list[bytes]:
    """The commit tokens a version cell holds, newest first."""
    return value.split(b" ")[1:] if value else []


def parse_version(value: bytes | None) -> int:
    """The seq a version cell holds (0 for none); raises ``ValueError`` for a cell that is not a version."""
    if value is None:
        return 0
    digits = value.split(b" ", 1)[0]
    if not digits.isdigit():
        raise LayoutError(f"version cell {value[:40]!r} does not start with a decimal sequence number")
    return int(digits)


class OutboxCell(NamedTuple):
    """One outbox cell, parsed: ``kind`` (``e`` export, ``u`` update), the destination ``table`` and ``row``
    (entry row or key row), the update id (``u`` only), the value and the cell's timestamp (the seq)."""

    kind: bytes
    table: str
    row: bytes
    uid: bytes
    value: bytes
    ts: int

    @property
    def qualifier(self) -> bytes:
        head = self.kind + b":" + self.table.encode("ascii") + b":"
        return head + self.row if self.kind == EXPORT_KIND else head + self.uid + b":" + self.row


def export_cell(table: str, entry_row: bytes, value: bytes, seq: int) -> OutboxCell:
    return OutboxCell(EXPORT_KIND, table, entry_row, b"", value, seq)


def update_cell(table: str, uid: bytes, key_row: bytes, delta: bytes, seq: int) -> OutboxCell:
    if b":" in uid or not uid.isascii():
        raise LayoutError(f"update id must be ASCII without ':', got {uid!r}")
    return OutboxCell(UPDATE_KIND, table, key_row, uid, delta, seq)


def parse_outbox(qualifier: bytes, value: bytes, ts: int) -> OutboxCell:
    """The outbox cell with this qualifier (raises ``MalformedOutboxError`` naming what is wrong)."""
    parts = qualifier.split(b":", 2)
    if len(parts) < 3 or parts[0] not in (EXPORT_KIND, UPDATE_KIND) or not parts[1]:
        raise MalformedOutboxError(f"outbox qualifier {qualifier[:100]!r} is not 'e:<table>:<row>' or "
                                   "'u:<table>:<update id>:<row>'")
    kind, table_bytes, rest = parts
    try:
        table = table_bytes.decode("ascii")
    except UnicodeDecodeError:
        raise MalformedOutboxError(f"outbox qualifier {qualifier[:100]!r}: table name is not ASCII") from None
    if kind == EXPORT_KIND:
        return OutboxCell(kind, table, rest, b"", value, ts)
    uid, sep, row = rest.partition(b":")
    if not sep or not uid:
        raise MalformedOutboxError(f"outbox qualifier {qualifier[:100]!r}: no update id")
    return OutboxCell(kind, table, row, uid, value, ts)


@dataclass(frozen=True)
class TxLayout:
    """Where a table keeps its rows' versions and outboxes (see the module's description). The combine
    queue uses ``TxLayout(b"s", b"seq", b"o")``; producers' tables use the defaults."""

    version_family: bytes = DEFAULT_VERSION_FAMILY
    version_qualifier: bytes = DEFAULT_VERSION_QUALIFIER
    outbox_family: bytes = DEFAULT_OUTBOX_FAMILY

    def __post_init__(self) -> None:
        for name in ("version_family", "version_qualifier", "outbox_family"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, value := value.encode("utf-8"))
            if not isinstance(value, bytes) or not value:
                raise LayoutError(f"{name} must be non-empty bytes or str, got {value!r}")
        if self.outbox_family == self.version_family:
            raise LayoutError("the outbox family must differ from the version family")

    def check_family(self, cf: bytes) -> None:
        """Refuse a transaction's own family where it would break the read order or the reserved cells."""
        if cf in (self.version_family, self.outbox_family):
            raise LayoutError(f"column family {cf!r} is reserved for row transactions' versions and outboxes")
        if cf < self.version_family:
            raise LayoutError(f"column family {cf!r} sorts before the version family {self.version_family!r}: a "
                             "transaction reads the version first, so its own families must sort after it")

    def commit_mutation(self, row: bytes, read_version: bytes | None, seq: int,
                        token: bytes | None = None) -> ConditionalMutation:
        """The conditional mutation of one commit: the condition on the version read, and the new version.
        Callers add the row's own cells and the outbox (``add_outbox``)."""
        m = ConditionalMutation(row, [Condition(self.version_family, self.version_qualifier, read_version)])
        m.put(self.version_family, self.version_qualifier, version_value(seq, token, read_version), timestamp=seq)
        return m

    def add_outbox(self, m: ConditionalMutation, cells: list[OutboxCell]) -> None:
        for cell in cells:
            m.put(self.outbox_family, cell.qualifier, cell.value, timestamp=cell.ts)

    def source_record(self) -> bytes:
        """The value of a queue's ``x:<table>`` cell naming this layout."""
        return json.dumps({"version": [self.version_family.decode("utf-8"), self.version_qualifier.decode("utf-8")],
                           "outbox": self.outbox_family.decode("utf-8")}, sort_keys=True,
                          separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_source_record(cls, value: bytes) -> TxLayout:
        try:
            record: Any = json.loads(value)
            family, qualifier = record["version"]
            return cls(family, qualifier, record["outbox"])
        except (ValueError, KeyError, TypeError) as exc:
            raise LayoutError(f"unreadable outbox source record {value[:200]!r} ({exc})") from None

    def locality_group_properties(self) -> dict[str, str]:
        """Table properties putting the outbox family in a locality group of its own."""
        return {f"table.group.{OUTBOX_GROUP}": self.outbox_family.decode("utf-8")}
