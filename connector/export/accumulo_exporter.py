"""AccumuloExporter: writes export batches into a destination table at timestamp = sequence number."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connector.accumulo import (
    UPDATE_SCHEMA,
    BatchWriter,
    Connection,
    InvalidMutationError,
    Mutation,
    MutationsRejectedError,
    TimedOutError,
)
from connector.accumulo.visibility import VisibilityError, check_visibility
from connector.errors import ConnectorError
from connector.serializers import DEFAULT_SERIALIZER, NATIVE_ENCODINGS, serializer_from_name

from .core import (
    DATA_ERRORS,
    BatchTranslationError,
    EntryFailure,
    SequencedExport,
    TranslationError,
    Translator,
    last_change_per_cell,
    translation_reason,
)
from .native_translate import changes_to_updates, translate_batch
from .tombstones import TOMBSTONE, DeleteMode, prepare_destination
from .translators import DEFAULT_TRANSLATOR, native_name, translator_from_name


class DestinationTableMissingError(ConnectorError, ValueError):
    """A destination table does not exist and creating it was not asked for (``create_dest_table``,
    ``--create-dest-table``): a misspelt name must not quietly start a new table."""


def prepare_destination_table(conn: Connection, table: str, create: bool) -> bool:
    """Make sure the destination ``table`` exists: with ``create``, create it when missing (versioning
    iterator, one version; True when this call created it); without, refuse a missing one in one line naming
    the closest existing table (:class:`DestinationTableMissingError`)."""
    if conn.table_exists(table):
        return False
    if not create:
        near = conn.closest_table(table)
        raise DestinationTableMissingError(
            f"destination table {table!r} does not exist on {conn.describe()}"
            + (f" (did you mean {near!r}?)" if near else "")
            + "; a drain, a bootstrap or the accumulo-export sink creates it only when asked (--create-dest-table, "
              "option create_dest_table)")
    return conn.create_table(table, exist_ok=True)


class ExportRejectedError(MutationsRejectedError):
    """Accumulo rejected some of a batch's cells; the message names the rows. Nothing is acknowledged, so
    the caller keeps the batch's queue entries and may retry after fixing the cause."""


