"""The producer side of a combine queue: queue updates for keys (never reading or writing their values), and
read the combined values."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from connector.accumulo import BatchWriter, Connection, Mutation, Range
from connector.transactions.rows import prepare_producer_table

from .config import CombineConfig, check_combine_config, store_combine_config
from .layout import COMBINE_TX_LAYOUT, STATE_FAMILY, UPDATE_FAMILY, VALUE_QUALIFIER
from .status import CombineStatus, combine_status


class CombineQueue:
    """Queues updates ``(key, delta)`` into a combine queue; a combine pass later folds them into the key's
    value (see :mod:`connector.combine.processor`).

    Producers never touch the value, so they never collide. Each update is its own cell (a unique id per
    update, with a timestamp chosen once), so a writer's replay rewrites the same cell and is never counted
    twice. Updates are durable after ``flush()``/``close()``; use it as a context manager to flush on exit.
    """

    def __init__(self, connection: Connection, config: CombineConfig,
                 writer_options: Mapping[str, Any] | None = None) -> None:
        self.connection = connection
        self.config = config
        self._layout = config.layout
        self._key_ser, self._value_ser = config.serializers()
        self._writer_options = dict(writer_options or {})
        self._writer: BatchWriter | None = None
        self._checked = False
        # producer id + counter: unique update ids without coordination (8 random bytes make a clash of two
        # producers' ids improbable: 2**-64 per pair)
        self._uid_prefix = os.urandom(8).hex().encode("ascii")
        self._counter = itertools.count()

    def __repr__(self) -> str:
        return f"CombineQueue(table={self.config.table!r}, cid={self.config.cid!r})"

    def init(self) -> bool:
        """Create the table (if needed), store the configuration and add the bucket split points. Safe to
        repeat; refused when the queue was initialised differently. True if this call stored the config."""
        self.connection.create_table(self.config.table, versioning=True, exist_ok=True)
        prepare_producer_table(self.connection, self.config.table, COMBINE_TX_LAYOUT)
        stored = store_combine_config(self.connection, self.config)
        self.connection.add_splits(self.config.table, self.config.split_points())
        self._checked = True
        return stored

    def mutation(self, key: Any, delta: Any) -> Mutation:
        """The mutation queueing one update, for callers that send it with their own writes."""
        row = self._layout.key_row(self._key_ser.dumps(key))
        uid = self._uid_prefix + b"%x" % next(self._counter)
        # the timestamp is fixed here, once: a replay of this mutation is the same version, which the combine's
        # delete at this timestamp also hides
        ts = time.time_ns() // 1_000_000
        return Mutation(row).put(UPDATE_FAMILY, uid, self._value_ser.dumps(delta), timestamp=ts)

    def update(self, key: Any, delta: Any) -> None:
        """Queue one update (durable after ``flush()``)."""
        self._writer_for().add_mutation(self.mutation(key, delta))

    def update_all(self, items: Iterable[tuple[Any, Any]]) -> int:
        """Queue ``(key, delta)`` updates; returns how many (durable after ``flush()``). Everything is
        serialized before anything is sent, so a delta the serializer refuses stops the call with nothing
        written."""
        mutations = [self.mutation(key, delta) for key, delta in items]
        self._writer_for().add_mutations(mutations)
        return len(mutations)

    def add_mutations(self, mutations: Iterable[Mutation]) -> None:
        """Queue updates made by ``mutation()`` (durable after ``flush()``)."""
        self._writer_for().add_mutations(mutations)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def __enter__(self) -> CombineQueue:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            if exc_type is None:
                writer.close()
            else:
                writer.abort()

    # --- reading values ---------------------------------------------------------------------------------

    def get(self, key: Any, default: Any = None) -> Any:
        """The key's value as of the last combine (updates still queued are not in it)."""
        row = self._layout.key_row(self._key_ser.dumps(key))
        for cell in self.connection.scan(self.config.table, Range.exact_row(row),
                                         columns=[(STATE_FAMILY, VALUE_QUALIFIER)], batch_size=2):
            return self._value_ser.loads(cell.value)
        return default

    def get_many(self, keys: Iterable[Any]) -> dict[Any, Any]:
        """``{key: value}`` for the keys that have a value (keys must be hashable), in one batch scan."""
        rows: dict[bytes, Any] = {}
        for key in keys:
            rows[self._layout.key_row(self._key_ser.dumps(key))] = key
        if not rows:
            return {}
        out = {}
        ranges = [Range.exact_row(r) for r in rows]
        for cell in self.connection.batch_read(self.config.table, ranges, columns=[(STATE_FAMILY, VALUE_QUALIFIER)],
                                               batch_size=10_000):
            out[rows[cell.row]] = self._value_ser.loads(cell.value)
        return out

    def items(self) -> dict[Any, Any]:
        """Every key's value (a whole-queue scan, for checks and small queues)."""
        out = {}
        for cell in self.connection.scan(self.config.table, self._layout.queue_range(),
                                         columns=[(STATE_FAMILY, VALUE_QUALIFIER)], batch_size=10_000):
            key = self._key_ser.loads(self._layout.key_of(cell.row))
            out[key if not isinstance(key, list) else tuple(key)] = self._value_ser.loads(cell.value)
        return out

    def status(self) -> CombineStatus:
        """Queued updates and outbox cells per bucket."""
        return combine_status(self.connection, self.config)

    def _writer_for(self) -> BatchWriter:
        if not self._checked:
            check_combine_config(self.connection, self.config)
            self._checked = True
        if self._writer is None:
            self._writer = self.connection.batch_writer(self.config.table, **self._writer_options)
        return self._writer
