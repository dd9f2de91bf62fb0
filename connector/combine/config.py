"""One combine queue's settings, and the copy ``init`` stores in the queue's own config row."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from connector.accumulo import Connection, Range
from connector.queue import QueueError
from connector.queue.config import QueueConfigBase
from connector.queue.layout import CONFIG_FAMILY as EXPORT_CONFIG_FAMILY
from connector.queue.layout import CONFIG_QUALIFIER as EXPORT_CONFIG_QUALIFIER
from connector.queue.stored_config import ConfigCell
from connector.serializers import DEFAULT_SERIALIZER

from .layout import CONFIG_FAMILY, CONFIG_QUALIFIER, CombineLayout


class CombineConfigError(QueueError, ValueError):
    """A combine queue's configuration is invalid, or its stored one is missing, unreadable, or disagrees with
    the one given."""


@dataclass(frozen=True)
class CombineConfig(QueueConfigBase):
    """One combine queue: ``table`` holding it (it may hold export queues too), its id ``cid`` (the row prefix,
    no ':' or '#', not the id of an export queue in the same table), ``num_buckets`` (the unit of parallel
    processing), ``buckets_per_tablet`` (None: about 8-16 tablets) and the key and value serializers
    (deltas use the value serializer)."""

    ID_FIELD: ClassVar[str] = "cid"
    ERROR: ClassVar[type[QueueError]] = CombineConfigError

    table: str
    cid: str
    num_buckets: int
    buckets_per_tablet: int | None = None
    key_serializer: str = DEFAULT_SERIALIZER
    value_serializer: str = DEFAULT_SERIALIZER

    def _check_serializers(self) -> None:
        if "packed" in (self.key_serializer.strip(), self.value_serializer.strip()):
            raise CombineConfigError("a combine queue's keys and deltas are values, not cells: 'packed' encodes "
                                     "the built-in translators' cells (use it for the export queue it feeds)")

    @cached_property
    def layout(self) -> CombineLayout:
        """The row layout of this combine queue."""
        return CombineLayout(self.cid, self.num_buckets)

    def check_stored(self, conn: Connection) -> None:
        """Raise ``CombineConfigError`` unless the queue was initialised with this configuration (row
        transactions check it before their first update to the queue)."""
        check_combine_config(conn, self, required=True)


def _cell(table: str, cid: str) -> ConfigCell:
    return ConfigCell(table, CombineLayout(cid, 1).config_row, CONFIG_FAMILY, CONFIG_QUALIFIER,
                      f"combine queue {cid!r} in table {table!r}", "combine init", CombineConfigError)


def read_combine_config(conn: Connection, table: str, cid: str) -> dict[str, Any] | None:
    """What ``init`` stored for combine queue ``cid`` in ``table`` (None if nothing)."""
    return _cell(table, cid).read(conn)


def check_combine_config(conn: Connection, config: CombineConfig, *, required: bool = False) -> None:
    """Raise ``CombineConfigError`` when ``config`` disagrees with what ``init`` stored (or, with
    ``required``, when nothing is stored)."""
    _cell(config.table, config.cid).check(conn, config.stored_fields(), required=required)


def store_combine_config(conn: Connection, config: CombineConfig) -> bool:
    """Store ``config`` unless one is stored (atomically); True if this call stored it. Refused when the id
    is an export queue's in the same table (their rows would mix) or a different configuration is stored."""
    for _ in conn.scan(config.table, Range.exact_row(config.layout.config_row),
                       columns=[(EXPORT_CONFIG_FAMILY, EXPORT_CONFIG_QUALIFIER)], batch_size=2):
        raise CombineConfigError(f"{config.cid!r} is an export queue's id in table {config.table!r}: "
                                 "give the combine queue another id")
    return _cell(config.table, config.cid).store(conn, config.stored_fields())


def resolve_combine_config(conn: Connection, table: str, cid: str, *, num_buckets: int | None = None,
                           key_serializer: str | None = None,
                           value_serializer: str | None = None) -> CombineConfig:
    """The stored configuration, checked against any value given."""
    cell = _cell(table, cid)
    stored = cell.read(conn)
    if stored is None:
        raise cell.missing()
    cell.given_conflicts(stored, {"num_buckets": num_buckets, "key_serializer": key_serializer,
                                  "value_serializer": value_serializer})
    return CombineConfig.from_stored(table, cid, stored)