class AccumuloExporter:
    """Replays exports into ``table`` on the destination cluster.

    Each export goes through ``translator`` (a callable or a name: ``difference``, ``replicator``,
    ``cells``, ``module:callable``); every resulting put and delete is written at Accumulo timestamp
    ``= seq``, so duplicates rewrite identical cells and a newer seq always wins, whatever the arrival
    order. ``export()`` returns once the batch is flushed (durable) and raises on any failure. One writer
    is kept open and reused; calls from several threads are serialised.

    Construction does no I/O: :meth:`ensure_table` makes the table when missing (versioning iterator at one
    version) and prepares it for its delete mode; call it once before the first export into a table that may not
    exist (a first export without it prepares the table then). The mode (real deletes or tombstones:
    :mod:`connector.export.tombstones`) is the one the table records (:mod:`connector.export.tombstones`);
    ``delete_mode`` is the one asked for: the first writer's is recorded (None: the default), a table recording
    another one is refused (``DestinationModeError``) before anything is written. A put whose value is the
    tombstone is an export that cannot be written (a reader would never see it, and a purge would delete it).
    """

    def __init__(
        self,
        connection: Connection,
        table: str,
        translator: Translator | str = DEFAULT_TRANSLATOR,
        *,
        delete_mode: DeleteMode | str | None = None,
        writer_options: dict[str, Any] | None = None,
    ) -> None:
        self.connection = connection
        self.table = table
        self.translator: Translator = (
            translator_from_name(translator) if isinstance(translator, str) else translator
        )
        #: the built-in translator's name when export_batch may run it natively
        self._native_name = native_name(self.translator)
        #: the mode asked for (None: the table's, else the default); the one in effect is :attr:`delete_mode`
        self.requested_mode = DeleteMode(delete_mode) if delete_mode else None
        self._mode: DeleteMode | None = None
        self._writer_options = writer_options or {}
        self._lock = threading.Lock()
        self._writer: BatchWriter | None = None
        #: when the last write found no tablet server within the connection's server_wait, and its error
        self._timed_out: tuple[float, TimedOutError] | None = None
        #: exports written so far
        self.exported = 0
        self._calls = threading.local()  # per thread: a shared exporter serves several drain threads

    def ensure_table(self, create: bool = True) -> AccumuloExporter:
        """Create the destination table when missing (``create``; without it a missing table is refused:
        :func:`prepare_destination_table`) and prepare it for its mode (:func:`prepare_destination`: the mode
        recorded or recorded now, the table's shape checked, in tombstone mode the filter seen by a scan);
        returns the exporter: ``AccumuloExporter(conn, "t").ensure_table()``."""
        prepare_destination_table(self.connection, self.table, create)
        self._mode = prepare_destination(self.connection, self.table, self.requested_mode)
        return self

    @property
    def delete_mode(self) -> DeleteMode:
        """The table's delete mode (read, checked and recorded on first use when :meth:`ensure_table` was not
        called)."""
        return self._prepare()

    @delete_mode.setter
    def delete_mode(self, mode: DeleteMode) -> None:
        self._mode = DeleteMode(mode)

    def _prepare(self) -> DeleteMode:
        if self._mode is None:
            self._mode = prepare_destination(self.connection, self.table, self.requested_mode)
        return self._mode

    def mutations(self, export: SequencedExport) -> list[Mutation]:
        """The mutations one export becomes: one per destination row, every change at ``ts = seq``."""
        by_row: dict[bytes, Mutation] = {}
        for (row, cf, cq, cv), value in last_change_per_cell(self.translator(export)).items():
            m = by_row.get(row)
            if m is None:
                m = by_row[row] = Mutation(row)
            if value == TOMBSTONE:
                raise TranslationError(_TOMBSTONE_VALUE.format(row=row, cf=cf, cq=cq))
            if value is not None:
                m.put(cf, cq, value, visibility=cv, timestamp=export.seq)
            elif self.delete_mode is DeleteMode.TOMBSTONE:
                m.put(cf, cq, TOMBSTONE, visibility=cv, timestamp=export.seq)
            else:
                m.delete(cf, cq, visibility=cv, timestamp=export.seq)
        return list(by_row.values())

    def export(self, exports: Sequence[SequencedExport]) -> None:
        """Write one batch and return when it is durable.

        Every export is translated before anything is sent: if any cannot be (its translator raised
        ``TranslationError`` or another data error), ``BatchTranslationError`` names all of them and nothing
        of the batch is written."""
        self._calls.cells = 0
        mutations: list[Mutation] = []
        failures: dict[int, str] = {}
        for i, export in enumerate(exports):
            try:
                mutations += self.mutations(export)
            except DATA_ERRORS as exc:  # InvalidMutationError (a bad visibility, say) is a ValueError too
                failures[i] = translation_reason(exc)
        if failures:
            raise BatchTranslationError(failures)
        with self._turn():
            self._write(lambda writer: writer.add_mutations(mutations), len(exports))
            self.exported += len(exports)
        self._calls.cells = sum(len(m.updates) for m in mutations)

    def export_batch(self, exports: pa.RecordBatch, *, key_serializer: str = DEFAULT_SERIALIZER,
                     value_serializer: str = DEFAULT_SERIALIZER) -> list[EntryFailure]:
        """Write a batch of serialized exports (columns ``key`` binary, ``value`` binary, ``seq`` int64)
        and return when it is durable, each cell at ``ts = seq``.

        An export that cannot be written (undecodable, or refused by its translator) is left out and
        returned as an ``EntryFailure`` (in batch order) with the reason ``export()`` or the queue codec
        gives; the rest of the batch is written all the same. Built-in translators with JSON or packed values run
        natively over the whole batch (they ignore the key, which is not decoded); other translators or
        serializers deserialize and translate each export in Python (the slow path). Transport failures
        and rejections raise as in ``export()``, and then nothing of the batch counts as written.
        """
        updates, failures = self.updates(exports, key_serializer=key_serializer, value_serializer=value_serializer)
        updates = updates.drop_columns(["entry"])
        self._calls.cells = 0
        with self._turn():
            if updates.num_rows:
                self._write(lambda writer: writer.add_cells(updates), exports.num_rows)
            self.exported += exports.num_rows - len(failures)
        self._calls.cells = updates.num_rows
        return failures

    def updates(self, exports: pa.RecordBatch, *, key_serializer: str = DEFAULT_SERIALIZER,
                value_serializer: str = DEFAULT_SERIALIZER) -> tuple[pa.RecordBatch, list[EntryFailure]]:
        """What :meth:`export_batch` would write for ``exports``, without writing it: the updates (the
        columns ``BatchWriter.add_cells`` takes, every cell at ts = its export's seq, in this exporter's
        delete mode, plus ``entry``: the index of its export) and the exports that cannot be written."""
        for name, kind in (("key", pa.binary()), ("value", pa.binary()), ("seq", pa.int64())):
            if exports.schema.get_field_index(name) < 0 or exports.schema.field(name).type != kind:
                raise TypeError(f"export_batch needs columns key (binary), value (binary), seq (int64); "
                                f"got {exports.schema}")
        failures = _seq_failures(exports.column("seq"))
        if self._native_name is not None and value_serializer in NATIVE_ENCODINGS:
            changes, errors = translate_batch(self._native_name, exports, value_serializer)
            for e in errors:
                failures.setdefault(e.entry, e)
            failures.update(_visibility_failures(changes, failures))
            failures.update(_tombstone_value_failures(changes, failures))
            if failures:
                dropped = pa.array(sorted(failures), pa.int32())
                changes = changes.filter(pc.invert(pc.is_in(changes.column("entry"), value_set=dropped)))
            updates = self._stamped(changes, exports.column("seq")).append_column("entry", changes.column("entry"))
        else:
            updates = self._updates_in_python(exports, failures, key_serializer, value_serializer)
        return updates, [failures[i] for i in sorted(failures)]

    def write_updates(self, updates: pa.RecordBatch) -> None:
        """Write cells :meth:`updates` gave (its extra columns are ignored) and return when they are
        durable; transport failures and rejections as ``export()``."""
        cells = updates.select(UPDATE_SCHEMA.names)
        with self._turn():
            if cells.num_rows:
                self._write(lambda writer: writer.add_cells(cells), cells.num_rows)

    def export_changes(self, changes: pa.RecordBatch, seqs: pa.Array) -> None:
        """Write changes already translated (``native_translate.CHANGE_SCHEMA``; ``entry`` indexes ``seqs``, one per
        export, each in [0, 2**63-1]), each at ts = its export's seq, and return when they are durable.
        Raises ``BatchTranslationError`` naming the exports with a change that cannot be written (a bad
        visibility), before writing anything; transport failures and rejections as ``export()``."""
        failures = _visibility_failures(changes, {})
        failures.update(_tombstone_value_failures(changes, failures))
        if failures:
            raise BatchTranslationError({i: f.reason for i, f in failures.items()})
        updates = self._stamped(changes, seqs)
        with self._turn():
            if updates.num_rows:
                self._write(lambda writer: writer.add_cells(updates), len(seqs))
            self.exported += len(seqs)

    def cells_written_by_last_call(self) -> int:
        """Cells (puts, deletes, tombstones) the calling thread's last ``export``/``export_batch`` wrote on
        the destination; 0 when it failed. Per thread, since one exporter may serve several."""
        return int(getattr(self._calls, "cells", 0))

    def _stamped(self, changes: pa.RecordBatch, seqs: pa.Array) -> pa.RecordBatch:
        """Changes as updates at ts = seq; in tombstone mode a delete becomes a put of TOMBSTONE."""
        updates = changes_to_updates(changes, seqs)
        if self.delete_mode is DeleteMode.TOMBSTONE:
            schema = updates.schema
            value = pc.if_else(updates.column("delete"), pa.scalar(TOMBSTONE, pa.binary()), updates.column("value"))
            updates = updates.set_column(schema.get_field_index("value"), schema.field("value"), value)
            updates = updates.set_column(schema.get_field_index("delete"), schema.field("delete"),
                                         pc.is_null(value))  # all false: no deletes left
        return updates

    def _updates_in_python(self, exports: pa.RecordBatch, failures: dict[int, EntryFailure],
                           key_serializer: str, value_serializer: str) -> pa.RecordBatch:
        """The slow path: each export deserialized and run through ``mutations()`` (its collapse, checks
        and delete mode), the mutations gathered into one updates batch."""
        keys_serde, values_serde = serializer_from_name(key_serializer), serializer_from_name(value_serializer)
        columns: tuple[list[Any], ...] = ([], [], [], [], [], [], [])
        row_c, cf_c, cq_c, cv_c, ts_c, value_c, delete_c = columns
        entries: list[int] = []
        triples = zip(exports.column("key").to_pylist(), exports.column("value").to_pylist(),
                      exports.column("seq").to_pylist(), strict=True)
        for i, (key_bytes, value_bytes, seq) in enumerate(triples):
            if i in failures:
                continue
            try:
                key = keys_serde.loads(key_bytes)
            except Exception as exc:  # noqa: BLE001 - a deserializer may raise anything; named in the reason
                failures[i] = EntryFailure(i, "undecodable", f"undecodable key: {type(exc).__name__}: {exc}")
                continue
            try:
                value = values_serde.loads(value_bytes)
            except Exception as exc:  # noqa: BLE001
                failures[i] = EntryFailure(i, "undecodable", f"undecodable value: {type(exc).__name__}: {exc}")
                continue
            try:
                mutations = self.mutations(SequencedExport(key, value, seq))
            except DATA_ERRORS as exc:  # as export(): anything else fails the batch
                failures[i] = EntryFailure(i, "translation", translation_reason(exc))
                continue
            for m in mutations:
                for cf, cq, cv, ts, v, delete in m.updates:
                    row_c.append(m.row)
                    cf_c.append(cf)
                    cq_c.append(cq)
                    cv_c.append(cv)
                    ts_c.append(ts)
                    value_c.append(None if delete else v)
                    delete_c.append(delete)
                    entries.append(i)
        updates = pa.record_batch([pa.array(c, type=f.type) for c, f in zip(columns, UPDATE_SCHEMA, strict=True)],
                                  schema=UPDATE_SCHEMA)
        return updates.append_column("entry", pa.array(entries, pa.int32()))

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """Hold the writer's lock. A caller that waited for it while the call ahead found no tablet server
        within ``server_wait`` fails at once with that error, instead of waiting out the bound once more."""
        waiting_since = time.monotonic()
        with self._lock:
            if self._timed_out is not None and self._timed_out[0] >= waiting_since:
                raise TimedOutError(str(self._timed_out[1])) from self._timed_out[1]  # the same, once more
            yield

    def _write(self, add: Any, n_exports: int) -> None:
        """Add to the shared writer and flush (durable); called with the lock held."""
        self._prepare()  # before the first write, even of puts only
        writer = self._writer
        if writer is None:
            writer = self._writer = self.connection.batch_writer(self.table, **self._writer_options)
        try:
            add(writer)
            writer.flush()
        except MutationsRejectedError as exc:
            raise ExportRejectedError(f"export of {n_exports} exports to {self.table} rejected: {exc}") from exc
        except TimedOutError as exc:
            self._timed_out = (time.monotonic(), exc)
            self._discard_writer()
            raise
        except BaseException:
            self._discard_writer()
            raise

    def _discard_writer(self) -> None:
        # after a transport failure the writer's state is unknown: start the next batch on a fresh one
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.abort()

    def close(self) -> None:
        with self._lock:
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()

    def __enter__(self) -> AccumuloExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: why an export putting the tombstone's value is not written (the value would be hidden, then purged)
