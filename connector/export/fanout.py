"""Several destinations fed by one drain: each batch exported to every one of them before the drain deletes it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from connector.serializers import DEFAULT_SERIALIZER

from .accumulo_exporter import AccumuloExporter
from .core import EntryFailure, SequencedExport


class FanoutExporter:
    """Exports each batch to ``exporters`` in turn and returns once every one of them has it durably, so a
    drain deletes an entry only when all destinations hold it. An export that one destination cannot take
    (its translator refuses it) is reported once, naming that destination's table, and is still written to
    the others; a transport failure or rejection of any destination fails the call (the drain retries the
    batch: the destinations that had it already rewrite identical cells)."""

    def __init__(self, exporters: Sequence[AccumuloExporter]) -> None:
        if not exporters:
            raise ValueError("a fan-out needs at least one exporter")
        self.exporters = list(exporters)

    def __repr__(self) -> str:
        return f"FanoutExporter({', '.join(e.table for e in self.exporters)})"

    def export(self, exports: Sequence[SequencedExport]) -> None:
        for exporter in self.exporters:
            exporter.export(exports)

    def export_batch(self, exports: pa.RecordBatch, *, key_serializer: str = DEFAULT_SERIALIZER,
                     value_serializer: str = DEFAULT_SERIALIZER,
                     left_out: Sequence[np.ndarray | None] | None = None) -> list[EntryFailure]:
        """``left_out``: per exporter, None or a mask of the exports (True) it must not get (they count as
        exported there)."""
        failures: dict[int, EntryFailure] = {}
        for i, exporter in enumerate(self.exporters):
            mask = None if left_out is None else left_out[i]
            batch, kept = exports, None
            if mask is not None and mask.any():
                kept = np.flatnonzero(~mask)
                batch = exports.take(pa.array(kept, pa.int64()))  # maybe empty: its cell count is 0 then
            for f in exporter.export_batch(batch, key_serializer=key_serializer, value_serializer=value_serializer):
                entry = f.entry if kept is None else int(kept[f.entry])
                if entry not in failures:
                    reason = f.reason if len(self.exporters) == 1 else f"{exporter.table}: {f.reason}"
                    failures[entry] = EntryFailure(entry, f.kind, reason)
        return [failures[i] for i in sorted(failures)]

    def cells_written_by_last_call(self) -> int:
        return sum(e.cells_written_by_last_call() for e in self.exporters)

    def close(self) -> None:
        for exporter in self.exporters:
            exporter.close()
