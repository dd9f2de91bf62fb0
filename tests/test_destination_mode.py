"""Issue 45, item 1: a destination's delete mode and shape live on the destination table. Every writer (drain, sink,
bootstrap, repair, registration) and checker (verify) reads the mode the table records; the first writer records
it; a table whose iterators cannot keep the mode's promise is refused in one line before anything is written; the
tombstone filter is seen by a scan before a tombstone is written; a producer's value equal to the tombstone is
refused."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from connector.accumulo import IteratorSetting, Mutation
from connector.export import (
    TOMBSTONE,
    AccumuloExporter,
    BatchTranslationError,
    DeleteMode,
    DestinationModeError,
    SequencedExport,
    TranslationError,
    checked_mode,
    prepare_destination,
    recorded_mode,
)
from connector.export.tombstones import (
    FILTER_NAME,
    FILTER_PRIORITY,
    MODE_PROPERTY,
    PROBE_FAMILY,
    _tombstone_regex,
    install_tombstone_filter,
)
from connector.jobs import LocalEngine, run_drain
from connector.jobs.bootstrap import preflight
from connector.queue import ExportQueue, dead_letters
from connector.queue.destinations import Destination, register_destination, registered_destinations
from connector.queue.layout import ENTRY_FAMILY, ENTRY_QUALIFIER
from connector.snapshot import BootstrapInputError
from connector.transactions import RowTransactions

from .conftest import Scenario, run_cli, unique_table
from .test_bootstrap import SNAPSHOT, bootstrap_job, commit

VERSIONING = "org.apache.accumulo.core.iterators.user.VersioningIterator"
#: a scan-time override of the table's tombstone filter that shows tombstones (as the purge lists them)
SHOW_TOMBSTONES = IteratorSetting(FILTER_PRIORITY, FILTER_NAME, "org.apache.accumulo.core.iterators.user.RegExFilter",
                                  {"valueRegex": _tombstone_regex(), "negate": "false"})


def drain_cli(scenario: Scenario, dest: str, *extra: str) -> list[str]:
    q = scenario.queue
    return ["drain", "--source", "A", "--dest", "B", "--table", q.table, "--queue", q.qid, "--buckets",
            str(q.num_buckets), "--dest-table", dest, "--translator", "difference", *extra]


def verify_cli(scenario: Scenario, dest: str, *extra: str) -> list[str]:
    return ["verify", "--source", "A", "--table", scenario.queue.table, "--queue", scenario.queue.qid,
            "--producer-table", scenario.counts, "--dest", "B", "--dest-table", dest, "--snapshot", SNAPSHOT,
            "--settle-seconds", "5", *extra]


def keeping_versions(conn, table: str, versions: int) -> str:
    """``createtable table`` with ``table.iterator.<scope>.vers.opt.maxVersions=versions`` in every scope."""
    conn.create_table(table)
    for scope in ("scan", "minc", "majc"):
        conn.set_table_property(table, f"table.iterator.{scope}.vers.opt.maxVersions", str(versions))
    return table


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, stderr[-2000:]
    return lines[0]


# --- finding 1: verify --repair reads the mode the table was written in ------------------------------------------

def test_finding_1_verify_repair_of_a_delete_mode_destination_writes_no_tombstone(scenario, cli_env):
    """The recipe: ``drain --delete-mode delete --create-dest-table``; a stray cell on B; ``verify --repair``
    with no ``--delete-mode``; scan B. The repair used to write a tombstone (verify's default mode) into a table
    without the filter: the tombstone's value showed to every reader, and the report said "unrepaired 1"."""
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    for i in range(5):
        commit(txs, scenario, f"d{i:03d}", i + 1)
    dest = unique_table("deletes")
    out = run_cli(cli_env, *drain_cli(scenario, dest, "--delete-mode", "delete", "--create-dest-table"))
    assert out.returncode == 0, out.stderr[-2000:]
    b = scenario.conn_b
    b.write(dest, [Mutation(b"00000077").put(b"w", b"nobody", b"", timestamp=3)])
    fixed = run_cli(cli_env, *verify_cli(scenario, dest, "--repair", "--json"))
    shown = [(c.row, c.cq, c.value) for c in b.scan(dest)]
    assert all(value != TOMBSTONE for _, _, value in shown), f"a tombstone shows on B: {shown}"
    assert b"nobody" not in {cq for _, cq, _ in shown}
    assert fixed.returncode == 0, fixed.stdout[-2000:] + fixed.stderr[-2000:]
    report = json.loads(fixed.stdout)
    assert (report["repaired"], report["unrepaired"]) == (1, 0)
    assert recorded_mode(b, dest) is DeleteMode.DELETE
    assert f"table.iterator.scan.{FILTER_NAME}" not in b.table_properties(dest)
    assert run_cli(cli_env, *verify_cli(scenario, dest)).returncode == 0
    txs.close()


# --- finding 2: a table keeping several versions is refused before anything is written ---------------------------

def test_finding_2_a_table_keeping_three_versions_is_refused_by_the_drain_and_nothing_is_written(scenario, cli_env):
    """The recipe: ``createtable idx`` with ``maxVersions=3``; drain a put, then a delete of that cell, with the
    defaults; scan. The tombstone used to hide only itself: the older put showed again. Now each drain refuses
    the table in one line naming the property and the fix, and writes nothing; the entries stay queued."""
    b = scenario.conn_b
    idx = keeping_versions(b, unique_table("idx"), 3)
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    outs = []
    commit(txs, scenario, "gone", 3)
    outs.append(run_cli(cli_env, *drain_cli(scenario, idx)))
    commit(txs, scenario, "gone", 0)  # the delete of that cell
    outs.append(run_cli(cli_env, *drain_cli(scenario, idx)))
    shown = [(c.row, c.cq, c.value) for c in b.scan(idx)]
    assert not [s for s in shown if s[1] == b"gone"], f"the deleted cell shows again: {shown}"
    for out in outs:
        assert out.returncode == 2, out.stderr[-2000:]
        line = one_line(out.stderr)
        assert "table.iterator.scan.vers.opt.maxVersions=3" in line and f"config -t {idx} -s" in line, line
    assert list(b.scan(idx, iterators=[])) == []  # nothing written, not even a recorded mode
    assert recorded_mode(b, idx) is None and f"table.iterator.scan.{FILTER_NAME}" not in b.table_properties(idx)
    assert scenario.depth() > 0
    txs.close()


def test_the_bootstrap_refuses_a_table_keeping_versions_before_reading_a(scenario):
    idx = keeping_versions(scenario.conn_b, unique_table("idx"), 3)
    with pytest.raises(BootstrapInputError, match=r"maxVersions=3.*config -t"):
        preflight(bootstrap_job(scenario, idx, create_dest_table=False))
    assert list(scenario.conn_b.scan(idx, iterators=[])) == []


def test_the_sink_refuses_a_table_keeping_versions_on_the_driver_before_any_task(scenario):
    """The ``accumulo-export`` sink settles its settings on the driver (``on_driver``) before a task writes: the
    table's shape is checked there, and the mode it writes in is the table's."""
    from connector.queue import DrainSettings
    from connector.spark.export_sink import SinkSettings
    from connector.spark.options import SinkTarget

    def sink(table: str, mode: str | None = None) -> SinkSettings:
        return SinkSettings(scenario.b.gateway_options(), SinkTarget(table=table),
                            DrainSettings(translator="cells", delete_mode=mode), None, None)

    idx = keeping_versions(scenario.conn_b, unique_table("idx"), 3)
    with pytest.raises(DestinationModeError, match="maxVersions=3"):
        sink(idx).on_driver()
    assert list(scenario.conn_b.scan(idx, iterators=[])) == [] and recorded_mode(scenario.conn_b, idx) is None
    deletes = unique_table("sinkdel")
    scenario.conn_b.create_table(deletes)
    prepare_destination(scenario.conn_b, deletes, "delete")
    assert sink(deletes).on_driver().drain.delete_mode == "delete"
    with pytest.raises(DestinationModeError, match="written in delete mode"):
        sink(deletes, "tombstone").on_driver()


@pytest.mark.parametrize("shape", ["no versioning iterator", "versions above the filter", "minc keeps 3"])
def test_each_shape_that_breaks_tombstones_is_refused_in_one_line_naming_the_property(conn_b, shape):
    """Every writer goes through ``prepare_destination`` (the exporter too, on its first write): a table made
    by hand with ``-ndi``, one whose versioning iterator runs above the tombstone filter, or one keeping
    versions in a compaction scope is refused, nothing written."""
    table = unique_table("shape")
    if shape == "no versioning iterator":
        conn_b.create_table(table, versioning=False)
        expected = "no versioning iterator in its scan scope"
    elif shape == "versions above the filter":
        conn_b.create_table(table)
        conn_b.set_table_property(table, "table.iterator.scan.vers", f"40,{VERSIONING}")
        expected = f"priority 40 \\(table.iterator.scan.vers=40,{VERSIONING}\\).*-s table.iterator.scan.vers=20"
    else:
        conn_b.create_table(table)
        conn_b.set_table_property(table, "table.iterator.minc.vers.opt.maxVersions", "3")
        expected = "table.iterator.minc.vers.opt.maxVersions=3"
    with pytest.raises(DestinationModeError, match=expected) as err:
        prepare_destination(conn_b, table)
    assert "\n" not in str(err.value)
    exporter = AccumuloExporter(conn_b, table, "difference")
    with pytest.raises(DestinationModeError):
        exporter.export([SequencedExport("k", {"old": [], "new": [{"row": "r", "cf": "f", "cq": "q",
                                                                      "value": "1"}]}, 5)])
    assert list(conn_b.scan(table, iterators=[])) == [] and recorded_mode(conn_b, table) is None
    if shape == "versions above the filter":  # delete mode has no filter: the priority does not matter there
        assert prepare_destination(conn_b, table, "delete") is DeleteMode.DELETE


# --- the recorded mode rules every writer and checker ---------------------------------------------------------

def test_the_first_writer_records_its_mode_and_a_writer_asking_another_is_refused(scenario, cli_env):
    b = scenario.conn_b
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    commit(txs, scenario, "m1", 1)
    dest = unique_table("moded")
    first = run_cli(cli_env, *drain_cli(scenario, dest, "--delete-mode", "delete", "--create-dest-table"))
    assert first.returncode == 0, first.stderr[-2000:]
    assert b.table_properties(dest)[MODE_PROPERTY] == "delete"
    commit(txs, scenario, "m1", 0)
    cells = list(b.scan(dest, iterators=[]))
    refused = run_cli(cli_env, *drain_cli(scenario, dest, "--delete-mode", "tombstone"))
    assert refused.returncode == 2
    line = one_line(refused.stderr)
    assert "written in delete mode" in line and "asks for tombstone" in line and "without --delete-mode" in line
    assert list(b.scan(dest, iterators=[])) == cells  # nothing written
    plain = run_cli(cli_env, *drain_cli(scenario, dest))  # no mode given: the table's
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert [c for c in b.scan(dest) if c.cq == b"m1"] == [] and recorded_mode(b, dest) is DeleteMode.DELETE
    assert all(c.value != TOMBSTONE for c in b.scan(dest, iterators=[]))  # real deletes, no tombstone
    txs.close()


def test_a_new_table_records_the_default_and_checkers_infer_an_unrecorded_tables_mode(conn_b):
    fresh = unique_table("fresh")
    conn_b.create_table(fresh)
    assert checked_mode(conn_b, fresh) is DeleteMode.DELETE  # no filter: written before tombstones, or never
    assert prepare_destination(conn_b, fresh) is DeleteMode.TOMBSTONE
    assert recorded_mode(conn_b, fresh) is DeleteMode.TOMBSTONE
    assert checked_mode(conn_b, fresh) is DeleteMode.TOMBSTONE
    with pytest.raises(DestinationModeError, match="written in tombstone mode.*asks for delete"):
        checked_mode(conn_b, fresh, "delete")
    filtered = unique_table("filtered")
    conn_b.create_table(filtered)
    install_tombstone_filter(conn_b, filtered)
    assert checked_mode(conn_b, filtered) is DeleteMode.TOMBSTONE and recorded_mode(conn_b, filtered) is None


def test_a_registration_holds_the_tables_mode_and_one_asking_another_is_refused(scenario):
    b = scenario.conn_b
    second = unique_table("second")
    b.create_table(second)
    prepare_destination(b, second, "delete")
    gateway = scenario.b.gateway_options()
    with pytest.raises(DestinationModeError, match="written in delete mode"):
        register_destination(scenario.conn_a, scenario.queue, Destination(f"B/{second}", gateway, second,
                                                                          "difference", "tombstone"))
    assert registered_destinations(scenario.conn_a, scenario.queue) == []
    register_destination(scenario.conn_a, scenario.queue, Destination(f"B/{second}", gateway, second, "difference"))
    [registered] = registered_destinations(scenario.conn_a, scenario.queue)
    assert registered.delete_mode == "delete"


# --- the filter is seen by a scan before the first tombstone ------------------------------------------------------

def test_the_filter_is_confirmed_by_a_scan_of_every_tablet_and_the_probes_are_gone(conn_b):
    table = unique_table("probed")
    conn_b.create_table(table)
    conn_b.add_splits(table, [b"g", b"p"])
    assert prepare_destination(conn_b, table) is DeleteMode.TOMBSTONE
    assert list(conn_b.scan(table, iterators=[SHOW_TOMBSTONES])) == []  # each probe deleted after it was hidden
    assert list(conn_b.scan(table)) == []


def test_a_filter_that_a_scan_does_not_apply_is_refused_after_the_wait_and_the_mode_is_not_recorded(conn_b):
    """The filter's property is there but scans do not hide tombstones (here: its options say the opposite).
    The confirmation trusts scans, not the property: refused in one line, no probe left, nothing recorded."""
    table = unique_table("unseen")
    conn_b.create_table(table)
    conn_b.attach_iterator(table, IteratorSetting(FILTER_PRIORITY, FILTER_NAME,
                                                  "org.apache.accumulo.core.iterators.user.RegExFilter",
                                                  {"valueRegex": "nothing matches this", "negate": "true"}),
                           scopes=("scan",))
    with pytest.raises(DestinationModeError, match="a scan still shows a tombstone") as err:
        prepare_destination(conn_b, table, filter_seen_seconds=1.0)
    assert "\n" not in str(err.value)
    assert recorded_mode(conn_b, table) is None
    assert [c for c in conn_b.scan(table, iterators=[]) if c.cf == PROBE_FAMILY] == []


# --- a producer's value equal to the tombstone ---------------------------------------------------------------------

def tombstone_cell_export(seq: int, row: str = "r") -> SequencedExport:
    return SequencedExport("k", [{"row": row, "cf": "f", "cq": "q", "value": TOMBSTONE.decode()}], seq)


def test_the_exporter_refuses_a_put_of_the_tombstones_value_on_both_paths(conn_b):
    table = unique_table("tvalue")
    with AccumuloExporter(conn_b, table, "cells").ensure_table() as exporter:
        with pytest.raises(BatchTranslationError, match="tombstone's value"):
            exporter.export([tombstone_cell_export(5)])
        values = [json.dumps([{"row": "ok", "cf": "f", "cq": "q", "value": "1"}]).encode(),
                  json.dumps([{"row": "bad", "cf": "f", "cq": "q", "value": TOMBSTONE.decode()}]).encode()]
        batch = pa.record_batch([pa.array([b"k1", b"k2"], pa.binary()), pa.array(values, pa.binary()),
                                 pa.array([6, 7], pa.int64())], names=["key", "value", "seq"])
        failures = exporter.export_batch(batch, key_serializer="bytes")
        assert [(f.entry, f.kind) for f in failures] == [(1, "translation")]
        assert "tombstone's value" in failures[0].reason
    assert [c.row for c in conn_b.scan(table, iterators=[])] == [b"ok"]


def test_a_drain_dead_letters_an_export_putting_the_tombstones_value(scenario):
    """An entry written past the producer's check (by another client): the drain sets it aside with the reason,
    like any untranslatable export, and exports the rest."""
    q = scenario.queue
    row = q.layout.entry_row(json.dumps("k").encode(), 9)
    value = json.dumps([{"row": "bad", "cf": "f", "cq": "q", "value": TOMBSTONE.decode()}]).encode()
    scenario.conn_a.write(q.table, [Mutation(row).put(ENTRY_FAMILY, ENTRY_QUALIFIER, value)])
    producer = ExportQueue(scenario.conn_a, q)
    producer.add("k2", [{"row": "good", "cf": "f", "cq": "q", "value": "1"}], 10)
    producer.flush()
    dest = unique_table("dl")
    stats = run_drain(LocalEngine(), scenario.job(dest_table=dest, create_dest_table=True, translator="cells"))
    assert stats.dead_lettered == 1
    [letter] = list(dead_letters(scenario.conn_a, q))
    assert "tombstone's value" in letter.reason
    assert [c.row for c in scenario.conn_b.scan(dest, iterators=[])] == [b"good"]


def test_the_producer_api_refuses_the_tombstones_value(scenario):
    queue = ExportQueue(scenario.conn_a, scenario.queue)
    with pytest.raises(TranslationError, match="tombstone's value") as err:
        queue.add("k", [{"row": "r", "cf": "f", "cq": "q", "value": TOMBSTONE.decode()}], 5)
    assert "\n" not in str(err.value)
    txs = RowTransactions(scenario.conn_a, scenario.counts)
    with pytest.raises(TranslationError, match="tombstone's value"):
        txs.run(b"row", lambda tx: tx.export(queue, "k", [{"row": "r", "cf": "f", "cq": "q",
                                                             "value": TOMBSTONE.decode()}]))
    txs.close()
    assert scenario.depth() == 0


def test_a_purge_of_a_delete_mode_destination_is_refused_in_one_line(scenario, cli_env):
    dest = unique_table("nopurge")
    scenario.conn_b.create_table(dest)
    prepare_destination(scenario.conn_b, dest, "delete")
    q = scenario.queue
    out = run_cli(cli_env, "purge-tombstones", "--source", "A", "--table", q.table, "--queue", q.qid, "--dest", "B",
                  "--dest-table", dest, "--dry-run")
    assert out.returncode == 2
    error = [line for line in out.stderr.splitlines() if "error" in line]  # after the purge's progress lines
    assert len(error) == 1 and "written in delete mode" in error[0] and "nothing was changed" in error[0], out.stderr
