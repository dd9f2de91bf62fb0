"""The bootstrap job: a destination built from A's committed rows on any engine, resumable, then checked.

1. Take the destination's lease (two bootstraps of one destination never run at once), and either resume the
   plan a killed bootstrap recorded or start one: relay what outboxes hold into the queue, note the server's
   time, and plan one task per tablet of the producer table (:mod:`connector.snapshot.state`).
2. Rounds of tasks on the engine (threads of this process, or Spark tasks), each writing what its ranges
   imply at each row's version and recording them as done (:func:`connector.snapshot.bootstrap_range`).
3. The final check: wait until the outbox cells and queue entries there when it begins are relayed and
   exported (among them any export older than the snapshot whose successors the destination never got: they
   were all in the queue when the bootstrap began), then verify the destination and repair what was proved
   wrong (:func:`connector.snapshot.verify_destination`).

The stream into the destination must run before step 1 (docs/bootstrap-and-cutover.md: The procedure): every
commit after a row's read reaches the destination through it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from connector.accumulo import AccumuloError
from connector.accumulo.options import GatewayOptions
from connector.export import (
    DestinationTableMissingError,
    prepare_destination,
    prepare_destination_table,
    translator_from_name,
)
from connector.export.shared import shared_exporter
from connector.queue import QueueConfig, QueueConfigError
from connector.queue.destinations import (
    raise_epoch,
    register_destination,
    registered_destinations,
    wait_for_acknowledgements,
)
from connector.queue.feeders import feeder_of, record_feeder
from connector.queue.requeued import record_bootstrap_read, records_time_ms
from connector.queue.stored_config import check_config, read_translator
from connector.settings import OptionError
from connector.snapshot import (
    BootstrapError,
    BootstrapInputError,
    BootstrapSettings,
    Destination,
    SnapshotError,
    SnapshotStats,
    VerifyReport,
    bootstrap_range,
    snapshot_source,
    verify_destination,
)
from connector.snapshot.bulk import bulk_range, finish_load
from connector.snapshot.implied import source_bounds
from connector.snapshot.settle import settle
from connector.snapshot.state import BootstrapState, Plan, destination_id, table_key
from connector.snapshot.verify import check_destination, check_rows_readable
from connector.transactions.relay import relay_sources

from .errors import checked_error
from .local import stop_requested
from .rounds import Engine, Round

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BootstrapJob:
    """Everything a bootstrap needs: the producer ``table`` on ``source`` (cluster A) and the queue that
    carries its exports, the destination table on ``dest``, and how (:class:`BootstrapSettings`)."""

    source: GatewayOptions
    dest: GatewayOptions
    queue: QueueConfig
    table: str
    dest_table: str
    settings: BootstrapSettings = field(default_factory=BootstrapSettings)

    @property
    def destination(self) -> str:
        return destination_id(self.dest.label, self.dest_table)


@dataclass
class BootstrapReport:
    """A bootstrap: what its tasks did (this run's), the ranges done before it resumed, and the final check."""

    totals: SnapshotStats = field(default_factory=SnapshotStats)
    ranges: int = 0
    resumed: int = 0  # ranges a killed bootstrap had finished
    relayed: int = 0
    check: VerifyReport | None = None
    seconds: float = 0.0


def preflight(job: BootstrapJob) -> tuple[BootstrapJob, str]:
    """Check what would fail inside a task: the queue, its translator, the snapshot, both clusters, the
    destination table (which must exist unless ``create_dest_table``: it is created then) and its delete mode
    and shape (:func:`~connector.export.tombstones.prepare_destination`); settle the translator (the one given,
    else the queue's stored one, else the default) and the delete mode (the table's). Returns the job and its
    snapshot's name; raises ``BootstrapInputError`` for what was given wrong, ``BootstrapError`` for a cluster
    that failed."""
    s = job.settings
    if s.snapshot is None:
        raise BootstrapInputError("a bootstrap needs a snapshot function (--snapshot module:callable or "
                                  "combine=<cid>)")
    try:
        with job.source.connect() as conn:
            for table, what in ((job.queue.table, "queue table"), (job.table, "producer table")):
                if not conn.table_exists(table):
                    raise BootstrapInputError(f"{what} {table!r} does not exist on {job.source.describe()}")
            check_config(conn, job.queue, required=True)
            translator = s.translator_or(read_translator(conn, job.queue))
            translator_from_name(translator)
            snapshot_source(conn, job.table, s.snapshot)
            check_rows_readable(conn, job.table)  # a row read in part would be written wrong
            with job.dest.connect() as b:
                if not prepare_destination_table(b, job.dest_table, s.create_dest_table):
                    # another feeder would make the final check refuse: now
                    check_destination(conn, job.table, job.queue, Destination(b, job.dest_table, translator),
                                      s.other_feeders)
                # the table's mode (recorded by its first writer), its shape checked: before any range is written
                mode = prepare_destination(b, job.dest_table, s.delete_mode)
    except SnapshotError:  # ours already (a refusal of verify's names what to do)
        raise
    except (AccumuloError, QueueConfigError, DestinationTableMissingError, OptionError, ValueError) as exc:
        raise checked_error(exc, str(exc), BootstrapError, BootstrapInputError) from None
    return replace(job, settings=replace(s, translator=translator, delete_mode=mode.value)), s.snapshot


@dataclass(frozen=True)
class RangeWriter:
    """The work of a bootstrap round's tasks (pickled to Spark executors): write one group of ranges of A and
    record each as done, under the lease of ``token``: before each range it reads the lease, and stops with
    ``BootstrapError`` once another bootstrap holds it."""

    job: BootstrapJob
    ranges: tuple[tuple[bytes | None, bytes | None], ...]
    token: bytes

    def __call__(self, group_id: int, buckets: tuple[int, ...]) -> SnapshotStats:
        """Write the ranges of A numbered ``buckets`` (a round's groups are numbers, here ranges')."""
        indices = buckets
        job, s = self.job, self.job.settings
        conn = job.source.shared()
        source = snapshot_source(conn, job.table, s.snapshot or "")
        assert s.translator is not None
        exporter = shared_exporter(job.dest, job.dest_table, s.translator, s.delete_mode, s.create_dest_table)
        record_feeder(exporter.connection, job.dest_table, feeder_of(conn, job.queue))
        state = BootstrapState(conn, job.queue, job.destination, token=self.token)
        bulks = state.bulks() if s.method != "live" else {}
        total = SnapshotStats()
        for i in indices:
            started = time.monotonic()
            state.check_held()  # read from A: this task may run long after its driver lost the lease
            record = functools.partial(state.mark_bulk, i)
            if i in bulks and finish_load(exporter.connection, job.dest_table, *bulks[i], record):
                state.mark_done(i, {"resumed_load": bulks[i][0]})
                continue
            if s.method == "live":
                stats = bootstrap_range(conn, job.table, self.ranges[i], source, job.queue, exporter,
                                        stopping=stop_requested)
            else:
                splits = exporter.connection.list_splits(job.dest_table)
                stats = bulk_range(conn, job.table, self.ranges[i], source, job.queue, exporter, splits, record,
                                   live_below=s.bulk_cells if s.method == "auto" else 0)
            stats.seconds = time.monotonic() - started
            state.mark_done(i, {"rows": stats.rows, "exports": stats.exports, "cells": stats.cells})
            total += stats
        return total


def run_bootstrap(engine: Engine, job: BootstrapJob, progress: Progress | None = None) -> BootstrapReport:
    """Build the destination from A's rows, resuming what a killed bootstrap of it left, then (unless the
    settings say not to) check and repair it. See the module's description."""
    say = progress or (lambda line: None)
    started = time.monotonic()
    job, snapshot = preflight(job)
    report = BootstrapReport()
    with job.source.connect() as conn:
        # the table's lease too: a purge or a repair through another name of B is excluded all the same
        state = BootstrapState(conn, job.queue, job.destination, table_key=table_key(job.dest.shared(),
                                                                                     job.dest_table))
        state.acquire()
        try:
            plan = state.plan()
            if plan is not None and (plan.table, plan.snapshot) != (job.table, snapshot):
                raise BootstrapInputError(
                    f"an unfinished bootstrap of {job.destination} read table {plan.table!r} with snapshot "
                    f"{plan.snapshot!r}; finish it with those, or forget it first (accumulo-export bootstrap "
                    "--forget)")
            if plan is None:
                # before A is read, by the clock of the queue's records tablet: a re-queued dead letter older than
                # this is already in the snapshot, and the drains leave it out here (connector.queue.requeued)
                record_bootstrap_read(job.dest.shared(), job.dest_table, feeder_of(conn, job.queue).queue_id,
                                      records_time_ms(conn, job.queue), job.table)
                registered = {d.name: d for d in registered_destinations(conn, job.queue)}
                if job.destination in registered:
                    # registered again (a new epoch): once every drain process acknowledged it, each batch a
                    # drain deletes has reached this destination (or was read before A is read below)
                    epoch = register_destination(conn, job.queue, registered[job.destination])
                else:
                    epoch = raise_epoch(conn, job.queue)  # every drain process reads that record again
                waited = wait_for_acknowledgements(conn, job.queue, epoch, say=say)
                say(f"{waited} drain process(es) acknowledged registration epoch {epoch} or had been silent long "
                    "enough")
                report.relayed = relay_sources(conn, job.queue.table, job.queue.layout.config_row).relayed
                source = snapshot_source(conn, job.table, snapshot)
                plan = Plan(job.table, snapshot, tuple(source_bounds(conn, job.table, source)),
                            state.server_time_ms())
                state.start(plan)
            done = state.done()
            report.ranges, report.resumed = len(plan.ranges), len(done)
            todo = [i for i in range(len(plan.ranges)) if i not in done]
            say(f"{len(todo)} of {len(plan.ranges)} ranges of {job.table} to write into {job.dest_table}"
                + (f" ({len(done)} done by an earlier run)" if done else ""))
            per = job.settings.ranges_per_task
            groups = tuple(tuple(todo[k:k + per]) for k in range(0, len(todo), per))
            if groups:
                report.totals = engine.run(Round(RangeWriter(job, plan.ranges, state.token), groups, SnapshotStats,
                                                 BootstrapError))
            state.check_held()  # read from A: a bootstrap that lost its lease must not repair B
            if job.settings.final_check:
                report.check = final_check(job, plan, say)
            state.clear()
        finally:
            state.release()
    report.seconds = time.monotonic() - started
    return report


def final_check(job: BootstrapJob, plan: Plan, say: Progress) -> VerifyReport:
    """Wait until the outbox cells and queue entries there now are relayed and exported (every export older
    than the snapshot, whose successors the destination may never have got, was in the queue when the
    bootstrap began, so it is among them), then verify and repair what was proved wrong."""
    s = job.settings
    assert s.translator is not None and s.snapshot is not None
    with job.source.connect() as a, job.dest.connect() as b:
        source = snapshot_source(a, job.table, s.snapshot)
        say("final check: waiting for what the queue and the outboxes hold now to reach the destination")
        left = settle(a, job.table, source, job.queue, s.settle_seconds, say)
        if not left.done:
            raise BootstrapError(
                f"final check: {left.outbox:,} outbox cells were not relayed and {left.entries:,} queue entries "
                f"not exported within {s.settle_seconds:.0f} s; is a drain into {job.dest_table} running "
                "(accumulo-export drain --stream)? The snapshot is written; rerun the bootstrap to do the final "
                "check")
        # before verify reads A: a re-queued dead letter older than this is in what the verify leaves on B (its
        # commit was visible), so from now on the drains leave it out here too (DESIGN.md: A dead letter older ...)
        record_bootstrap_read(b, job.dest_table, feeder_of(a, job.queue).queue_id, records_time_ms(a, job.queue),
                              job.table)
        wait_for_acknowledgements(a, job.queue, raise_epoch(a, job.queue), say=say)
        say("final check: verifying the destination against A")
        return verify_destination(a, job.table, source, job.queue,
                                  Destination(b, job.dest_table, s.translator, s.delete_mode), repair=True,
                                  settle_seconds=s.settle_seconds, other_feeders=s.other_feeders, progress=say,
                                  lease_held=True)  # run_bootstrap holds the table's lease
