"""A bootstrap's bulk range resumed after a kill (``connector/snapshot/bulk.py``), on real clusters: it counts as
loaded only when the load is known to have happened (recorded as loaded, or its staging directory is there with
no file left); a gateway that cannot be reached, that does not have the staging directory, or that is not ours
fails the bootstrap with one line and marks nothing done, and a rerun through the right gateway loads the range
once."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from connector.accumulo import ConnectionLostError, Mutation, RetryPolicy
from connector.accumulo import bulk as bulk_module
from connector.accumulo.options import GatewayOptions
from connector.jobs import LocalEngine
from connector.jobs.bootstrap import BootstrapJob, run_bootstrap
from connector.snapshot import BootstrapError
from connector.snapshot.state import BootstrapState
from examples.inverted_count_index import actual_index, expected_index
from integration.harness import StandaloneGateway

from .conftest import Scenario, unique_table
from .test_bootstrap_lease import fill, job_for
from .upstream_proxy import UpstreamProxy


def named(options: GatewayOptions) -> GatewayOptions:
    """A gateway of cluster B, named so that every job below names the same destination."""
    return dataclasses.replace(options, name="B")


class Loads:
    """Counts the bulk loads that happened (the gateway's importBulk returned), and can kill the bootstrap once
    around one: SystemExit, as a process dies there. ``kill``: "before" the load is called (after the range was
    recorded as loading), "in" it (before the gateway is asked), or "after" the gateway loaded the files."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, kill: str | None = None) -> None:
        self.done: list[str] = []
        self.kill = kill
        real_load, real_call = bulk_module.BulkImport.load, bulk_module.BulkImport._call

        def load(bulk):  # noqa: ANN001, ANN202
            if self.kill == "before":
                self.kill = None
                raise SystemExit("killed before the load")
            return real_load(bulk)

        def call(bulk, method, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            if method != "importBulk":
                return real_call(bulk, method, *args, **kwargs)
            if self.kill == "in":
                self.kill = None
                raise SystemExit("killed while loading")
            out = real_call(bulk, method, *args, **kwargs)
            self.done.append(bulk.bulk_id)
            if self.kill == "after":
                self.kill = None
                raise SystemExit("killed after the load")
            return out

        monkeypatch.setattr(bulk_module.BulkImport, "load", load)
        monkeypatch.setattr(bulk_module.BulkImport, "_call", call)


def killed(scenario: Scenario, monkeypatch: pytest.MonkeyPatch, when: str) -> tuple[BootstrapJob, Loads, str]:
    """A bulk bootstrap of one range killed ``when`` (see :class:`Loads`); the job, the loads, the bulk id."""
    fill(scenario, 20)
    dest = unique_table("resume")
    scenario.conn_b.create_table(dest)
    job = job_for(scenario, dest, method="bulk")
    loads = Loads(monkeypatch, kill=when)
    with pytest.raises(SystemExit):
        run_bootstrap(LocalEngine(threads=1), job)
    bulks = BootstrapState(scenario.conn_a, scenario.queue, job.destination).bulks()
    assert list(bulks) == [0] and bulks[0][1] == "loading"
    return job, loads, bulks[0][0]


def through(job: BootstrapJob, dest: GatewayOptions) -> BootstrapJob:
    return dataclasses.replace(job, dest=named(dest))


def nothing_marked_done_or_loaded(scenario: Scenario, job: BootstrapJob, error: pytest.ExceptionInfo,
                                  bulk_id: str) -> None:
    assert "\n" not in str(error.value) and bulk_id in str(error.value)
    state = BootstrapState(scenario.conn_a, scenario.queue, job.destination)
    assert state.done() == {}
    assert state.bulks() == {0: (bulk_id, "loading")}
    assert list(scenario.conn_b.scan(job.dest_table)) == []


def rerun_loads_it_once(scenario: Scenario, job: BootstrapJob, loads: Loads) -> None:
    """A rerun through the cluster's own gateway finishes the range: its files loaded exactly once in all."""
    report = run_bootstrap(LocalEngine(threads=1), job)
    assert report.ranges == 1 and report.resumed == 0
    assert len(loads.done) == 1
    expected = expected_index(scenario.conn_a, scenario.counts)
    assert expected and sorted(actual_index(scenario.conn_b, job.dest_table)) == sorted(expected)


def test_a_resume_that_loses_the_gateway_while_asking_about_the_load_marks_nothing_done(scenario, monkeypatch):
    job, loads, bulk_id = killed(scenario, monkeypatch, "in")
    gateway = StandaloneGateway(scenario.b)  # the same staging directory as the cluster's own gateway
    gateway.start()
    try:
        dest = GatewayOptions("127.0.0.1", gateway.port, secret_file=scenario.b.secret_file)
        monkeypatch.setattr(dest.shared(), "retry", RetryPolicy(attempts=3, max_seconds=5))
        real_left = bulk_module.BulkImport.files_left

        def gateway_dies(bulk):  # noqa: ANN001, ANN202
            gateway.kill()
            return real_left(bulk)

        monkeypatch.setattr(bulk_module.BulkImport, "files_left", gateway_dies)
        with pytest.raises(BootstrapError, match="unreachable") as error:
            run_bootstrap(LocalEngine(threads=1), through(job, dest))
    finally:
        gateway.stop()
    monkeypatch.setattr(bulk_module.BulkImport, "files_left", real_left)
    nothing_marked_done_or_loaded(scenario, job, error, bulk_id)
    rerun_loads_it_once(scenario, job, loads)


def test_a_resume_through_a_gateway_without_the_staging_directory_marks_nothing_done(scenario, monkeypatch,
                                                                                      tmp_path):
    job, loads, bulk_id = killed(scenario, monkeypatch, "in")
    gateway = StandaloneGateway(scenario.b, extra_properties={"gateway.bulk.dir": (tmp_path / "other").as_uri()})
    gateway.start()
    try:
        dest = GatewayOptions("127.0.0.1", gateway.port, secret_file=scenario.b.secret_file)
        with pytest.raises(BootstrapError, match="no staging directory") as error:
            run_bootstrap(LocalEngine(threads=1), through(job, dest))
    finally:
        gateway.stop()
    nothing_marked_done_or_loaded(scenario, job, error, bulk_id)
    rerun_loads_it_once(scenario, job, loads)


def test_a_resume_of_a_bulk_id_that_never_existed_marks_nothing_done(scenario, monkeypatch):
    job, _, real_id = killed(scenario, monkeypatch, "in")
    state = BootstrapState(scenario.conn_a, scenario.queue, job.destination)
    never = str(uuid.uuid4())
    scenario.conn_a.write(scenario.queue.table, [Mutation(state.row).put(
        b"k", b"0", f'{{"bulk": "{never}", "phase": "loading"}}'.encode())])
    with pytest.raises(BootstrapError, match="no staging directory") as error:
        run_bootstrap(LocalEngine(threads=1), job)
    nothing_marked_done_or_loaded(scenario, job, error, never)
    scenario.conn_b.bulk_import(job.dest_table, bulk_id=real_id).delete()


def test_a_resume_through_a_gateway_that_is_not_ours_marks_nothing_done(scenario, monkeypatch):
    job, loads, bulk_id = killed(scenario, monkeypatch, "in")
    b = scenario.b
    with UpstreamProxy(b.gateway_host, b.gateway_port) as upstream:
        dest = GatewayOptions("127.0.0.1", upstream.port, secret_file=b.secret_file)
        with pytest.raises(BootstrapError, match="bulk imports need this project's gateway") as error:
            run_bootstrap(LocalEngine(threads=1), through(job, dest))
    nothing_marked_done_or_loaded(scenario, job, error, bulk_id)
    rerun_loads_it_once(scenario, job, loads)


def test_a_load_that_happened_before_the_kill_is_found_and_not_repeated(scenario, monkeypatch):
    """Killed after the load returned, before it was recorded: the staging directory is still there with no
    file left, which says the load happened."""
    job, loads, bulk_id = killed(scenario, monkeypatch, "after")
    assert loads.done == [bulk_id]
    assert scenario.conn_b.bulk_import(job.dest_table, bulk_id=bulk_id).files_left() == 0
    rerun_loads_it_once(scenario, job, loads)


def test_a_bootstrap_stopped_between_the_loading_record_and_the_load_keeps_the_files_for_the_rerun(scenario,
                                                                                                   monkeypatch):
    """An exception there (Ctrl-C, say) must not remove the staging directory: the record says "loading", and a
    rerun that finds no directory cannot tell whether the files were loaded."""
    job, loads, bulk_id = killed(scenario, monkeypatch, "before")
    assert scenario.conn_b.bulk_import(job.dest_table, bulk_id=bulk_id).files_left() > 0
    rerun_loads_it_once(scenario, job, loads)


def test_a_bulk_file_whose_connection_was_lost_is_written_again_and_the_bootstrap_goes_on(scenario, monkeypatch):
    """A gateway of B killed while a range's bulk file was closed (chaos seed 9722: a bootstrap exited 5 with "the
    connection was lost while closeWriter ...; write the file again"): the range writes that file again, which
    replaces it, and loads once."""
    fill(scenario, 20)
    dest = unique_table("lostfile")
    scenario.conn_b.create_table(dest)
    job = job_for(scenario, dest, method="bulk")
    loads = Loads(monkeypatch)
    real_close = bulk_module.BulkFile.close
    lost: list[str] = []

    def close(f):  # noqa: ANN001, ANN202
        if not lost:
            lost.append(f.name)
            raise f._lost(ConnectionResetError("TSocket read 0 bytes"), "closeWriter")
        return real_close(f)

    monkeypatch.setattr(bulk_module.BulkFile, "close", close)
    report = run_bootstrap(LocalEngine(threads=1), job)
    assert lost == ["f000000"] and report.ranges == 1 and len(loads.done) == 1
    expected = expected_index(scenario.conn_a, scenario.counts)
    assert expected and sorted(actual_index(scenario.conn_b, dest)) == sorted(expected)


@pytest.mark.parametrize("applied", [True, False], ids=["after-creating", "before-creating"])
def test_a_staging_directory_whose_creation_lost_its_answer_is_created_again(scenario, monkeypatch, applied):
    """A gateway of B killed while it created a range's staging directory (``createBulkImport`` is not retried by
    the client: a lost answer may have made one): the range creates one again and loads once, where before the
    bootstrap ended with "gateway unreachable after 1 attempts"."""
    fill(scenario, 20)
    dest = unique_table("lostcreate")
    scenario.conn_b.create_table(dest)
    job = job_for(scenario, dest, method="bulk")
    loads = Loads(monkeypatch)
    counted_call = bulk_module.BulkImport._call  # Loads' own, which counts the loads
    lost: list[str] = []

    def call(bulk, method, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if method == "createBulkImport" and not lost:
            made = counted_call(bulk, method, *args, **kwargs) if applied else None
            lost.append(str(made))
            raise ConnectionLostError(f"{method} on the gateway: gateway unreachable after 1 attempts: "
                                      "TSocket read 0 bytes")
        return counted_call(bulk, method, *args, **kwargs)

    monkeypatch.setattr(bulk_module.BulkImport, "_call", call)
    report = run_bootstrap(LocalEngine(threads=1), job)
    assert len(lost) == 1 and report.ranges == 1 and len(loads.done) == 1
    expected = expected_index(scenario.conn_a, scenario.counts)
    assert expected and sorted(actual_index(scenario.conn_b, dest)) == sorted(expected)
