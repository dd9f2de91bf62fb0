"""Verify and repair never make a destination wrong, on real clusters: a repair changes only what verify
proved wrong (rows whose snapshot failed make their ranges unrepairable; a destination other queues or producer
tables feed is refused unless told to keep their cells; a missing destination table is one line), its writes
take effect without anyone compacting B and do not depend on the order Accumulo applies them, and the waits
between its passes and before a bootstrap's final check judge the queue by content, never by a clock."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from connector.accumulo import Cell, IteratorSetting, Mutation, Range
from connector.export.core import current_seq
from connector.export.tombstones import tombstones_below
from connector.jobs import LocalEngine, run_drain
from connector.jobs.bootstrap import final_check, preflight, run_bootstrap
from connector.queue import ExportQueue
from connector.snapshot import BootstrapError, Destination, batch_snapshot, snapshot_source, verify_destination
from connector.snapshot import purge as purge_module
from connector.snapshot import verify as verify_module
from connector.snapshot.errors import VerifyRefusedError
from connector.snapshot.purge import purge_destination
from connector.snapshot.state import BootstrapState, Plan
from connector.transactions import RowTransactions
from examples.inverted_count_index import count_update
from examples.inverted_count_index import snapshot as index_snapshot

from .conftest import Scenario, run_cli, unique_table
from .test_bootstrap import SNAPSHOT, assert_exact, bootstrap_job, commit

FAILING = f"{__name__}:failing_snapshot"
#: rows whose snapshot raises
FAILS_ON: set[bytes] = set()
ALL_VERSIONS = IteratorSetting(20, "vers", "org.apache.accumulo.core.iterators.user.VersioningIterator",
                               {"maxVersions": "1000"})


def failing_snapshot(row: bytes, cells: Sequence[Cell]) -> list[tuple[str, dict]]:
    """The example's snapshot, except that it raises on the rows in ``FAILS_ON``."""
    if row in FAILS_ON:
        raise RuntimeError(f"cannot read {row!r}")
    return index_snapshot(row, cells)


