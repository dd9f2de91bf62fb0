"""B from A: a destination built from A's committed rows (bootstrap), checked against them (verify) and
repaired, while producers commit and the stream drains.

Modules: ``functions`` (snapshot functions: what one row implies), ``rows`` (rows read whole at one version, and
their snapshot exports), ``implied`` (the cells a range of A implies on B), ``compare`` (per-range digests,
cell-by-cell differences), ``verify`` (two passes), ``repair`` (writing the fixes), ``settle`` (waiting for what
was in flight), ``bootstrap`` (its settings and one range's work), ``bulk`` (its bulk-load path), ``state`` (a
bootstrap's lease, plan and progress), ``purge`` (a destination's tombstones reclaimed, proved first),
``auto_purge`` (a stream's purges on its own), ``shared_cells`` (a destination cell two rows imply, refused
for purge), ``native_digest`` (the Rust digests), ``errors``. The jobs that
run them on an engine are
``connector.jobs.bootstrap``; the commands ``accumulo-export bootstrap``, ``verify`` and ``purge-tombstones``::

    report = run_bootstrap(LocalEngine(), BootstrapJob(source=a, dest=b, queue=queue, table="counts",
                                                        dest_table="index",
                                                        settings=BootstrapSettings(snapshot="app:snapshot")))
"""

from .bootstrap import BootstrapSettings, bootstrap_range
from .compare import CellDiff
from .errors import BootstrapError, BootstrapInputError, SnapshotError, VerifyError
from .functions import BatchSnapshot, Snapshot, SnapshotSource, batch_snapshot, snapshot_source
from .implied import SnapshotStats
from .purge import PurgeReport, purge_destination
from .verify import Destination, RangeResult, VerifyReport, verify_destination

__all__ = ["BatchSnapshot", "BootstrapError", "BootstrapInputError", "BootstrapSettings", "CellDiff", "Destination",
           "PurgeReport", "RangeResult", "Snapshot", "SnapshotError", "SnapshotSource", "SnapshotStats", "VerifyError",
           "VerifyReport", "batch_snapshot", "bootstrap_range", "purge_destination", "snapshot_source",
           "verify_destination"]
