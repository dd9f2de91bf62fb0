"""One exporter per process and destination, shared by the tasks and threads that drain into it."""

from __future__ import annotations

import threading

from connector.accumulo.options import GatewayOptions

from .accumulo_exporter import AccumuloExporter

_exporters: dict[tuple, AccumuloExporter] = {}
_exporters_lock = threading.Lock()


def shared_exporter(dest: GatewayOptions, table: str, translator: str, mode: str | None,
                    create: bool) -> AccumuloExporter:
    """The exporter of this process for that destination, table, translator and delete mode asked for (None: the
    table's recorded one; :func:`~connector.export.tombstones.prepare_destination`): one open writer
    per Python worker, reused across Spark tasks and by the threads of an in-process drain (the lock keeps two
    threads from each making one). ``create``: make the table when missing, once per process."""
    key = (dest, table, translator, mode, create)
    with _exporters_lock:
        exporter = _exporters.get(key)
        if exporter is None:
            exporter = AccumuloExporter(dest.shared(), table, translator, delete_mode=mode).ensure_table(create)
            _exporters[key] = exporter
    return exporter