_TOMBSTONE_VALUE = ("the put of row {row!r} cf {cf!r} cq {cq!r} has the tombstone's value "
                    "(connector.export.TOMBSTONE): it would be hidden from every reader and then purged; "
                    "a producer may not write that value")


def _tombstone_value_failures(changes: pa.RecordBatch, failed: dict[int, EntryFailure]) -> dict[int, EntryFailure]:
    """Exports with a put whose value is the tombstone (:data:`_TOMBSTONE_VALUE`), found without a row loop."""
    hits = pc.indices_nonzero(pc.fill_null(pc.equal(changes.column("value"), pa.scalar(TOMBSTONE, pa.binary())),
                                           False)).to_pylist()
    out: dict[int, EntryFailure] = {}
    entries = changes.column("entry")
    for i in hits:  # a producer writing the tombstone is rare
        entry = entries[i].as_py()
        if entry in failed or entry in out:
            continue
        c = {name: changes.column(name)[i].as_py() for name in ("row", "cf", "cq")}
        out[entry] = EntryFailure(entry, "translation", _TOMBSTONE_VALUE.format(**c))
    return out


def _seq_failures(seqs: pa.Array) -> dict[int, EntryFailure]:
    """Exports whose seq cannot be a timestamp (``SequencedExport``'s check), found without a row loop."""
    bad = pc.indices_nonzero(pc.fill_null(pc.less(seqs, 0), True)).to_pylist()
    reason = "ValueError: seq must be an int in [0, 2**63-1], got {!r}"
    return {i: EntryFailure(i, "translation", reason.format(seqs[i].as_py())) for i in bad}


def _visibility_failures(changes: pa.RecordBatch, failed: dict[int, EntryFailure]) -> dict[int, EntryFailure]:
    """Exports with a change whose visibility is not a valid expression, with the reason ``export()``
    records (``Mutation``'s InvalidMutationError) for the first such change. Each distinct expression is
    checked once."""
    cv = changes.column("cv")
    bad: dict[bytes, str] = {}
    for expr in pc.unique(cv).to_pylist():
        if expr:
            try:
                check_visibility(expr)
            except VisibilityError as exc:
                bad[expr] = str(exc)
    out: dict[int, EntryFailure] = {}
    if not bad:
        return out
    hits = pc.indices_nonzero(pc.is_in(cv, value_set=pa.array(list(bad), cv.type))).to_pylist()
    entries, rows = changes.column("entry"), changes.column("row")
    for i in hits:  # only the bad changes: poison entries are rare
        entry = entries[i].as_py()
        if entry in failed or entry in out:
            continue
        error = InvalidMutationError(f"row {rows[i].as_py()!r}: {bad[cv[i].as_py()]}")
        out[entry] = EntryFailure(entry, "translation", translation_reason(error))
    return out
