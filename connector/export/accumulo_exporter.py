"""AccumuloExporter: writes export batches into a destination table at timestamp = sequence number."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from connector.accumulo import BatchWriter, Connection, Mutation, MutationsRejectedError

from .core import DATA_ERRORS, BatchTranslationError, CellChange, SequencedExport, Translator, translation_reason
from .tombstones import TOMBSTONE, DeleteMode, install_tombstone_filter
from .translators import translator_from_name


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

    ``create_table`` makes the table when missing, with the versioning iterator at one version.
    ``delete_mode`` chooses real deletes or tombstones (see :mod:`connector.export.tombstones`).
    """

    def __init__(
        self,
        connection: Connection,
        table: str,
        translator: Translator | str = "difference",
        *,
        create_table: bool = True,
        delete_mode: DeleteMode | str = DeleteMode.DELETE,
        writer_options: dict[str, Any] | None = None,
    ) -> None:
        self.connection = connection
        self.table = table
        self.translator: Translator = (
            translator_from_name(translator) if isinstance(translator, str) else translator
        )
        self.delete_mode = DeleteMode(delete_mode)
        self._writer_options = writer_options or {}
        self._lock = threading.Lock()
        self._writer: BatchWriter | None = None
        #: exports written so far
        self.exported = 0
        if create_table:
            connection.create_table(table, exist_ok=True)
        if self.delete_mode is DeleteMode.TOMBSTONE:
            install_tombstone_filter(connection, table)

    def mutations(self, export: SequencedExport) -> list[Mutation]:
        """The mutations one export becomes: one per destination row, every change at ``ts = seq``."""
        by_row: dict[bytes, Mutation] = {}
        seen: dict[tuple[bytes, bytes, bytes, bytes], CellChange] = {}
        for change in self.translator(export):
            seen.pop(change.cell, None)  # last change to a cell wins: never a put and a delete at one ts
            seen[change.cell] = change
        for change in seen.values():
            m = by_row.get(change.row)
            if m is None:
                m = by_row[change.row] = Mutation(change.row)
            if change.value is not None:
                m.put(change.cf, change.cq, change.value, visibility=change.cv, timestamp=export.seq)
            elif self.delete_mode is DeleteMode.TOMBSTONE:
                m.put(change.cf, change.cq, TOMBSTONE, visibility=change.cv, timestamp=export.seq)
            else:
                m.delete(change.cf, change.cq, visibility=change.cv, timestamp=export.seq)
        return list(by_row.values())

    def export(self, exports: Sequence[SequencedExport]) -> None:
        """Write one batch and return when it is durable.

        Every export is translated before anything is sent: if any cannot be (its translator raised
        ``TranslationError`` or another data error), ``BatchTranslationError`` names all of them and nothing
        of the batch is written."""
        mutations: list[Mutation] = []
        failures: dict[int, str] = {}
        for i, export in enumerate(exports):
            try:
                mutations += self.mutations(export)
            except DATA_ERRORS as exc:  # InvalidMutationError (a bad visibility, say) is a ValueError too
                failures[i] = translation_reason(exc)
        if failures:
            raise BatchTranslationError(failures)
        with self._lock:
            writer = self._writer
            if writer is None:
                writer = self._writer = self.connection.batch_writer(self.table, **self._writer_options)
            try:
                writer.add_mutations(mutations)
                writer.flush()
            except MutationsRejectedError as exc:
                raise ExportRejectedError(f"export of {len(exports)} exports to {self.table} rejected: {exc}") from exc
            except BaseException:
                self._discard_writer()
                raise
            self.exported += len(exports)

    def _discard_writer(self) -> None:
        # after a transport failure the writer's state is unknown: start the next batch on a fresh one
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.__exit__(RuntimeError, None, None)

    def close(self) -> None:
        with self._lock:
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()

    def __enter__(self) -> AccumuloExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
