"""The Accumulo export connector: data committed on cluster A shows up, correct and fast, in Accumulo tables on
cluster B.

The names a user needs for the main flows are here, in one flat list (each is defined in its layer, see
ARCHITECTURE.md); they load on first use, so ``import connector`` is cheap and pulls in no pyspark::

    import connector as ac

    a, b = ac.cluster("A"), ac.cluster("B")                 # clusters.toml: gateways, secret locations
    queue = ac.QueueConfig(table="exports", qid="idx", num_buckets=64)
    with a.connect() as conn, ac.ExportQueue(conn, queue) as q:
        q.init()
        ac.RowTransactions(conn, "docs").run("doc7", lambda tx: tx.export(queue, "doc7", {"new": []}))
    job = ac.DrainJob(source=a, dest=b, queue=queue, dest_table="index",
                      settings=ac.DrainSettings(translator="difference", create_dest_table=True))
    report = ac.run_drain(ac.LocalEngine(), job)            # or ac.run_batch(ac.spark_session(), job)
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

try:
    __version__ = importlib.metadata.version("accumulo-export-connector")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

#: public name -> the module that defines it
_EXPORTS = {
    # errors and settings
    "ConnectorError": "connector.errors",
    "OptionError": "connector.settings",
    # clusters and the client
    "cluster": "connector.clusters_config",
    "GatewayOptions": "connector.accumulo.options",
    "Connection": "connector.accumulo",
    "Mutation": "connector.accumulo",
    "Range": "connector.accumulo",
    "Cell": "connector.accumulo",
    # exporting
    "SequencedExport": "connector.export",
    "CellChange": "connector.export",
    "TranslationError": "connector.export",
    "AccumuloExporter": "connector.export",
    "current_seq": "connector.export",
    # producing
    "ExportQueue": "connector.queue",
    "QueueConfig": "connector.queue",
    "queue_status": "connector.queue",
    "RowTransactions": "connector.transactions",
    "Transaction": "connector.transactions",
    "outbox_status": "connector.transactions",
    "relay_table": "connector.transactions",
    "wait_for_seq": "connector.transactions",
    "queue_watermark": "connector.transactions",
    "CombineQueue": "connector.combine",
    "CombineConfig": "connector.combine",
    "combine_all": "connector.combine",
    # jobs: drain and combine, on threads of this process or on Spark
    "DrainSettings": "connector.queue",
    "DrainJob": "connector.jobs",
    "DrainReport": "connector.jobs",
    "LocalEngine": "connector.jobs",
    "run_drain": "connector.jobs",
    "drain_queue": "connector.queue",
    "stream_drain": "connector.jobs",
    "CombineJob": "connector.jobs",
    "run_combine": "connector.jobs",
    # B from A: a destination built from A's rows, checked and repaired; destinations beside the first
    "BootstrapJob": "connector.jobs",
    "BootstrapSettings": "connector.snapshot",
    "run_bootstrap": "connector.jobs",
    "batch_snapshot": "connector.snapshot",
    "Destination": "connector.snapshot",
    "verify_destination": "connector.snapshot",
    "purge_destination": "connector.snapshot",
    "snapshot_source": "connector.snapshot",
    "register_destination": "connector.queue",
    # Spark (loads pyspark)
    "spark_session": "connector.spark",
    "run_batch": "connector.spark",
    "start_stream": "connector.spark",
    "ship_connector": "connector.spark",
}

# the flat list: every name of the table above
__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'connector' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time the names load on first use
    from connector.accumulo import Cell, Connection, Mutation, Range
    from connector.accumulo.options import GatewayOptions
    from connector.clusters_config import cluster
    from connector.combine import CombineConfig, CombineQueue, combine_all
    from connector.errors import ConnectorError
    from connector.export import AccumuloExporter, CellChange, SequencedExport, TranslationError
    from connector.jobs import (
        BootstrapJob,
        CombineJob,
        DrainJob,
        DrainReport,
        LocalEngine,
        run_bootstrap,
        run_combine,
        run_drain,
        stream_drain,
    )
    from connector.queue import DrainSettings, ExportQueue, QueueConfig, drain_queue, queue_status, register_destination
    from connector.settings import OptionError
    from connector.snapshot import (
        BootstrapSettings,
        Destination,
        batch_snapshot,
        purge_destination,
        snapshot_source,
        verify_destination,
    )
    from connector.spark import run_batch, ship_connector, spark_session, start_stream
    from connector.transactions import (
        RowTransactions,
        Transaction,
        outbox_status,
        queue_watermark,
        relay_table,
        wait_for_seq,
    )
