"""Batches on their way to the exporter: re-cut to a byte budget (``buffer_bytes``: the drain's entries and the
sinks' rows alike), and read ahead on a thread.

Both work on whole Arrow batches (of entries: columns ``row``, ``ts``, ``value``), never one row at a time.
"""

from __future__ import annotations

import queue as queue_module
import threading
from collections.abc import Generator, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _is_data(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


def _data_columns(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if _is_data(f.type)]


def data_bytes(batch: pa.RecordBatch | pa.Table) -> int:
    """The data bytes of a batch: the lengths of its text and binary values (an entry's row and value, a cell's
    row, cf, cq, cv and value; numbers and nulls count 0). What ``buffer_bytes`` bounds and a drain's
    ``bytes`` counts."""
    return sum(pc.sum(pc.binary_length(batch.column(name))).as_py() or 0 for name in _data_columns(batch.schema))


def _row_sizes(table: pa.Table) -> np.ndarray:
    sizes = np.zeros(table.num_rows, dtype=np.int64)
    for name in _data_columns(table.schema):
        sizes += pc.binary_length(table.column(name)).fill_null(0).to_numpy().astype(np.int64)
    return sizes


def cut_by_bytes(batches: Iterable[pa.RecordBatch], limit: int) -> Iterator[pa.RecordBatch]:
    """Re-cut a stream of batches (of one schema) into batches of at most ``limit`` data bytes (:func:`data_bytes`),
    greedily and in order (a row larger than ``limit`` goes alone): the one cutter of the drain and the sinks.
    Cut points come from a cumulative sum, not a loop over rows."""
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        pending_bytes += data_bytes(batch)
        if pending_bytes >= limit:
            rest = yield from _cut(pa.Table.from_batches(pending).combine_chunks(), limit, final=False)
            pending = [rest] if rest is not None and rest.num_rows else []
            pending_bytes = data_bytes(rest) if pending else 0
    if pending:
        yield from _cut(pa.Table.from_batches(pending).combine_chunks(), limit, final=True)


def _cut(table: pa.Table, limit: int, final: bool) -> Generator[pa.RecordBatch, None, pa.RecordBatch | None]:
    """Yield full batches of ``table``; return what is left over (not yet a full batch) unless ``final``."""
    cumulative = np.cumsum(_row_sizes(table))
    start, n = 0, table.num_rows
    while start < n:
        base = cumulative[start - 1] if start else 0
        end = max(int(np.searchsorted(cumulative, base + limit, side="right")), start + 1)
        if end >= n and not final and cumulative[-1] - base < limit:
            return table.slice(start).to_batches()[0] if table.slice(start).num_rows else None
        yield table.slice(start, end - start).combine_chunks().to_batches()[0]
        start = end
    return None


def prefetched(batches: Iterator[pa.RecordBatch], depth: int = 4) -> Iterator[pa.RecordBatch]:
    """Pull ``batches`` on a reader thread, at most ``depth`` ahead, so the scan of the next pages overlaps the
    export of the current batch. Errors reach the consumer; a consumer that stops early stops the reader."""
    handoff: queue_module.Queue[tuple[str, Any]] = queue_module.Queue(maxsize=depth)
    stop = threading.Event()

    def read() -> None:
        try:
            for batch in batches:
                while not stop.is_set():
                    try:
                        handoff.put(("batch", batch), timeout=0.5)
                        break
                    except queue_module.Full:
                        continue
                if stop.is_set():
                    return
            handoff.put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            handoff.put(("error", exc))

    reader = threading.Thread(target=read, name="queue-prefetch", daemon=True)
    reader.start()
    try:
        while True:
            kind, item = handoff.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