def built(scenario: Scenario, words: dict[str, int], dest: str | None = None) -> tuple[RowTransactions, str]:
    """Commit ``words``' counts and drain them into ``dest`` (the scenario's index by default)."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for word, count in words.items():
        commit(txs, scenario, word, count)
    txs.flush()
    dest = dest or scenario.index
    run_drain(LocalEngine(), scenario.job(dest_table=dest, create_dest_table=True))
    return txs, dest


def verify(scenario: Scenario, dest: str, *, snapshot: str = SNAPSHOT, **kwargs) -> verify_module.VerifyReport:
    a, b = scenario.conn_a, scenario.conn_b
    return verify_destination(a, scenario.counts, snapshot_source(a, scenario.counts, snapshot), scenario.queue,
                              Destination(b, dest, "difference"), settle_seconds=kwargs.pop("settle_seconds", 5),
                              **kwargs)


def index_cell(scenario: Scenario, dest: str, word: str) -> Cell | None:
    return next((c for c in scenario.conn_b.scan(dest) if c.cq == word.encode()), None)


def versions_of(scenario: Scenario, dest: str, row: bytes, cq: bytes) -> list[tuple[int, bytes]]:
    """Every version of one cell B holds, (timestamp, value), newest first (the versioning iterator widened)."""
    return [(c.ts, c.value) for c in scenario.conn_b.scan(dest, Range.exact_row(row), iterators=[ALL_VERSIONS])
            if c.cq == cq]


# --- a repair changes only what was proved wrong --------------------------------------------------------------

def test_rows_whose_snapshot_failed_make_their_ranges_unrepairable_and_the_rest_is_repaired(scenario):
    """A snapshot that raises on one word's row: its correct index cell would look unexpected. The range that
    holds it is reported unrepairable and left alone; a damaged cell in another range is repaired."""
    txs, dest = built(scenario, {"f001": 1, "f002": 2, "f004": 4, "f005": 5})
    b = scenario.conn_b
    b.add_splits(dest, [b"00000003"])  # two ranges: counts 1-3 and 4-5
    f004 = index_cell(scenario, dest, "f004")
    assert f004 is not None
    b.write(dest, [Mutation(f004.row).delete(f004.cf, f004.cq, timestamp=f004.ts)])  # damage in the second range
    b.compact_table(dest, wait=True)
    FAILS_ON.add(b"f002")
    try:
        report = verify(scenario, dest, snapshot=FAILING, repair=True)
    finally:
        FAILS_ON.clear()
    assert report.failed_rows == 1 and "cannot read" in report.snapshot.errors[0], report.to_json()
    assert report.unrepairable == 1 and not report.clean
    (first,) = [r for r in report.results if r.unrepairable]
    assert [(d.kind, d.cq) for d in first.diffs] == [("unexpected", b"f002")]
    assert index_cell(scenario, dest, "f002") is not None, "the correct cell of the failed row was deleted"
    assert report.repaired == 1 and index_cell(scenario, dest, "f004") is not None
    assert verify(scenario, dest).differences == 0
    txs.close()


def test_a_destination_another_queue_feeds_is_refused_unless_its_cells_are_kept(scenario):
    txs, dest = built(scenario, {"q001": 1, "q002": 2})
    other = Scenario(scenario.accumulo)  # another queue and producer table, drained into the same destination
    try:
        built(other, {"z001": 7, "z002": 8}, dest)
        with pytest.raises(VerifyRefusedError, match=f"queue 'cidx' of table '{other.queue.table}'"):
            verify(scenario, dest, repair=True)
        assert {c.cq for c in scenario.conn_b.scan(dest)} == {b"q001", b"q002", b"z001", b"z002"}
        kept = verify(scenario, dest, repair=True, other_feeders="keep")
        assert kept.differences == 0 and kept.clean
        # what this producer table implies is still checked and repaired
        q001 = index_cell(scenario, dest, "q001")
        assert q001 is not None
        scenario.conn_b.write(dest, [Mutation(q001.row).delete(q001.cf, q001.cq, timestamp=q001.ts)])
        fixed = verify(scenario, dest, repair=True, other_feeders="keep")
        assert [(d.kind, d.cq) for r in fixed.results for d in r.diffs] == [("missing", b"q001")]
        assert {c.cq for c in scenario.conn_b.scan(dest)} == {b"q001", b"q002", b"z001", b"z002"}
    finally:
        other.close()
    txs.close()


def test_a_destination_another_producer_table_feeds_through_the_queue_is_refused(scenario):
    txs, dest = built(scenario, {"p001": 1})
    second = unique_table("counts2")
    others = RowTransactions(scenario.conn_a, second)
    others.init()

    def change(tx):
        tx.put(b"c", b"n", b"3")
        tx.export(scenario.queue, "p900", count_update("p900", None, 3))

    others.run("p900", change)
    others.flush()
    run_drain(LocalEngine(), scenario.job(dest_table=dest))
    with pytest.raises(VerifyRefusedError, match=f"producer table '{second}'"):
        verify(scenario, dest, repair=True)
    assert index_cell(scenario, dest, "p900") is not None
    others.close()
    txs.close()


def test_a_missing_destination_table_is_one_line_naming_the_closest(scenario, cli_env):
    txs, dest = built(scenario, {"m001": 1})
    typo = dest[:-1] + ("x" if not dest.endswith("x") else "y")
    with pytest.raises(VerifyRefusedError, match=f"destination table '{typo}' does not exist.*did you mean '{dest}'"):
        verify(scenario, typo)
    for command in (["verify"], ["verify", "--repair"]):
        out = run_cli(cli_env, *command, "--source", "A", "--table", scenario.queue.table, "--queue",
                      scenario.queue.qid, "--producer-table", scenario.counts, "--dest", "B", "--dest-table", typo,
                      "--snapshot", SNAPSHOT)
        assert out.returncode == 2, out
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and typo in lines[0] and dest in lines[0], out.stderr
    assert not scenario.conn_b.table_exists(typo)
    txs.close()


# --- repairs take effect, deterministically ------------------------------------------------------------------

def test_cells_deleted_at_their_own_timestamp_are_repaired_without_compacting_by_hand(scenario):
    """A delete at a cell's own timestamp hides a put at that timestamp until a full compaction: the repair
    compacts the tablets it must, so a second verify finds nothing, and a later export still wins."""
    txs, dest = built(scenario, {f"d{i:03d}": i for i in range(1, 6)})
    b = scenario.conn_b
    damaged = [c for c in b.scan(dest) if c.cq in (b"d002", b"d004")]
    b.write(dest, [Mutation(c.row).delete(c.cf, c.cq, timestamp=c.ts) for c in damaged])
    report = verify(scenario, dest, repair=True)
    assert (report.differences, report.repaired, report.unrepaired) == (2, 2, 0), report.to_json()
    assert report.compacted >= 1 and report.clean
    assert verify(scenario, dest).differences == 0
    commit(txs, scenario, "d002", 9)  # a later export wins over the repaired cell
    txs.flush()
    run_drain(LocalEngine(), scenario.job())
    assert_exact(scenario, dest)
    txs.close()


def test_a_wrong_value_at_the_rows_version_is_replaced_not_doubled(scenario):
    """B holds the cell's key at the row's version with another value: putting the right value at the same
    timestamp would leave two puts of one key and timestamp (Accumulo keeps either). After the repair B holds
    one version there, the right one, whatever a compaction does."""
    txs, dest = built(scenario, {"r001": 1, "r002": 2})
    b = scenario.conn_b
    cell = index_cell(scenario, dest, "r002")
    assert cell is not None
    b.write(dest, [Mutation(cell.row).put(cell.cf, cell.cq, b"wrong", timestamp=cell.ts)])
    b.flush_table(dest, wait=True)
    assert (cell.ts, b"wrong") in versions_of(scenario, dest, cell.row, cell.cq)
    report = verify(scenario, dest, repair=True)
    assert [(d.kind, d.cq) for r in report.results for d in r.diffs] == [("different", b"r002")]
    assert report.repaired == 1 and report.clean
    assert versions_of(scenario, dest, cell.row, cell.cq) == [(cell.ts, cell.value)]
    b.compact_table(dest, wait=True)
    assert versions_of(scenario, dest, cell.row, cell.cq) == [(cell.ts, cell.value)]
    txs.close()


def test_a_wrong_value_newer_than_the_rows_version_is_repaired_and_later_exports_win(scenario):
    txs, dest = built(scenario, {"n001": 1})
    b = scenario.conn_b
    cell = index_cell(scenario, dest, "n001")
    assert cell is not None
    b.write(dest, [Mutation(cell.row).put(cell.cf, cell.cq, b"by hand", timestamp=cell.ts + 5_000_000)])
    report = verify(scenario, dest, repair=True)
    assert (report.repaired, report.unrepaired) == (1, 0) and report.clean, report.to_json()
    assert index_cell(scenario, dest, "n001") == cell
    commit(txs, scenario, "n001", 3)
    txs.flush()
    run_drain(LocalEngine(), scenario.job())
    assert_exact(scenario, dest)
    txs.close()


def test_an_unexpected_cell_is_hidden_above_its_timestamp_so_a_redelivered_copy_cannot_tie(scenario):
    """Finding 6 of issue 45: a stray cell may be the stale put of an export whose copy lands again later, at the
    stray's own timestamp. A tombstone there would tie with it (Accumulo keeps either): the repair's tombstone is
    one above it, and the copy stays hidden whatever a compaction does."""
    txs, dest = built(scenario, {"u001": 1})
    b = scenario.conn_b
    cell = index_cell(scenario, dest, "u001")
    assert cell is not None
    stale = Mutation(cell.row).put(cell.cf, b"u999", b"", timestamp=cell.ts - 10)
    b.write(dest, [stale])
    report = verify(scenario, dest, repair=True)
    assert [(d.kind, d.cq) for r in report.results for d in r.diffs] == [("unexpected", b"u999")]
    assert report.repaired == 1 and report.clean, report.to_json()
    assert _tombstone_times(scenario, dest, b"u999") == [cell.ts - 9]
    b.write(dest, [stale])  # the redelivered copy
    b.compact_table(dest, wait=True)
    assert index_cell(scenario, dest, "u999") is None
    assert_exact(scenario, dest)
    txs.close()


def test_a_stray_cell_ahead_of_every_seq_is_dropped_without_hiding_later_exports(scenario):
    """Finding 6 of issue 45: a cell written by hand about four months ahead of the clock is no export's. A
    tombstone at its timestamp would hide every later put of the cell until the clock passed it; the repair drops
    it by a filtered compaction of its tablet instead, writing nothing there, and a later export shows."""
    txs, dest = built(scenario, {"h001": 1})
    b = scenario.conn_b
    cell = index_cell(scenario, dest, "h001")
    assert cell is not None
    ahead = current_seq() + 10**13
    b.write(dest, [Mutation(b"00000002").put(cell.cf, b"h002", b"", timestamp=ahead),  # unexpected
                   Mutation(cell.row).put(cell.cf, cell.cq, b"by hand", timestamp=ahead)])  # different
    report = verify(scenario, dest, repair=True)
    assert sorted(d.kind for r in report.results for d in r.diffs) == ["different", "unexpected"]
    assert (report.repaired, report.unrepaired) == (2, 0) and report.clean, report.to_json()
    assert not [c for c in b.scan(dest, iterators=[ALL_VERSIONS]) if c.ts >= ahead]
    assert _tombstone_times(scenario, dest, b"h002") == []
    commit(txs, scenario, "h002", 2)  # a later export of the stray's cell
    txs.flush()
    run_drain(LocalEngine(), scenario.job())
    assert index_cell(scenario, dest, "h002") is not None
    assert_exact(scenario, dest)
    txs.close()


def test_a_repair_and_a_purge_of_one_destination_exclude_each_other(scenario, monkeypatch):
    """Finding 5 of issue 45: a repair's full compactions beside a purge could drop a newer delete with its
    tombstone. A ``verify --repair`` takes the destination table's lease, which a purge holds while it runs."""
    monkeypatch.setattr(purge_module, "MIN_PURGE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(purge_module, "LATE_WRITE_SECONDS", 0.0)
    txs, dest = built(scenario, {"x001": 1})
    commit(txs, scenario, "x001", 2)  # the cell at count 1 is now a tombstone: something to purge
    txs.flush()
    run_drain(LocalEngine(), scenario.job())
    a, b = scenario.conn_a, scenario.conn_b
    stray = Mutation(b"00000009").put(b"w", b"x009", b"", timestamp=current_seq() - 10**6)
    b.write(dest, [stray])  # something to repair
    refused: list[str] = []

    def repair_during_the_grace(line: str) -> None:
        if "for writers" in line:
            try:
                verify(scenario, dest, repair=True)
            except BootstrapError as exc:
                refused.append(str(exc))

    purged = purge_destination(a, scenario.queue, b, dest, "B", grace=0.2, progress=repair_during_the_grace)
    assert purged.deleted == 1
    assert len(refused) == 1 and refused[0].startswith(f"a tombstone purge of B/{dest} is running"), refused
    assert index_cell(scenario, dest, "x009") is not None, "the refused repair wrote nothing"

    real_repair = verify_module.repair_cells

    def purge_during_the_repair(*args, **kwargs):
        with pytest.raises(BootstrapError, match=f"a repair of {dest} .* is running"):
            purge_destination(a, scenario.queue, b, dest, "B", grace=0)
        refused.append("purge")
        return real_repair(*args, **kwargs)

    monkeypatch.setattr(verify_module, "repair_cells", purge_during_the_repair)
    report = verify(scenario, dest, repair=True)
    assert refused[-1] == "purge" and report.repaired == 1 and report.clean, report.to_json()
    assert_exact(scenario, dest)
    txs.close()


def test_a_row_that_commits_again_and_is_purged_before_the_repair_takes_the_lease_is_in_flight(scenario,
                                                                                                monkeypatch):
    """Found by the simulation (schedule 1104006170): a cell is proved missing; before the repair takes the table's
    lease, its row commits again (the old count's cell deleted at the new seq: a tombstone), the stream drains it,
    a purge turns that tombstone into a delete and B compacts both away. A put of the old cell at its old version
    would then show for good. The repair reads its rows again under the lease: that cell is in flight."""
    monkeypatch.setattr(purge_module, "MIN_PURGE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(purge_module, "LATE_WRITE_SECONDS", 0.0)
    txs, dest = built(scenario, {"j001": 1, "j002": 2})
    a, b = scenario.conn_a, scenario.conn_b
    cell = index_cell(scenario, dest, "j002")
    assert cell is not None
    b.write(dest, [Mutation(cell.row).delete(cell.cf, cell.cq, timestamp=cell.ts)])  # proved missing
    real_lease = verify_module.table_lease
    purged: list[int] = []

    def commit_drain_and_purge_first(*args, **kwargs):
        commit(txs, scenario, "j002", 9)
        txs.flush()
        run_drain(LocalEngine(), scenario.job(dest_table=dest))
        purged.append(purge_destination(a, scenario.queue, b, dest, "B", grace=0).deleted)
        b.compact_table(dest, flush=True, wait=True)  # the delete and all it hides are gone from B's files
        return real_lease(*args, **kwargs)

    monkeypatch.setattr(verify_module, "table_lease", commit_drain_and_purge_first)
    report = verify(scenario, dest, repair=True)
    assert purged and purged[0] >= 1, purged
    assert (report.differences, report.unrepaired, report.in_flight) == (0, 0, 1), report.to_json()
    monkeypatch.undo()
    assert_exact(scenario, dest)
    txs.close()


def _tombstone_times(scenario: Scenario, dest: str, cq: bytes) -> list[int]:
    """The timestamps of the tombstones of the index cells of word ``cq``."""
    return sorted(ts for page in tombstones_below(scenario.conn_b, dest, None)
                  for q, ts in zip(page.column("cq").to_pylist(), page.column("ts").to_pylist(), strict=True)
                  if q == cq)


# --- waits judge the queue by content, never by a clock ------------------------------------------------------

class _ClockBehind:
    """The ``time`` module as seen by a host whose wall clock is 90 s behind (monotonic time is unchanged)."""

    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    @staticmethod
    def time() -> float:
        return time.time() - 90


def test_verify_on_a_host_whose_clock_is_behind_waits_for_the_queue_all_the_same(scenario, monkeypatch):
    """Entries wait in the queue (no drain runs): the second pass must wait for them and say so, whatever the
    verify host's clock says about their timestamps."""
    txs, dest = built(scenario, {"c001": 1})
    for i in range(2, 5):
        commit(txs, scenario, f"c{i:03d}", i)
    txs.flush()
    assert scenario.depth() == 3
    monkeypatch.setattr(verify_module, "time", _ClockBehind)
    report = verify(scenario, dest, settle_seconds=3)
    assert report.pending == 3, report.to_json()
    txs.close()


def test_the_final_check_waits_for_an_entry_whose_timestamp_is_ahead_of_the_bootstraps_clock(scenario):
    """An old export's entry stamped by a tablet server whose clock runs ahead: the final check waits for it
    to be exported all the same (no drain runs here, so it must time out rather than verify without it)."""
    txs, dest = built(scenario, {"t001": 1, "t002": 2})
    job = bootstrap_job(scenario, dest, settle_seconds=3, final_check=False)
    run_bootstrap(LocalEngine(), job)
    first = commit(txs, scenario, "t001", 5)
    txs.flush()
    run_drain(LocalEngine(), scenario.job(dest_table=unique_table("elsewhere"), create_dest_table=True))
    entry = ExportQueue(scenario.conn_a, scenario.queue).mutation("t001", count_update("t001", None, 1), first - 1)
    ahead = int(time.time() * 1000) + 600_000  # ten minutes ahead
    scenario.conn_a.write(scenario.queue.table, [Mutation(entry.row).put(u.cf, u.cq, u.value, timestamp=ahead)
                                                 for u in entry.updates])
    assert scenario.depth() == 1
    job, _ = preflight(job)
    with scenario.a.gateway_options().connect() as conn:
        now_ms = BootstrapState(conn, scenario.queue, job.destination).server_time_ms()
    plan = Plan(scenario.counts, SNAPSHOT, (), now_ms)
    with pytest.raises(BootstrapError, match="1 queue entries not exported"):
        final_check(job, plan, lambda line: None)
    txs.close()


# --- rows read whole: the gateway's user must see every label of the producer table --------------------------

def test_verify_and_bootstrap_refuse_a_producer_table_whose_labels_the_user_cannot_read(scenario):
    """A row with a cell the gateway's user cannot see would be read in part, without a word: what it implies
    would be computed from part of it, and a repair would write that. Both refuse, naming the label; once the
    user holds it, verify runs."""
    txs, dest = built(scenario, {"v001": 1, "v002": 2})
    secret = RowTransactions(scenario.conn_a, scenario.counts)

    def hidden(tx):
        tx.put(b"c", b"note", b"for some eyes", visibility=b"eyesonly")

    secret.run("v002", hidden)
    with pytest.raises(VerifyRefusedError, match="lacks the labels of 'eyesonly' \\(1 cells\\)"):
        verify(scenario, dest, repair=True)
    with pytest.raises(VerifyRefusedError, match="eyesonly"):
        run_bootstrap(LocalEngine(), bootstrap_job(scenario, unique_table("never")))
    conn, user = scenario.conn_a, "root"
    before = conn.call("getUserAuthorizations", user)
    conn.call("changeUserAuthorizations", user, {*before, b"eyesonly"})
    try:
        assert verify(scenario, dest).differences == 0
    finally:
        conn.call("changeUserAuthorizations", user, set(before))
    secret.close()
    txs.close()


def test_verify_refuses_a_producer_table_without_visibility_summaries_until_it_is_set_up(scenario):
    """A table whose files carry no visibility summary (made before the summarizer was configured): verify
    cannot tell whether it reads rows whole, and says what to do; after the set-up and one compaction it runs."""
    from connector.accumulo.summaries import SUMMARIZER_PROPERTY, ensure_visibility_summary

    txs, dest = built(scenario, {"s001": 1})
    conn = scenario.conn_a
    conn.remove_table_property(scenario.counts, SUMMARIZER_PROPERTY)
    with pytest.raises(VerifyRefusedError, match="no visibility summarizer is configured"):
        verify(scenario, dest)
    conn.compact_table(scenario.counts, wait=True)  # a file written without a summary
    assert ensure_visibility_summary(conn, scenario.counts) is True
    with pytest.raises(VerifyRefusedError, match="files written before the summarizer was configured"):
        verify(scenario, dest)
    conn.compact_table(scenario.counts, wait=True)
    assert verify(scenario, dest).differences == 0
    txs.close()


# --- the batch form of snapshot functions, and the built-in mirror --------------------------------------------

def test_a_batch_snapshot_builds_the_same_destination_and_verify_agrees_with_both_forms(scenario):
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(40):
        commit(txs, scenario, f"b{i:03d}", i % 7)  # counts of 0 imply nothing
    txs.flush()
    scenario.conn_a.add_splits(scenario.counts, [b"b013", b"b027"])
    run_drain(LocalEngine(), scenario.job())  # the queue's entries reach the stream's destination
    dest = unique_table("batchform")
    report = run_bootstrap(LocalEngine(), bootstrap_job(scenario, dest, snapshot=BATCH_FORM, settle_seconds=30))
    assert report.totals.failed == 0 and report.check is not None and report.check.clean
    assert_exact(scenario, dest)
    per_row = {(c.row, c.cf, c.cq, c.value, c.ts) for c in scenario.conn_b.scan(scenario.index)}
    assert {(c.row, c.cf, c.cq, c.value, c.ts) for c in scenario.conn_b.scan(dest)} == per_row
    for snap in (SNAPSHOT, BATCH_FORM):
        assert verify(scenario, dest, snapshot=snap).differences == 0
    txs.close()


BATCH_FORM = "examples.inverted_count_index:snapshot_batch"


@batch_snapshot
def raising_batch(cells):
    raise RuntimeError("this batch cannot be read")


def test_a_batch_snapshot_that_raises_fails_every_row_of_its_batch_and_repairs_nothing_there(scenario):
    txs, dest = built(scenario, {"x001": 1, "x002": 2})
    report = verify(scenario, dest, snapshot=f"{__name__}:raising_batch", repair=True)
    assert report.failed_rows == 2 and "this batch cannot be read" in report.snapshot.errors[0]
    assert report.repaired == 0 and report.unrepairable == 1 and not report.clean
    assert {c.cq for c in scenario.conn_b.scan(dest)} == {b"x001", b"x002"}
    txs.close()


def test_the_mirror_snapshot_builds_a_replica_of_the_producer_table(scenario):
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(10):
        commit(txs, scenario, f"m{i:03d}", i + 1)
    replica = unique_table("replica")
    job = bootstrap_job(scenario, replica, snapshot="mirror", final_check=False)
    report = run_bootstrap(LocalEngine(), job)
    assert (report.totals.rows, report.totals.cells) == (10, 10)
    version_cells = scenario.conn_a.scan(scenario.counts, columns=[(b"!tx", b"v")])
    versions = {c.row: int(c.value.split(b" ")[0]) for c in version_cells}
    own = {(c.row, c.cf, c.cq, c.value) for c in scenario.conn_a.scan(scenario.counts, columns=[b"c"])}
    copied = list(scenario.conn_b.scan(replica))
    assert {(c.row, c.cf, c.cq, c.value) for c in copied} == own
    assert all(c.ts == versions[c.row] for c in copied)
    txs.close()


def test_tx_init_sets_up_an_existing_table_for_verify(scenario, cli_env):
    from connector.accumulo.summaries import SUMMARIZER_PROPERTY

    txs, dest = built(scenario, {"i001": 1})
    conn = scenario.conn_a
    conn.remove_table_property(scenario.counts, SUMMARIZER_PROPERTY)
    conn.compact_table(scenario.counts, wait=True)  # its files now carry no visibility summary
    with pytest.raises(VerifyRefusedError, match="accumulo-export tx init"):
        verify(scenario, dest)
    out = run_cli(cli_env, "tx", "init", "--cluster", "A", "--table", scenario.counts, "--compact")
    assert out.returncode == 0 and "visibility summaries ready" in out.stdout, out
    assert verify(scenario, dest).differences == 0
    txs.close()


# --- a row that commits while verify reads is in flight, not a failure ----------------------------------------

def test_a_commit_between_the_second_reads_of_a_and_b_is_in_flight(scenario, monkeypatch):
    """Chaos seed 7307: a row committed at V (its index cell not yet exported) reads as missing in both passes,
    because between the second pass's read of A (still at V) and its read of B the row committed again and that
    export's tombstone hid the cell the export at V had put. B's absence looked unchanged; it is in flight, and a
    repair (whose put at V the newer tombstone hides) must neither run for it nor fail on it."""
    txs, dest = built(scenario, {"k002": 2})
    commit(txs, scenario, "k001", 5)  # at V, not drained: B lacks 00000005/k001
    txs.flush()
    reads = []
    real_actual = verify_module._actual

    def commit_before_the_second_read_of_b(dest_, bounds):
        reads.append(bounds)
        if len(reads) == 2:  # the second pass has read A (k001 at V); the row commits again, the stream drains
            commit(txs, scenario, "k001", 7)
            txs.flush()
            run_drain(LocalEngine(), scenario.job(dest_table=dest))
        return real_actual(dest_, bounds)

    monkeypatch.setattr(verify_module, "_actual", commit_before_the_second_read_of_b)
    report = verify(scenario, dest, repair=True, settle_seconds=2)
    assert len(reads) == 2
    assert (report.differences, report.unrepaired) == (0, 0) and report.in_flight >= 1, report.to_json()
    assert report.clean
    monkeypatch.undo()
    assert_exact(scenario, dest)
    txs.close()


def test_a_cell_whose_row_commits_during_its_repair_is_in_flight_not_unrepaired(scenario, monkeypatch):
    """A cell proved missing; its row commits again (the old count's cell deleted at the new seq) after the
    second pass and before the repair looks at what shows: the repair's put at the old version stays hidden, as
    it should. That cell is in flight, not unrepaired."""
    txs, dest = built(scenario, {"j001": 1, "j002": 2})
    b = scenario.conn_b
    cell = index_cell(scenario, dest, "j002")
    assert cell is not None
    b.write(dest, [Mutation(cell.row).delete(cell.cf, cell.cq, timestamp=cell.ts)])
    real_repair = verify_module.repair_cells

    def commit_then_repair(*args, **kwargs):
        commit(txs, scenario, "j002", 9)
        txs.flush()
        run_drain(LocalEngine(), scenario.job(dest_table=dest))
        return real_repair(*args, **kwargs)

    monkeypatch.setattr(verify_module, "repair_cells", commit_then_repair)
    report = verify(scenario, dest, repair=True)
    assert (report.differences, report.unrepaired, report.in_flight) == (0, 0, 1), report.to_json()
    assert report.clean
    monkeypatch.undo()
    assert_exact(scenario, dest)
    txs.close()
