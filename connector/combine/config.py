"""One combine queue's settings, and the copy ``init`` stores in the queue's own config row."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from connector.accumulo import Connection, Range
from connector.queue import QueueError
from connector.queue.config import default_buckets_per_tablet
from connector.queue.layout import CONFIG_FAMILY as EXPORT_CONFIG_FAMILY
from connector.queue.layout import CONFIG_QUALIFIER as EXPORT_CONFIG_QUALIFIER
from connector.queue.stored_config import ConfigCell, config_fields
from connector.serializers import Serializer, serializer_from_name

from .layout import CONFIG_FAMILY, CONFIG_QUALIFIER, CombineLayout


class CombineConfigError(QueueError, ValueError):
    """A combine queue's stored configuration is missing, unreadable, or disagrees with the one given."""


@dataclass(frozen=True)
class CombineConfig:
    """One combine queue: ``table`` holding it (it may hold export queues too), its id ``cid`` (the row prefix,
    no ':' or '#', not the id of an export queue in the same table), ``num_buckets`` (the unit of parallel
    processing), ``buckets_per_tablet`` (None: about 8-16 tablets) and the key and value serializers
    (deltas use the value serializer)."""

    table: str
    cid: str
    num_buckets: int
    buckets_per_tablet: int | None = None
    key_serializer: str = "json"
    value_serializer: str = "json"
    _bpt: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        if not isinstance(self.table, str) or not self.table:
            raise ValueError("table must be a non-empty string")
        CombineLayout(self.cid, self.num_buckets)  # validates cid and num_buckets
        bpt = self.buckets_per_tablet
        if bpt is None:
            bpt = default_buckets_per_tablet(self.num_buckets)
        elif not isinstance(bpt, int) or isinstance(bpt, bool) or bpt < 1:
            raise ValueError(f"buckets_per_tablet must be an int >= 1, got {bpt!r}")
        if "packed" in (self.key_serializer.strip(), self.value_serializer.strip()):
            raise CombineConfigError("a combine queue's keys and deltas are values, not cells: 'packed' encodes "
                                     "the built-in translators' cells (use it for the export queue it feeds)")
        object.__setattr__(self, "_bpt", bpt)

    @cached_property
    def layout(self) -> CombineLayout:
        return CombineLayout(self.cid, self.num_buckets)

    @property
    def tablet_buckets(self) -> int:
        return self._bpt

    def split_points(self) -> list[bytes]:
        return self.layout.split_points(self._bpt)

    def check_stored(self, conn: Connection) -> None:
        """Raise ``CombineConfigError`` unless the queue was initialised with this configuration (row
        transactions check it before their first update to the queue)."""
        check_combine_config(conn, self, required=True)

    def serializers(self) -> tuple[Serializer, Serializer]:
        return serializer_from_name(self.key_serializer), serializer_from_name(self.value_serializer)

    def stored_fields(self) -> dict[str, Any]:
        return config_fields(self.num_buckets, self.key_serializer, self.value_serializer, self._bpt)


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
    return CombineConfig(table=table, cid=cid, num_buckets=stored["num_buckets"],
                         buckets_per_tablet=stored.get("buckets_per_tablet"),
                         key_serializer=stored.get("key_serializer", "json"),
                         value_serializer=stored.get("value_serializer", "json"))
