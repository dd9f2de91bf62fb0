"""The embedded tablet servers use Accumulo's native in-memory maps (libaccumulo.so, which the harness builds
from the accumulo-native sources), as production ones do; without the library the clusters still start, with
Java's in-memory map, and the launcher's log says so in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.accumulo import Mutation
from integration.harness import NATIVE_LIB, build, clusters

from .conftest import unique_table

LOADED = "Loaded native map shared library"
JAVA_MAPS = "tablet servers use Java in-memory maps"


def tserver_logs(log_dir: str) -> str:
    files = sorted(Path(log_dir).glob("TabletServer_*.err"))
    assert files, f"no tablet server log in {log_dir}"
    return "".join(f.read_text(errors="replace") for f in files)


@pytest.mark.cluster
def test_session_tablet_servers_loaded_the_native_library(accumulo):
    if not NATIVE_LIB.is_file():
        pytest.skip(f"libaccumulo.so was not built here (see {NATIVE_LIB.parent / 'build.log'})")
    for c in accumulo:
        assert c.native_maps, f"cluster {c.name} runs Java maps although {NATIVE_LIB} exists"
        assert f"{LOADED} {NATIVE_LIB}" in tserver_logs(c.log_dir)
    assert JAVA_MAPS not in accumulo.log_file.read_text()


@pytest.mark.cluster
@pytest.mark.slow
def test_without_the_library_clusters_run_java_maps_and_say_so(tmp_path):
    with clusters(("j",), native_maps=tmp_path) as running:
        c = running["j"]
        assert not c.native_maps
        notes = [line for line in running.log_file.read_text().splitlines() if JAVA_MAPS in line]
        assert len(notes) == 1 and str(tmp_path) in notes[0], notes
        assert LOADED not in tserver_logs(c.log_dir)
        with c.connect() as conn:  # and the cluster works
            table = unique_table("javamaps")
            conn.create_table(table)
            conn.write(table, [Mutation("r").put("f", "q", "v")])
            assert [(c.row, c.value) for c in conn.scan(table)] == [(b"r", b"v")]


@pytest.fixture
def native_tree(tmp_path, monkeypatch):
    """build.py pointed at a Maven build of its own, with a stand-in accumulo-native source tree in its harness
    module."""
    gateway = tmp_path / "gateway"
    harness = gateway / "harness"
    src = harness / "target" / "accumulo-native" / "accumulo-native-9.9"
    src.mkdir(parents=True)
    (gateway / "pom.xml").write_text("<project/>")
    (harness / "pom.xml").write_text("<project/>")
    monkeypatch.setattr(build, "GATEWAY_DIR", gateway)
    monkeypatch.setattr(build, "HARNESS_MODULE", harness)
    monkeypatch.setattr(build, "NATIVE_DIR", harness / "target" / "native")
    monkeypatch.setattr(build, "NATIVE_LIB", harness / "target" / "native" / "libaccumulo.so")
    return src


def test_a_failed_native_build_is_reported_and_not_retried_until_forced(native_tree):
    (native_tree / "Makefile").write_text("all:\n\t@echo compiler error here; false\n")
    assert build.build_native_maps() is None
    log = build.NATIVE_DIR / "build.log"
    assert "compiler error here" in log.read_text()
    log.write_text("untouched")
    assert build.build_native_maps() is None  # the failure is remembered: no second attempt
    assert log.read_text() == "untouched"
    (native_tree / "Makefile").write_text("all:\n\t@touch libaccumulo.so\n")
    assert build.build_native_maps(force=True) == build.NATIVE_LIB
    assert build.NATIVE_LIB.is_file() and not (build.NATIVE_DIR / ".failed").exists()


def test_a_built_library_is_not_rebuilt(native_tree):
    (native_tree / "Makefile").write_text("all:\n\t@echo built >> count; touch libaccumulo.so\n")
    assert build.build_native_maps() == build.NATIVE_LIB
    assert build.build_native_maps() == build.NATIVE_LIB
    assert (native_tree / "count").read_text() == "built\n"
