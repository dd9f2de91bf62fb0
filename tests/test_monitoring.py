"""Operable for months (issue 39): verify as a standing check (``--every``, ``--metrics-port``, and
``--metrics-file`` for cron), scraped live on the real clusters and compared with what each run reports; the
Grafana dashboard and Prometheus alert rules in ``examples/monitoring``, whose every metric name must be served
by a live drain and a live verify."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from connector.accumulo import Mutation
from connector.cli.verify_metrics import GAUGES, KINDS, OUTCOMES, VerifyMetrics
from connector.snapshot import VerifyReport
from connector.snapshot.compare import CellDiff
from connector.snapshot.verify import RangeResult

from .conftest import ROOT, Scenario, run_cli
from .test_bootstrap import SNAPSHOT
from .test_metrics import fill_queue, free_port, scrape
from .test_verify_repair import built, index_cell

MONITORING = ROOT / "examples" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
RULES = MONITORING / "alerts.yml"
#: series Prometheus makes itself for every target it scrapes: never on a /metrics page
PROMETHEUS_SERIES = {"up"}
#: what Grafana substitutes in a panel's query, for checking the queries as PromQL
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$command": "drain"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


# --- reading PromQL enough to name the metrics it uses ------------------------------------------------------

_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
             "offset", "atan2", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers outside label matchers (``{...}``), range and
    subquery brackets, string literals and grouping label lists, that are neither functions or aggregations
    (an identifier before ``(``) nor keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][\w:]*", text):
        rest = text[m.end():].lstrip()
        if m.group() in _KEYWORDS or rest.startswith("("):
            continue
        names.add(m.group())
    return names


def test_metric_names_are_read_from_promql():
    assert metric_names('sum by (queue, le) (rate(a_total{job="x", q=~"a|b"}[5m])) / b_count offset 1h') == \
        {"a_total", "b_count"}
    assert metric_names("time() - c_seconds > 6 * 3600 and on (instance) d == bool 1e3") == {"c_seconds", "d"}
    assert metric_names('histogram_quantile(0.99, sum by (le) (rate(e_bucket[$__rate_interval])))') == {"e_bucket"}
    assert metric_names("f * on (instance, job) group_left (command, queue) g{command=~\"$command\"}") == {"f", "g"}
    assert metric_names('absent(h{a="by (x)"}) or vector(0)') == {"h"}


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_the_dashboard_and_the_rules_have_the_shape_grafana_and_prometheus_load():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for p in dashboard["panels"]:
        assert set(p["gridPos"]) == {"h", "w", "x", "y"} and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p
        if p["type"] != "row":
            assert p["targets"] and all(t["refId"] and t["expr"] for t in p["targets"]), p["title"]
            assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), p["title"]
    groups = yaml.safe_load(RULES.read_text())["groups"]
    assert groups and all(g["name"] and g["rules"] for g in groups)
    for r in rules():
        assert set(r) == {"alert", "expr", "for", "labels", "annotations"}, r
        assert r["labels"]["severity"] and r["annotations"]["summary"] and r["annotations"]["description"]
    alerts = [r["alert"] for r in rules()]
    assert len(alerts) == len(set(alerts))


def test_promtool_accepts_the_rules_and_the_dashboard_s_queries(tmp_path):
    """``promtool check rules`` on the rule file, and on the dashboard's queries made into rules (Grafana's
    variables replaced as it would): each parses as PromQL."""
    promtool = shutil.which("promtool")
    if promtool is None:  # `make test` installs it: CI (CI=true) must run this check, never skip it
        (pytest.fail if os.environ.get("CI") else pytest.skip)("promtool is not installed (`make deps` installs it)")
    out = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    queries = []
    for expr in dashboard_queries():
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, expr
        queries.append(expr)
    panel_rules = tmp_path / "panels.yml"
    panel_rules.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": [
        {"alert": f"Panel{i}", "expr": e} for i, e in enumerate(queries)]}]}))
    out = subprocess.run([promtool, "check", "rules", str(panel_rules)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


# --- a command's output and /metrics, read as it runs ----------------------------------------------------------

class Running:
    """A CLI command in a subprocess whose stdout lines (and stderr) are collected as they come."""

    def __init__(self, env: dict, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "connector.cli", *args], env=env, cwd=ROOT, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self.errors: list[str] = []
        for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors)):
            threading.Thread(target=lambda s=stream, i=into: i.extend(s), daemon=True).start()

    def json(self, n: int, seconds: float = 120) -> dict:
        """The ``n``-th JSON line printed (1-based), waiting for it."""
        deadline = time.monotonic() + seconds
        while len(self.lines) < n and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.1)
        assert len(self.lines) >= n, self.stderr()
        return json.loads(self.lines[n - 1])

    def stderr(self) -> str:
        return "".join(self.errors)[-3000:]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=180)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def scrape_until(port: int, done: Callable[[Samples], bool], running: Running, seconds: float = 180,
                 strict: bool = True) -> Samples:
    """Scrape until ``done``; after ``seconds`` fail (``strict``) or return the last scrape."""
    deadline = time.monotonic() + seconds
    last: Samples | None = None
    while time.monotonic() < deadline and running.proc.poll() is None:
        samples = scrape(port)
        last = samples if samples is not None else last
        if last is not None and done(last):
            return last
        time.sleep(0.3)
    if strict or last is None:
        raise AssertionError(f"no scrape as wanted (last: {last}); stderr: {running.stderr()}")
    return last


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    """The value of the one series of ``name`` whose labels include ``labels``."""
    found = [v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def runs(samples: Samples, outcome: str | None = None) -> float:
    return sum(v for (n, ls), v in samples.items()
               if n == "accumulo_export_verify_runs_total" and outcome in (None, dict(ls)["outcome"]))


def verify_args(scenario: Scenario, dest: str, *extra: str) -> list[str]:
    return ["verify", "--source", "A", "--table", scenario.queue.table, "--queue", scenario.queue.qid,
            "--producer-table", scenario.counts, "--dest", "B", "--dest-table", dest, "--snapshot", SNAPSHOT,
            "--settle-seconds", "5", "--json", *extra]


def assert_published(samples: Samples, report: dict, labels: dict[str, str], since: float) -> None:
    """The verify gauges say what the run's JSON summary said."""
    for kind in KINDS:
        assert sample(samples, "accumulo_export_verify_differences", kind=kind, **labels) == report[kind], kind
    expected = {"in_flight_cells": report["in_flight"], "failed_rows": report["failed_rows"],
                "unrepairable_ranges": report["unrepairable_ranges"], "repaired_cells": report["repaired"],
                "unrepaired_cells": report["unrepaired"]}
    for name, value in expected.items():
        assert sample(samples, f"accumulo_export_verify_{name}", **labels) == value, name
    duration = sample(samples, "accumulo_export_verify_duration_seconds", **labels)
    assert duration is not None and abs(duration - report["seconds"]) <= 0.006
    ended = sample(samples, "accumulo_export_verify_last_complete_timestamp_seconds", **labels)
    assert ended is not None and since <= ended <= time.time()


