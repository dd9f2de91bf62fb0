"""Destinations registered with a queue: tables every drain of the queue exports to, besides the one it names.

A rebuilt destination (a new cluster, a new translator or layout) runs beside the old one until the switch: it
is registered in the queue's config row (``<qid>#config``, family ``d``, one cell per destination: where its
gateway is (secret *locations* only), its table, translator and delete mode). Every drain of the queue, in any
process, exports each batch to its own destination and to every registered one before deleting the batch's
entries (:class:`~connector.export.fanout.FanoutExporter`), so an entry is deleted only once every destination
has it durably. Drains look the registrations up again every :data:`REFRESH_SECONDS`, so a registration takes
effect within that long without a restart.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, replace

from connector.accumulo import Connection, Mutation, Range
from connector.accumulo.options import GatewayOptions
from connector.export import AccumuloExporter
from connector.export.fanout import FanoutExporter
from connector.export.shared import shared_exporter
from connector.export.tombstones import DeleteMode
from connector.export.translators import check_translator_name

from .config import QueueConfig
from .errors import QueueConfigError

DESTINATION_FAMILY = b"d"
#: how long a drain may go on with the registrations it looked up (seconds)
REFRESH_SECONDS = 5.0


@dataclass(frozen=True)
class Destination:
    """A destination table: ``name`` (``<cluster>/<table>``), its cluster's gateway, the table, how exports
    become its cells (``translator``) and how its deletes are written (``delete_mode``)."""

    name: str
    gateway: GatewayOptions
    table: str
    translator: str
    delete_mode: str = DeleteMode.DELETE.value

    def __post_init__(self) -> None:
        try:
            check_translator_name(self.translator)
            DeleteMode(self.delete_mode)
        except ValueError as exc:
            raise QueueConfigError(f"destination {self.name!r}: {exc}") from None

    def to_json(self) -> bytes:
        return json.dumps({"gateway": self.gateway.to_options(""), "table": self.table,
                           "translator": self.translator, "delete_mode": self.delete_mode},
                          sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, name: str, value: bytes) -> Destination:
        try:
            d = json.loads(value)
            return cls(name, GatewayOptions.parse(d["gateway"], ""), d["table"], d["translator"], d["delete_mode"])
        except (ValueError, KeyError, TypeError) as exc:
            raise QueueConfigError(f"registered destination {name!r}: unreadable ({exc})") from None


def register_destination(conn: Connection, queue: QueueConfig, destination: Destination) -> None:
    """Register ``destination`` with the queue (replacing a registration of the same name)."""
    conn.write(queue.table, [Mutation(queue.layout.config_row).put(DESTINATION_FAMILY, destination.name.encode(),
                                                                   destination.to_json())])


def unregister_destination(conn: Connection, queue: QueueConfig, name: str) -> bool:
    """Remove the registration ``name``; False if there was none."""
    if name not in {d.name for d in registered_destinations(conn, queue)}:
        return False
    conn.write(queue.table, [Mutation(queue.layout.config_row).delete(DESTINATION_FAMILY, name.encode())])
    return True


def registered_destinations(conn: Connection, queue: QueueConfig) -> list[Destination]:
    """The destinations registered with the queue, by name."""
    return [Destination.from_json(cell.cq.decode(), cell.value)
            for cell in conn.scan(queue.table, Range.exact_row(queue.layout.config_row),
                                  columns=[DESTINATION_FAMILY], batch_size=100)]


_cache: dict[tuple[GatewayOptions, str, str], tuple[float, list[Destination]]] = {}
_cache_lock = threading.Lock()


def current_destinations(source: GatewayOptions, queue: QueueConfig) -> list[Destination]:
    """:func:`registered_destinations`, looked up at most every :data:`REFRESH_SECONDS` per process."""
    key = (source, queue.table, queue.qid)
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None and now - cached[0] < REFRESH_SECONDS:
            return cached[1]
    found = registered_destinations(source.shared(), queue)
    with _cache_lock:
        _cache[key] = (now, found)
    return found


def drain_exporter(source: GatewayOptions, queue: QueueConfig, dest: GatewayOptions, table: str, translator: str,
                   delete_mode: str, create: bool = True) -> AccumuloExporter | FanoutExporter:
    """The exporter a drain of ``queue`` uses in this process: into ``table`` on ``dest`` and every destination
    registered with the queue (each shared per process; registrations looked up every ``REFRESH_SECONDS``)."""
    primary = shared_exporter(dest, table, translator, delete_mode, create)
    others = [d for d in current_destinations(source, queue) if not _same(d.gateway, d.table, dest, table)]
    if not others:
        return primary
    return FanoutExporter([primary, *(shared_exporter(replace(d.gateway, server_wait=dest.server_wait), d.table,
                                                      d.translator, d.delete_mode, create) for d in others)])


def _same(a: GatewayOptions, a_table: str, b: GatewayOptions, b_table: str) -> bool:
    return a_table == b_table and (a.hosts or (f"{a.host}:{a.port}",)) == (b.hosts or (f"{b.host}:{b.port}",))
