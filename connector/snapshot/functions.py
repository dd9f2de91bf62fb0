"""Snapshot functions: what one row's committed state implies, as the exports ``tx.export`` would have queued
for the change "nothing -> this row".

A snapshot function is ``snapshot(row, cells) -> iterable of (key, value)``: ``row`` the row's bytes,
``cells`` its own cells (:class:`~connector.accumulo.Cell`, key order; the version and outbox cells of row
transactions left out). The keys and values are what the producer's ``tx.export(queue, key, value)`` passes:
the queue's serializers turn them into bytes, and the queue's translator into cells, written at timestamp =
the row's version. A row that implies nothing returns nothing. Like translators it is named
``package.module:callable`` so that Spark executors can load it; it must be a pure function of the row (it may
run more than once for one row).

**The batch form**, for speed: a function over an Arrow batch of whole rows, marked with :func:`batch_snapshot`,
written with ``pyarrow.compute`` the way Spark users write ``mapInArrow``. It receives the rows' own cells
(:data:`~connector.snapshot.rows.ROWS_SCHEMA`: ``row``, ``cf``, ``cq``, ``cv``, ``ts``, ``value`` and the row's
``version``; a row's cells are never split across batches) and returns a batch (or table) of either

- destination cells: columns ``row``, ``cf``, ``cq``, ``value`` (``cv`` optional) and ``source``, the A row each
  derives from; they are written as they are, at timestamp = that row's version (the queue's translator is not
  used, so they must be the cells the translator makes of what the row's commits exported); or
- exports: columns ``key``, ``value`` (bytes, serialized as the queue's serializers do) and ``source``, which the
  queue's translator turns into cells as it does for the per-row form.

If the function raises, every row of its batch counts as failed. The per-row form runs on the same path (its
rows are taken from the batch).

Built in: ``mirror``, the row's own cells as they are (a replica of the producer table; the batch form, no
Python per cell), and ``combine=<cid>`` for a combine queue's table (each key's current value, observed as the change
``None -> value`` by the ``changes`` observer or the one named by ``combine=<cid>:<module:callable>``): its
rows bootstrap like any producer's. With ``changes``, JSON values and the queue's key serializer, it runs in the
batch form (:meth:`CombineSnapshot.batch`), and with the ``value`` translator it gives that translator's cells
itself.

Each destination cell must derive from one row of A: the snapshot of a row says everything on B that row
implies (a cross-row aggregate goes through the combine queue, whose rows then bootstrap like any other).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import Cell, Connection, Range
from connector.combine import CombineConfig, CombineLayout, observer_from_name
from connector.combine.config import read_combine_config
from connector.combine.functions import Change
from connector.combine.layout import COMBINE_TX_LAYOUT, STATE_FAMILY, VALUE_QUALIFIER
from connector.export.value import ValueTranslator
from connector.plugins import callable_from_name
from connector.queue import QueueConfig
from connector.settings import OptionError
from connector.transactions import TxLayout

Snapshot = Callable[[bytes, Sequence[Cell]], Iterable[tuple[Any, Any]]]
#: a snapshot function of the batch form (see the module's description)
BatchSnapshot = Callable[[pa.RecordBatch], "pa.RecordBatch | pa.Table"]

COMBINE = "combine"
MIRROR = "mirror"
_FORM = "snapshot_form"
BATCH = "batch"


def batch_snapshot(fn: BatchSnapshot) -> BatchSnapshot:
    """Mark ``fn`` as a snapshot function of the batch form (see the module's description)::

        @batch_snapshot
        def snapshot(cells: pa.RecordBatch) -> pa.RecordBatch:
            return pa.record_batch({"row": cells["value"], "cf": pc.cast(...), ..., "source": cells["row"]})
    """
    setattr(fn, _FORM, BATCH)
    return fn


def is_batch_snapshot(fn: object) -> bool:
    """Whether ``fn`` is a snapshot function of the batch form."""
    return getattr(fn, _FORM, None) == BATCH


@batch_snapshot
def mirror(cells: pa.RecordBatch) -> pa.RecordBatch:
    """The built-in ``mirror`` snapshot: each row's own cells as they are, derived from that row."""
    return pa.record_batch([cells.column(n) for n in ("row", "cf", "cq", "cv", "value", "row")],
                           names=["row", "cf", "cq", "cv", "value", "source"])


@dataclass(frozen=True)
class SnapshotSource:
    """How to read a producer table and what its rows imply: the snapshot function, the row-transaction layout
    whose version and outbox cells are not the row's own, and the rows that hold producer rows (None: all)."""

    snapshot: Snapshot | BatchSnapshot
    layout: TxLayout
    rows: Range | None = None


@dataclass(frozen=True)
class CombineSnapshot:
    """The built-in snapshot of a combine queue's table: each key's current value as the change ``None ->
    value``, observed by the combine's observer (pickles to Spark executors by its names)."""

    config: CombineConfig
    observer: str = "changes"

    def __call__(self, row: bytes, cells: Sequence[Cell]) -> Iterable[tuple[Any, Any]]:
        value = next((c.value for c in cells if c.cf == STATE_FAMILY and c.cq == VALUE_QUALIFIER), None)
        if value is None:
            return []
        key_serde, value_serde = self.config.serializers()
        key = key_serde.loads(CombineLayout(self.config.cid, self.config.num_buckets).key_of(row))
        seq = max(c.ts for c in cells)
        change = Change(key, None, value_serde.loads(value), seq)
        return [(export_key, export_value) for _, export_key, export_value in
                observer_from_name(self.observer)([change])]

    def batch(self, queue: QueueConfig, translator: object = None) -> BatchSnapshot | None:
        """This snapshot in the batch form, with no Python per key, where it gives the very bytes the per-row
        form gives for ``queue``: the ``changes`` observer, the key serializer the combine's and the queue's
        alike and one that writes each key one way, JSON values on both sides. With the queue's ``translator``
        a :class:`~connector.export.value.ValueTranslator`, it gives that translator's cells itself (a batch
        holding a key or value it cannot write so gives exports instead). None otherwise (the per-row form
        runs)."""
        c = self.config
        if (self.observer != "changes" or c.key_serializer != queue.key_serializer
                or c.key_serializer not in _CANONICAL or {c.value_serializer, queue.value_serializer} != {"json"}):
            return None
        prefix = len(c.layout.buckets.bucket_prefix(0))  # every bucket's: its hex is zero-padded
        if isinstance(translator, ValueTranslator) and c.key_serializer == "json":
            return batch_snapshot(functools.partial(_changes_cells, prefix, translator.cf, translator.cq))
        return batch_snapshot(functools.partial(_changes_exports, prefix))


#: serializers whose ``dumps(loads(b))`` is ``b`` for every ``b`` they wrote, so a key passes through as it is
_CANONICAL = frozenset({"json", "bytes"})
#: ``JsonSerializer.dumps({"old": None, "new": v})`` around the JSON of ``v`` (keys sorted, no spaces)
_NEW, _OLD_NONE = pa.scalar(b'{"new":', pa.binary()), pa.scalar(b',"old":null}', pa.binary())


def _current(cells: pa.RecordBatch, prefix: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Each key's row, serialized key (the row after its ``<cid>:<bucketHex>:``) and current value (``s:val``)."""
    current = cells.filter(pc.and_(pc.equal(cells.column("cf"), pa.scalar(STATE_FAMILY, pa.binary())),
                                   pc.equal(cells.column("cq"), pa.scalar(VALUE_QUALIFIER, pa.binary()))))
    rows = current.column("row")
    longest = pc.max(pc.binary_length(rows)).as_py() or prefix  # binary_slice without a stop fails (arrow 26)
    return rows, pc.binary_slice(rows, prefix, longest), current.column("value")


def _changes_exports(prefix: int, cells: pa.RecordBatch) -> pa.RecordBatch:
    """The ``changes`` observer's exports of each key's current value, serialized: ``{"new":<value>,"old":null}``
    under the key."""
    return _exports(*_current(cells, prefix))


def _exports(rows: pa.Array, key: pa.Array, value: pa.Array) -> pa.RecordBatch:
    value = pc.binary_join_element_wise(_NEW, value, _OLD_NONE, pa.scalar(b"", pa.binary()))
    return pa.record_batch({"key": key, "value": value, "source": rows})


def _changes_cells(prefix: int, cf: bytes, cq: bytes, cells: pa.RecordBatch) -> pa.RecordBatch:
    """The cells ``ValueTranslator(cf, cq)`` makes of the ``changes`` exports: row = the key, value = the
    current value, each as that translator writes it (see :func:`_as_written`); the exports when a key or value
    of the batch is one it writes otherwise or refuses."""
    rows, key, value = _current(cells, prefix)
    row, data = _as_written(key, value=False), _as_written(value, value=True)
    if row is None or data is None:
        return _exports(rows, key, value)
    n = len(rows)
    return pa.record_batch({"row": row, "cf": pa.repeat(pa.scalar(cf, pa.binary()), n),
                            "cq": pa.repeat(pa.scalar(cq, pa.binary()), n), "value": data, "source": rows})


def _as_written(json_texts: pa.Array, *, value: bool) -> pa.Array | None:
    """What ``ValueTranslator`` writes for these canonical JSON texts (``JsonSerializer``'s): a string without
    escapes as its text, a number as its JSON text (Python's ``str`` of it); for a value, also true, false,
    lists and objects as their JSON when it is ASCII (the translator's ``json.dumps`` escapes the rest). None if
    any other text (an escape, an empty key, null, a key that is no text or number) is among them."""
    text = json_texts.cast(pa.string())
    first = pc.utf8_slice_codeunits(text, 0, 1)
    quoted = pc.equal(first, '"')
    number = pc.match_substring_regex(first, "^[-0-9]$")
    ok = pc.or_(quoted, number)
    if value:
        ok = pc.or_(ok, pc.and_(pc.is_in(first, pa.array(["t", "f", "[", "{"])), pc.string_is_ascii(text)))
    if not pc.all(ok).as_py() or pc.any(pc.and_(quoted, pc.match_substring(text, "\\"))).as_py():
        return None
    unquoted = pc.replace_substring_regex(text, '^"(.*)"$', "\\1")
    if not value and pc.any(pc.equal(pc.binary_length(unquoted), 0)).as_py():
        return None
    return unquoted.cast(pa.binary())


def snapshot_source(conn: Connection, table: str, name: str) -> SnapshotSource:
    """The snapshot named ``name`` for the producer table ``table`` on ``conn``: ``combine=<cid>[:observer]``
    ``mirror`` or ``package.module:callable`` (row transactions' default layout); ``OptionError`` naming what is
    wrong."""
    if name == MIRROR:
        return SnapshotSource(mirror, TxLayout())
    if name == COMBINE or name.startswith(COMBINE + "="):
        cid, _, observer = name.removeprefix(COMBINE).removeprefix("=").partition(":")
        if not cid:
            raise OptionError(f"snapshot {name!r}: name the combine queue, as in combine=wc")
        stored = read_combine_config(conn, table, cid)
        if stored is None:
            raise OptionError(f"snapshot {name!r}: table {table!r} holds no combine queue {cid!r}")
        config = CombineConfig.from_stored(table, cid, stored)
        observer_from_name(observer or "changes")
        return SnapshotSource(CombineSnapshot(config, observer or "changes"), COMBINE_TX_LAYOUT,
                              CombineLayout(cid, config.num_buckets).queue_range())
    return SnapshotSource(snapshot_from_name(name), TxLayout())


def snapshot_from_name(name: str) -> Snapshot | BatchSnapshot:
    """The snapshot function at ``package.module:callable`` (either form)."""
    return callable_from_name("snapshot", name, {})  # type: ignore[no-any-return]


def check_snapshot_name(name: str) -> str:
    """``name`` if it has the form of a snapshot name (``mirror``, ``combine=<cid>[:observer]`` or
    ``module:callable``; nothing is imported here); ``ValueError`` otherwise."""
    if name == MIRROR or (name.startswith(COMBINE + "=") and len(name) > len(COMBINE) + 1):
        return name
    module, colon, attr = name.partition(":")
    if colon and module and attr and not name.startswith(COMBINE):
        return name
    raise ValueError(f"snapshot {name!r}: use module:callable (a function of (row, cells), or of a batch of rows: "
                     "batch_snapshot), mirror or combine=<cid>")