def damage(scenario: Scenario, dest: str, word: str) -> None:
    """Delete ``word``'s index cell on B at its own timestamp (a lost write), compacted so it stays lost."""
    cell = index_cell(scenario, dest, word)
    assert cell is not None
    scenario.conn_b.write(dest, [Mutation(cell.row).delete(cell.cf, cell.cq, timestamp=cell.ts)])
    scenario.conn_b.compact_table(dest, wait=True)


# --- verify as a standing check --------------------------------------------------------------------------------

@pytest.mark.cluster
def test_a_standing_verify_publishes_what_each_run_reports(scenario, cli_env):
    """``verify --every --metrics-port``: scraped live, the gauges are those of the run's own summary, clean
    first, then with the damage done to B meanwhile; a run that fails is counted and the check goes on; SIGTERM
    ends it with the last run's exit status."""
    txs, dest = built(scenario, {"s001": 1, "s002": 2, "s003": 3})
    port, began = free_port(), time.time()
    running = Running(cli_env, *verify_args(scenario, dest, "--every", "2", "--metrics-port", str(port)))
    try:
        labels = {"queue": scenario.queue.qid, "dest_table": dest}
        first = scrape_until(port, lambda s: runs(s) >= 1, running)
        n = int(runs(first))
        assert runs(first, "clean") == n and runs(first, "failed") == 0
        report = running.json(n)
        assert report["differences"] == 0
        assert_published(first, report, labels, began)
        assert sample(first, "accumulo_export_verify_clean", **labels) == 1
        info = sample(first, "accumulo_export_command_info", command="verify")
        assert info == 1

        damaged_at = time.time()
        damage(scenario, dest, "s002")
        after = scrape_until(port, lambda s: runs(s, "differences") >= 1, running)
        n = int(runs(after))
        report = running.json(n)
        assert (report["missing"], report["unexpected"], report["different"]) == (1, 0, 0), report
        assert_published(after, report, labels, damaged_at)
        assert sample(after, "accumulo_export_verify_clean", **labels) == 0
        # every verify series is labelled by queue and destination table, and names no host
        hosts = {scenario.a.gateway_options().host, scenario.b.gateway_options().host}
        for (name, ls), _ in after.items():
            if name.startswith("accumulo_export_verify_"):
                assert labels.items() <= dict(ls).items(), name
            assert not any(h in v for h in hosts for _, v in ls), (name, ls)

        # a run that fails (the destination is gone) is counted, and the next runs all the same; the gauges still
        # say what the last complete verify found
        scenario.conn_b.delete_table(dest)
        failing = scrape_until(port, lambda s: runs(s, "failed") >= 2, running)
        complete = int(runs(failing, "clean") + runs(failing, "differences"))
        assert complete == len(running.lines)  # a failed run prints no summary
        assert_published(failing, running.json(complete), labels, damaged_at)
        assert running.proc.poll() is None
    finally:
        status = running.stop()
    assert status == 2, running.stderr()  # the last run's: it failed
    assert "stopped by SIGTERM" in running.stderr()
    assert f"destination table {dest!r} does not exist" in running.stderr()
    assert scrape(port) is None
    txs.close()


