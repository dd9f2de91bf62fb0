"""Accumulo 3.0 (the line without built-in replication): every path of the wire against a real 3.0.0 embedded
pair, through the gateway built on the 3.0.0 client (``integration/gateway``'s 3.0 profile), and the one-line
refusal of a gateway of one line pointed at servers of the other.

This module's ``accumulo`` fixture overrides the suite's: it is a pair of clusters of a later line (A, B), so
every fixture built on it (``conn_a``, ``conn_b``, ``scenario``, ``cli_env``) and the tests imported below
from the 2.1 suite run here on that line, unchanged. The suite's 2.1 pair is kept for the cross-line test.
The lines: 3.0, and 4.0, whose tests are skipped, saying why, while the Maven repository does not serve its
client (they run as soon as it does)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.accumulo import Mutation, Range
from connector.accumulo.summaries import ensure_visibility_summary, visibility_summary
from integration.harness import (
    Cluster,
    Clusters,
    HarnessError,
    StandaloneGateway,
    build_gateway,
    clusters,
    gateway_jar,
    pom_property,
    write_properties,
)

from . import test_purge
from .conftest import unique_table

# the 2.1 suite's tests of each path, run again here on 3.0 (their module fixtures come with them)
from .test_bootstrap import (  # noqa: F401
    test_bootstrap_while_producers_commit_and_the_stream_drains_ends_exact,
    test_verify_reports_exactly_the_injected_damage_and_repair_makes_it_right,
)
from .test_bulk_import import (  # noqa: F401
    test_a_bulk_load_into_a_table_with_splits_keeps_every_cells_timestamp,
    test_deletes_in_a_file_hide_older_puts,
    versions_table,
)
from .test_client import (  # noqa: F401
    test_client_timestamps_are_kept,
    test_conditional_writer_accepts_and_rejects,
    test_constraint_violation_raises_mutations_rejected_and_writer_survives,
    test_delete_at_t_hides_versions_at_or_below_t_only,
    test_ranges_rows_and_prefix,
)
from .test_purge import (  # noqa: F401
    setup,
    test_the_default_mode_writes_tombstones_and_a_purge_turns_those_below_the_watermark_into_deletes,
)
from .test_queue_compaction import (  # noqa: F401
    test_a_drain_finds_a_late_entry_behind_many_delete_markers_then_compacts_them_away,
)
from .test_watermark import test_wait_returns_once_the_commit_is_on_the_destination_and_the_change_reads_back  # noqa: F401

# the purge tests' autouse fixtures (a purge's grace bound lowered), when the module has them, apply here too
for _name, _value in vars(test_purge).items():
    if getattr(getattr(_value, "_fixture_function_marker", None), "autouse", False) or \
            getattr(getattr(_value, "_pytestfixturefunction", None), "autouse", False):
        globals()[_name] = _value

LINE = "3.0"
#: the later lines this module runs; 4.0's build stops at its first step while its client is not served
LATER_LINES = ("3.0", "4.0")

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module", params=LATER_LINES)
def accumulo(request: pytest.FixtureRequest, accumulo: Clusters) -> Iterator[Clusters]:
    """Clusters "a" and "b" of the line (3.0: 3.0.0), each behind a gateway on that line's client; the suite's
    2.1 pair (the overridden fixture) is kept for the cross-line test."""
    line = request.param
    try:
        build_gateway(line=line)
    except HarnessError as exc:
        if str(exc).startswith(f"cannot build the Accumulo {line} gateway: the Maven repository does not serve"):
            pytest.skip(str(exc))
        raise
    _other_line["2.1"] = accumulo
    with clusters(("a", "b"), line=line) as running:
        yield running
    _other_line.clear()


_other_line: dict[str, Clusters] = {}


@pytest.fixture
def table(conn_a) -> Iterator[str]:  # noqa: ANN001 - the same fixture as conftest's, on this module's clusters
    name = unique_table()
    conn_a.create_table(name)
    yield name
    conn_a.delete_table(name, missing_ok=True)


def _line(accumulo: Clusters) -> str:
    return next(iter(accumulo)).accumulo_line


def test_the_clusters_and_the_gateway_jar_are_of_the_line(accumulo):
    line = _line(accumulo)
    assert {c.accumulo_server for c in accumulo} == {pom_property("accumulo.server.version", line)}
    assert line != "3.0" or {c.accumulo_server for c in accumulo} == {"3.0.0"}
    jar = gateway_jar(line)
    assert jar.name.startswith(f"accumulo-gateway-{line}-") and jar.name.endswith("-all.jar")


def test_the_lines_deployable_jar_serves_its_cluster(accumulo):
    gw = StandaloneGateway(accumulo["a"])
    gw.start(timeout=120)
    try:
        assert gw.ready["accumulo_client"] == pom_property("accumulo.client.version", _line(accumulo))
        conn = gw.connect()
        name = unique_table("jar30")
        conn.create_table(name)
        conn.write(name, [Mutation("r").put("f", "q", "v")])
        assert [(c.row, c.value) for c in conn.scan(name)] == [(b"r", b"v")]
        conn.delete_table(name)
        conn.close()
    finally:
        gw.stop()


def _refusal(cluster: Cluster, line: str, folder: Path) -> str:
    """The deployable gateway of ``line`` started against ``cluster``: its one stderr line (it must exit 1)."""
    client = folder / "accumulo-client.properties"
    config = folder / "gateway.properties"
    write_properties(client, cluster.client_properties(), "cross-line test")
    write_properties(config, {"accumulo.client.properties": str(client), "gateway.secret.file": cluster.secret_file,
                              "gateway.port": "0"}, "cross-line test")
    out = subprocess.run(["java", "-Xmx256m", "-jar", str(gateway_jar(line)), "--config", str(config)],
                         capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert out.returncode == 1 and "READY" not in out.stdout, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_a_2_1_gateway_is_refused_by_3_0_servers_in_one_line(accumulo, tmp_path):
    if _line(accumulo) != LINE:
        pytest.skip("3.0 servers only")
    line = _refusal(accumulo["a"], "2.1", tmp_path)
    assert line == ("gateway: refused: this gateway is built for Accumulo 2.1 (client 2.1.6), but the tablet "
                    f"servers of instance {accumulo['a'].instance} run Accumulo 3.0: deploy the Accumulo 3.0 "
                    "gateway (accumulo-gateway-3.0-<version>-all.jar)")


def test_a_3_0_gateway_is_refused_by_2_1_servers_in_one_line(accumulo, tmp_path):
    if _line(accumulo) != LINE:
        pytest.skip("the 3.0 gateway only")
    c21 = _other_line["2.1"]["a"]
    line = _refusal(c21, LINE, tmp_path)
    assert line == ("gateway: refused: this gateway is built for Accumulo 3.0 (client 3.0.0), but the tablet "
                    f"servers of instance {c21.instance} run Accumulo 2.1: deploy the Accumulo 2.1 gateway "
                    "(accumulo-gateway-2.1-<version>-all.jar)")


def test_scans_next_k_and_batch_scans(conn_a, table):
    rows = [f"r{i:04d}" for i in range(2500)]  # more than one nextK batch
    conn_a.add_splits(table, [b"r0800", b"r1600"])
    conn_a.write(table, [Mutation(r).put("f", "q", r.upper(), timestamp=7) for r in rows])
    cells = list(conn_a.scan(table))
    assert [c.row.decode() for c in cells] == rows and all(c.ts == 7 for c in cells)
    some = list(conn_a.scan(table, Range.rows("r0100", "r0199")))
    assert len(some) == 100 and some[0].value == b"R0100"
    ranges = [Range.rows("r0005", "r0009"), Range.rows("r1500", "r1699"), Range.rows("r2400", "r2499")]
    got = sorted(c.row.decode() for c in conn_a.batch_scan(table, ranges))
    assert got == sorted([f"r{i:04d}" for i in range(5, 10)] + [f"r{i:04d}" for i in range(1500, 1700)]
                         + [f"r{i:04d}" for i in range(2400, 2500)])


def test_table_properties_iterators_summaries_and_compactions(conn_a, table):
    conn_a.set_table_property(table, "table.iterator.scan.vers.opt.maxVersions", "3")
    assert conn_a.table_properties(table)["table.iterator.scan.vers.opt.maxVersions"] == "3"
    conn_a.write(table, [Mutation("r").put("f", "q", f"v{t}", timestamp=t) for t in (1, 2, 3, 4)])
    assert [c.value for c in conn_a.scan(table)] == [b"v4", b"v3", b"v2"]
    conn_a.remove_table_property(table, "table.iterator.scan.vers.opt.maxVersions")
    assert ensure_visibility_summary(conn_a, table)
    conn_a.write(table, [Mutation(f"s{i}").put("f", "q", "x", visibility="secret" if i % 2 else "")
                         for i in range(10)])
    conn_a.compact_table(table, wait=True)  # every file rewritten, now with the summarizer's counts
    summary = visibility_summary(conn_a, table)
    assert summary.complete and summary.hidden == {"secret": 5}, summary
    assert [c.value for c in conn_a.scan(table, Range.rows("r", "r"))] == [b"v4"]  # compacted: versioning kept 1


def test_the_harness_names_its_line_and_refuses_an_unknown_one():
    from integration.harness import accumulo_line

    assert accumulo_line("3.0") == "3.0"
    with pytest.raises(HarnessError, match="unknown Accumulo line '2.0'"):
        accumulo_line("2.0")
    assert Path(gateway_jar("2.1")).name.startswith("accumulo-gateway-2.1-")
