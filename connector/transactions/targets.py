"""What a transaction queues into: export queues (entries) and combine queues (updates), as outbox cells; and
the record, in a queue's config row, of the tables whose outboxes feed it (so a drain knows where to look).

An export target is a :class:`~connector.queue.QueueConfig` or an object with one as ``.config`` (an
``ExportQueue``). A combine target is anything shaped like ``connector.combine.CombineConfig`` (or an object
with one as ``.config``, a ``CombineQueue``): this layer sits below the combine queue and knows only the shape.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Protocol

from connector.accumulo import Connection, Mutation, Range
from connector.queue import QueueConfig
from connector.queue.codec import EntryCodec
from connector.queue.stored_config import check_config
from connector.serializers import Serializer

from .layout import SOURCES_FAMILY, OutboxCell, TxLayout, export_cell, update_cell


class _KeyRows(Protocol):
    def key_row(self, key_bytes: bytes) -> bytes: ...

    @property
    def config_row(self) -> bytes: ...


class CombineTarget(Protocol):
    """The shape of a combine queue's configuration, as far as a transaction needs it."""

    @property
    def table(self) -> str: ...

    @property
    def layout(self) -> _KeyRows: ...

    def serializers(self) -> tuple[Serializer, Serializer]: ...

    def check_stored(self, conn: Connection) -> None: ...


def _config(target: Any) -> Any:
    return getattr(target, "config", target)


class Targets:
    """Encodes exports and updates into outbox cells (serializers run here, so a value a serializer refuses
    fails the call before anything is written), and records each target's source table once per process."""

    def __init__(self, conn: Connection, source_table: str, layout: TxLayout) -> None:
        self.conn, self.source_table, self.layout = conn, source_table, layout
        self._codecs: dict[QueueConfig, EntryCodec] = {}
        self._recorded: set[tuple[str, bytes]] = set()
        # update ids: producer id + counter, unique without coordination (as CombineQueue's)
        self._uid_prefix = os.urandom(6).hex().encode("ascii") + b"-"
        self._counter = itertools.count()

    def export(self, queue: Any, key: Any, value: Any, seq: int) -> OutboxCell:
        config = _config(queue)
        if not isinstance(config, QueueConfig):
            raise TypeError(f"export needs an ExportQueue or a QueueConfig, got {type(queue).__name__}")
        codec = self._codecs.get(config)
        if codec is None:
            codec = self._codecs[config] = EntryCodec(config)
        row, value_bytes = codec.encode(key, value, seq)
        return export_cell(config.table, row, value_bytes, seq)

    def update(self, combine: Any, key: Any, delta: Any, seq: int) -> OutboxCell:
        config: CombineTarget = _config(combine)
        try:
            key_ser, value_ser = config.serializers()
            key_row = config.layout.key_row(key_ser.dumps(key))
        except AttributeError:
            raise TypeError(f"update needs a CombineQueue or a CombineConfig, got {type(combine).__name__}") from None
        uid = self._uid_prefix + b"%x" % next(self._counter)
        return update_cell(config.table, uid, key_row, value_ser.dumps(delta), seq)

    def record(self, target: Any) -> None:
        """Record (once per process) that this source table's outboxes feed ``target``'s queue: a put in the
        queue's config row, idempotent. Written before the first commit that uses the target, so an outbox a
        crash leaves is always findable."""
        config = _config(target)
        key = (config.table, config.layout.config_row)
        if key in self._recorded:
            return
        # entries written with the wrong bucket count or serializers would land where no drain looks
        if isinstance(config, QueueConfig):
            check_config(self.conn, config, required=True)
        else:
            config.check_stored(self.conn)
        record_source(self.conn, config.table, config.layout.config_row, self.source_table, self.layout)
        self._recorded.add(key)


def record_source(conn: Connection, queue_table: str, config_row: bytes, source_table: str, layout: TxLayout) -> None:
    """Record in a queue's config row that ``source_table`` (with ``layout``) feeds it."""
    conn.write(queue_table, [Mutation(config_row).put(SOURCES_FAMILY, source_table.encode("ascii"),
                                                      layout.source_record())])


def recorded_sources(conn: Connection, queue_table: str, config_row: bytes) -> dict[str, TxLayout]:
    """The tables whose outboxes feed the queue with this config row, with their layouts."""
    out: dict[str, TxLayout] = {}
    for cell in conn.scan(queue_table, Range.exact_row(config_row), columns=[SOURCES_FAMILY], batch_size=100):
        out[cell.cq.decode("ascii")] = TxLayout.from_source_record(cell.value)
    return out