def read_file(path: Path) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(path.read_text()) for s in family.samples}


@pytest.mark.cluster
def test_a_verify_run_by_cron_carries_the_last_complete_one_over_in_its_file(scenario, cli_env, tmp_path):
    """``verify --metrics-file``, one run at a time: each run replaces the file, counting on from the one
    before; a run that fails counts as failed and leaves the last complete verify's gauges and end time."""
    txs, dest = built(scenario, {"c001": 1, "c002": 2})
    path = tmp_path / "verify.prom"
    labels = {"queue": scenario.queue.qid, "dest_table": dest}

    def verify(*extra: str, status: int) -> Samples:
        out = run_cli(cli_env, *verify_args(scenario, dest, "--metrics-file", str(path), *extra))
        assert out.returncode == status, out.stderr
        if status != 2:
            assert_published(read_file(path), json.loads(out.stdout.splitlines()[-1]), labels, began)
        return read_file(path)

    began = time.time()
    clean = verify(status=0)
    assert (runs(clean, "clean"), runs(clean, "differences"), runs(clean, "failed")) == (1, 0, 0)
    damage(scenario, dest, "c002")
    began = time.time()
    found = verify(status=1)
    assert (runs(found, "clean"), runs(found, "differences")) == (1, 1)
    assert sample(found, "accumulo_export_verify_differences", kind="missing", **labels) == 1
    began = time.time()
    repaired = verify("--repair", status=0)
    assert sample(repaired, "accumulo_export_verify_repaired_cells", **labels) == 1
    assert sample(repaired, "accumulo_export_verify_clean", **labels) == 1
    assert (runs(repaired, "clean"), runs(repaired, "differences"), runs(repaired, "failed")) == (2, 1, 0)

    scenario.conn_b.delete_table(dest)  # the next run is refused: counted, the last complete one kept
    failed = verify(status=2)
    assert (runs(failed, "clean"), runs(failed, "differences"), runs(failed, "failed")) == (2, 1, 1)
    assert {k: v for k, v in failed.items() if "runs_total" not in k[0]} == \
        {k: v for k, v in repaired.items() if "runs_total" not in k[0]}
    promtool = shutil.which("promtool")
    if promtool is not None:  # the file node_exporter's textfile collector reads passes Prometheus' own lint
        lint = subprocess.run([promtool, "check", "metrics"], input=path.read_text(), capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout + lint.stderr
    txs.close()


def _report(diffs: Iterable[str], **fields) -> VerifyReport:
    cells = [CellDiff(kind=k, row=b"r", cf=b"f", cq=str(i).encode(), cv=b"", expected=None, version=None,
                      actual=None, ts=None, source=None) for i, k in enumerate(diffs)]
    return VerifyReport(results=[RangeResult(0, None, None, diffs=cells)] if cells else [], **fields)


def test_gauges_are_absent_until_a_verify_completes_and_a_failed_run_keeps_them(tmp_path):
    metrics = VerifyMetrics("q_table", "q", "index", str(tmp_path / "v.prom"))
    names = {f.name for f in metrics.collect()}
    assert names == {"accumulo_export_command", "accumulo_export_verify_runs"}  # no misleading 0s
    metrics.completed(_report(["missing", "missing", "different"], in_flight=4, seconds=1.5), ended=1000.0)
    metrics.failed()
    metrics.publish()
    got = read_file(tmp_path / "v.prom")
    labels = {"queue": "q", "dest_table": "index"}
    assert sample(got, "accumulo_export_verify_differences", kind="missing", **labels) == 2
    assert sample(got, "accumulo_export_verify_differences", kind="different", **labels) == 1
    assert sample(got, "accumulo_export_verify_in_flight_cells", **labels) == 4
    assert sample(got, "accumulo_export_verify_last_complete_timestamp_seconds", **labels) == 1000.0
    assert (runs(got, "differences"), runs(got, "failed")) == (1, 1)
    # another destination's metrics do not read ours; the same one's carry everything over
    assert {f.name for f in VerifyMetrics("q_table", "q", "other", str(tmp_path / "v.prom")).collect()} == names
    again = VerifyMetrics("q_table", "q", "index", str(tmp_path / "v.prom"))
    again.publish()
    assert read_file(tmp_path / "v.prom") == got
    assert set(GAUGES) | {"differences", "runs_total"} == {
        n.removeprefix("accumulo_export_verify_") for n, _ in got if n.startswith("accumulo_export_verify_")}
    assert set(OUTCOMES) == {dict(ls)["outcome"] for n, ls in got if n.endswith("runs_total")}


# --- the dashboard and the rules against live scrapes ------------------------------------------------------------

def served_names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


@pytest.mark.cluster
def test_every_metric_the_dashboard_and_the_alerts_use_is_served(scenario, conn_a, cli_env):
    """Every metric name in the dashboard's queries and the alert rules' expressions (read from the files) is
    on the /metrics page of a streaming drain or of a standing verify, scraped live."""
    used = set().union(*(metric_names(e) for e in [*dashboard_queries(), *(r["expr"] for r in rules())]))
    wanted = used - PROMETHEUS_SERIES
    assert len(wanted) >= 20, wanted

    config = fill_queue(conn_a, 50)
    port = free_port()
    drain = Running(cli_env, "drain", "--source", "A", "--dest", "B", "--table", config.table, "--queue", config.qid,
                    "--dest-table", f"{config.table}_d", "--create-dest-table", "--translator", "cells", "--stream",
                    "--engine", "local",
                    "--trigger-seconds", "0.5", "--purge-every", "1", "--metrics-port", str(port))
    try:
        # the lag gauges come with the first lag scan, the dead keys after it: wait for all the drain's names
        of_drain = {n for n in wanted if not n.startswith("accumulo_export_verify_")}
        drained = scrape_until(port, lambda s: of_drain <= served_names(s), drain, 90, strict=False)
    finally:
        drain.stop()

    txs, dest = built(scenario, {"m001": 1})
    port = free_port()
    verify = Running(cli_env, *verify_args(scenario, dest, "--every", "60", "--metrics-port", str(port)))
    try:
        verified = scrape_until(port, lambda s: runs(s) >= 1, verify)
    finally:
        verify.stop()
    missing = wanted - served_names(drained) - served_names(verified)
    assert not missing, f"used by examples/monitoring but served by neither a drain nor a verify: {sorted(missing)}"
    conn_a.delete_table(config.table)
    txs.close()
