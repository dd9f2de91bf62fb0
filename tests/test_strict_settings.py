"""Strict by default: every configuration surface refuses a name it does not know, naming it, where it was
given and the closest known name; no misspelt TLS or secret setting quietly means plain text or another
secret. The property tests walk every documented name of every surface and misspell it."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.cli.main import parser as cli_parser
from connector.clusters_config import SURFACE as CLUSTER_SURFACE
from connector.clusters_config import ConfigError, load_clusters
from connector.queue import DrainSettings
from connector.settings import ENV_PREFIXES, ENVIRONMENT, OptionError, check_environment, closest
from connector.spark import options as spark_options

LETTERS = string.ascii_lowercase + "_"


def misspelt(name: str, skip: int = 0) -> st.SearchStrategy[str]:
    """One-character mistakes in ``name`` (after its first ``skip`` characters): a letter dropped, two
    swapped, one replaced or one added."""
    at = st.integers(skip, len(name) - 1)
    return st.one_of(
        at.map(lambda k: name[:k] + name[k + 1:]),
        st.integers(skip, len(name) - 2).map(lambda k: name[:k] + name[k + 1] + name[k] + name[k + 2:]),
        st.tuples(at, st.sampled_from(LETTERS)).map(lambda t: name[:t[0]] + t[1] + name[t[0] + 1:]),
        st.tuples(st.integers(skip, len(name)), st.sampled_from(LETTERS)).map(
            lambda t: name[:t[0]] + t[1] + name[t[0]:]),
    )


def mistakes(known: frozenset[str], skip: int = 0) -> st.SearchStrategy[list[tuple[str, str]]]:
    """For every known name, one misspelling of it that is not itself a known name: (name, misspelling)."""
    return st.tuples(*(misspelt(n, skip).filter(lambda m, k=known: m.lower() not in {x.lower() for x in k})
                       .map(lambda m, n=n: (n, m)) for n in sorted(known))).map(list)


# --- clusters.toml ----------------------------------------------------------------------------------------------

@settings(max_examples=15)
@given(data=st.data())
def test_every_cluster_key_misspelt_is_refused_naming_it(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("toml") / "clusters.toml"
    for _name, wrong in data.draw(mistakes(CLUSTER_SURFACE.names())):
        path.write_text(f'[clusters.A]\nport = 1\nsecret_env = "S"\n{wrong} = "x"\n')
        with pytest.raises(ConfigError) as err:
            load_clusters(path)
        message = str(err.value)
        assert repr(wrong) in message and str(path) in message and "cluster 'A'" in message, message


def test_misspelt_tls_and_secret_keys_never_mean_plain_text_or_another_secret(tmp_path, monkeypatch):
    path = tmp_path / "clusters.toml"
    monkeypatch.setenv("ACCUMULO_GATEWAY_SECRET_FILE", str(tmp_path / "other.secret"))  # must not be used
    for wrong, right in (("tls_ca_fle", "tls_ca_file"), ("secret_fle", "secret_file"), ("severs_wait", "server_wait")):
        path.write_text(f'[clusters.A]\nhost = "gw"\nport = 42424\n{wrong} = "/etc/x"\n')
        with pytest.raises(ConfigError, match=f"unknown key '{wrong}' \\(did you mean '{right}'\\?\\)"):
            load_clusters(path)
    path.write_text('[cluster.A]\nport = 1\n')
    with pytest.raises(ConfigError, match="unknown table 'cluster' \\(did you mean 'clusters'\\?\\)"):
        load_clusters(path)
    path.write_text('[clusters.A]\nport = 1\nserver_wait = 30\ntls_ca_file = "/ca.pem"\n')
    (gateway,) = load_clusters(path).values()
    assert (gateway.server_wait, gateway.tls_ca_file) == (30.0, "/ca.pem")  # server_wait is a key now


def test_cli_refuses_a_misspelt_cluster_key_before_connecting(tmp_path):
    """The issue's case end to end: the CLI with a misspelt TLS key exits 2 naming it (no cluster needed: it
    never connects)."""
    import os
    import subprocess
    import sys

    config = tmp_path / "clusters.toml"
    config.write_text('[clusters.A]\nhost = "127.0.0.1"\nport = 1\nsecret_env = "S"\ntls_ca_fle = "/ca.pem"\n')
    env = dict(os.environ, ACCUMULO_EXPORT_CONFIG=str(config), S="x")
    out = subprocess.run([sys.executable, "-m", "connector", "queue", "status", "--cluster", "A", "--table", "t",
                          "--queue", "q"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "unknown key 'tls_ca_fle' (did you mean 'tls_ca_file'?)" in out.stderr


# --- Spark data source options ----------------------------------------------------------------------------------

def _minimal(source: str) -> dict[str, str]:
    queue = {"source.port": "1", "queue.table": "t", "queue.id": "q", "queue.buckets": "4"}
    sink = {"dest.port": "1", "table": "t"}
    return {"export-queue": queue, "accumulo-export": sink, "export-queue-drain": {**queue, **sink},
            "export-queue-warm-up": {**queue, **sink}, "accumulo": {"port": "1", "table": "t"}}[source]


def _data_source(name: str):
    from connector.spark.drain_source import QueueDrainDataSource, WarmUpDataSource
    from connector.spark.export_sink import AccumuloExportDataSource
    from connector.spark.queue_source import ExportQueueDataSource
    from connector.spark.table_source import AccumuloTableDataSource

    return {"export-queue": ExportQueueDataSource, "accumulo-export": AccumuloExportDataSource,
            "export-queue-drain": QueueDrainDataSource, "export-queue-warm-up": WarmUpDataSource,
            "accumulo": AccumuloTableDataSource}[name]


def test_every_source_accepts_its_minimal_options_and_every_documented_one():
    for name in spark_options.SURFACES:
        _data_source(name)(_minimal(name))  # parses: the surfaces and the parsers agree
    assert spark_options.ACCUMULO_EXPORT.passthrough == {"checkpointlocation"}


@settings(max_examples=10)
@given(data=st.data())
def test_every_data_source_option_misspelt_is_refused_naming_it(data):
    for source, surface in spark_options.SURFACES.items():
        for name, wrong in data.draw(mistakes(surface.names())):
            with pytest.raises(OptionError) as err:
                _data_source(source)({**_minimal(source), wrong: "1"})
            assert repr(wrong.lower()) in str(err.value) and surface.where in str(err.value), (source, name)


def test_a_misspelt_value_is_refused_with_the_closest_choice():
    with pytest.raises(OptionError, match="'delete_mode'.*not 'tombstne' \\(did you mean 'tombstone'\\?\\)"):
        _data_source("accumulo-export")({**_minimal("accumulo-export"), "delete_mode": "tombstne"})
    with pytest.raises(OptionError, match="unknown translator 'diference' \\(did you mean 'difference'\\?\\)"):
        _data_source("accumulo-export")({**_minimal("accumulo-export"), "translator": "diference"})
    with pytest.raises(OptionError, match="'batch_size': must be >= 1"):
        _data_source("accumulo")({**_minimal("accumulo"), "batch_size": "0"})
    with pytest.raises(OptionError, match="'dest.password' would put a secret in plain sight"):
        _data_source("accumulo-export")({**_minimal("accumulo-export"), "dest.password": "x"})


# --- CLI flags --------------------------------------------------------------------------------------------------

Command = tuple[tuple[str, ...], argparse.ArgumentParser]


def _commands(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Command]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(path, p)]
    return [c for name, sub in subs[0].choices.items() for c in _commands(sub, (*path, name))]


def _required(p: argparse.ArgumentParser) -> list[str]:
    args: list[str] = []
    for action in p._actions:
        if action.required and action.option_strings:
            args += [action.option_strings[0], str(action.choices[0]) if action.choices else "1"]
    return args


@settings(max_examples=5)
@given(data=st.data())
def test_every_flag_misspelt_is_refused_naming_it(data):
    commands = _commands(cli_parser())
    assert len(commands) >= 12
    for path, sub in commands:
        known = frozenset(s for a in sub._actions for s in a.option_strings if s.startswith("--"))
        for name, wrong in data.draw(mistakes(known, skip=2)):
            with pytest.raises(SystemExit) as exit_, contextlib.redirect_stderr(io.StringIO()) as stderr:
                cli_parser().parse_args([*path, *_required(sub), wrong, "1"])
            assert exit_.value.code == 2
            err = stderr.getvalue()
            assert f"unknown flag {wrong!r}" in err, (path, name, err)


def test_a_suggested_flag_is_always_one_the_command_takes():
    """Every flag of every command, given to each other command that lacks it: the "did you mean" names only a
    flag of the command given (the review's case: 'wait ... --dest-tabel' suggested drain's '--dest-table')."""
    commands = _commands(cli_parser())
    flags_of = {path: {s for a in sub._actions for s in a.option_strings if s.startswith("--")}
                for path, sub in commands}
    every = set().union(*flags_of.values())
    for path, sub in commands:
        for foreign in sorted(every - flags_of[path]):
            wrong = foreign[:-1] + ("x" if foreign[-1] != "x" else "y")
            with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as stderr:
                cli_parser().parse_args([*path, *_required(sub), wrong, "1"])
            near = re.search(r"did you mean '([^']+)'", stderr.getvalue())
            assert near is None or near.group(1) in flags_of[path], (path, wrong, stderr.getvalue())


def test_a_misspelt_required_flag_gets_did_you_mean(capsys):
    base = ["drain", "--source", "A", "--dest", "B", "--table", "t", "--queue", "q", "--dest-table", "x"]
    for wrong, right in (("--sorce", "--source"), ("--dest-tab", "--dest-table"), ("--queeu", "--queue")):
        argv = [wrong if a == right else a for a in base]
        with pytest.raises(SystemExit) as exit_:
            cli_parser().parse_args(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert f"required: {right}" in err and f"({wrong!r} given: did you mean {right!r}?)" in err, err
        assert err.count("\n") == 1, err
    with pytest.raises(SystemExit):  # a flag of another command is no misspelling of this one's
        cli_parser().parse_args(["wait", "--source", "A", "--table", "t", "--queue", "q", "--seq", "1"])
    assert "did you mean" not in capsys.readouterr().err


def test_abbreviated_flags_are_refused_and_the_closest_is_named(capsys):
    with pytest.raises(SystemExit):
        cli_parser().parse_args(["drain", "--source", "A", "--dest", "B", "--table", "t", "--queue", "q",
                                 "--dest-table", "x", "--buffer", "10"])
    assert "unknown flag '--buffer' (did you mean '--buffer-bytes'?)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_parser().parse_args(["drain", "--source", "A", "--dest", "B", "--table", "t", "--queue", "q",
                                 "--dest-table", "x", "--delete-mode", "tombstne"])
    assert "did you mean 'tombstone'?" in capsys.readouterr().err


def test_every_drain_setting_has_its_flag_and_round_trips_through_options():
    flags = {s for a in _commands(cli_parser()) if a[0] == ("drain",) for s in
             (o for act in a[1]._actions for o in act.option_strings)}
    for s in DrainSettings.settings():
        if s.flag:
            assert s.flag in flags, s.name
    given = DrainSettings(translator="value=count:n", delete_mode="tombstone", buffer_bytes=7, fail_fast=True,
                          max_bytes_per_trigger=9, sweep_seconds=2.5, relay_seconds=3.0, buckets_per_partition=2)
    assert DrainSettings.from_options(given.to_options()) == given


# --- environment ------------------------------------------------------------------------------------------------

@settings(max_examples=15)
@given(data=st.data())
def test_every_environment_variable_misspelt_is_refused_naming_it(data):
    for name in ENVIRONMENT:
        prefix = next(p for p in ENV_PREFIXES if name.startswith(p))
        wrong = data.draw(misspelt(name, skip=len(prefix)).filter(
            lambda m: m not in ENVIRONMENT and m.startswith(ENV_PREFIXES)))
        with pytest.raises(OptionError) as err:
            check_environment({wrong: "x", "PATH": "/bin"})
        assert repr(wrong) in str(err.value) and "environment" in str(err.value)
    check_environment({"ACCUMULO_EXPORT_CONFIG": "x", "ACCUMULO_PASSWORD": "not ours", "PATH": "/bin"})


def test_closest_names_the_likely_intent():
    assert closest("tls_ca_fle", ["tls_ca_file", "tls_key_file"]) == "tls_ca_file"
    assert closest("zzz", ["tls_ca_file"]) is None


def test_every_command_help_renders():
    """The flags derived from the settings (a mutually exclusive pair among them) still render as help."""
    for path, sub in _commands(cli_parser()):
        text = sub.format_help()
        assert "usage:" in text, path
    drain = dict(_commands(cli_parser()))[("drain",)].format_help()
    assert "--max-entries-per-trigger" in drain and "| --max-bytes-per-trigger" in drain


# --- every settings class checks each value by its declaration, and declares each setting once (issue 38) -------

@pytest.mark.parametrize(("cls", "given", "wrong"), [
    ("BootstrapSettings", {"bulk_cells": 0}, "bulk_cells: must be >= 1"),
    ("BootstrapSettings", {"ranges_per_task": -1}, "ranges_per_task: must be >= 1"),
    ("BootstrapSettings", {"settle_seconds": float("inf")}, "settle_seconds: must be a number of seconds > 0"),
    ("BootstrapSettings", {"method": "fast"}, "method: must be one of auto, live, bulk"),
    ("BootstrapSettings", {"final_check": "no"}, "final_check: expected bool"),
    ("DrainSettings", {"fail_fast": "yes"}, "fail_fast: expected bool"),
    ("DrainSettings", {"buffer_bytes": 0}, "buffer_bytes: must be >= 1"),
    ("DrainSettings", {"create_dest_table": 1}, "create_dest_table: expected bool"),
    ("DrainSettings", {"max_entries_per_trigger": 5, "max_bytes_per_trigger": 5}, "not both"),
    ("GatewayOptions", {"host": "gw", "port": 70000}, "port: must be a TCP port"),
    ("GatewayOptions", {"host": "gw", "port": 1, "server_wait": 0}, "server_wait: must be a number of seconds > 0"),
    ("QueueConfig", {"table": "t", "qid": "q", "num_buckets": 2, "buckets_per_tablet": 0},
     "buckets_per_tablet: must be >= 1"),
])
def test_every_settings_class_checks_each_value_by_its_declaration(cls, given, wrong):
    """However a value is given (a flag, an option, a keyword in Python), the declaration's parse and type decide:
    BootstrapSettings checked none of its bounds, GatewayOptions none, DrainSettings repeated them by hand."""
    from connector.accumulo.options import GatewayOptions
    from connector.queue import QueueConfig
    from connector.snapshot import BootstrapSettings

    classes = {"BootstrapSettings": BootstrapSettings, "DrainSettings": DrainSettings,
               "GatewayOptions": GatewayOptions, "QueueConfig": QueueConfig}
    with pytest.raises(ValueError, match=wrong):
        classes[cls](**given)


def test_each_setting_is_declared_in_one_class():
    """A drain and a bootstrap say the same of their destination (translator, delete mode, creating its table)
    by one declaration, and the bound on waiting for a tablet server is the gateway's own setting (a drain's
    --server-wait sets it on both clusters): no setting is declared twice with its own text or default."""
    from connector.accumulo.options import GatewayOptions
    from connector.snapshot import BootstrapSettings

    classes = (DrainSettings, BootstrapSettings, GatewayOptions)
    by_name: dict[str, set] = {}
    for cls in classes:
        for s in cls.settings():
            by_name.setdefault(s.name, set()).add(s)
    twice = {name: found for name, found in by_name.items() if len(found) > 1}
    assert not twice, twice
    shared = {s.name for s in DrainSettings.settings()} & {s.name for s in BootstrapSettings.settings()}
    assert shared == {"translator", "delete_mode", "create_dest_table"}
    assert "server_wait" not in {s.name for s in DrainSettings.settings()}


def test_the_engine_flags_mean_the_same_for_every_command():
    """--engine, --master and --metrics-port are one declaration for drain, combine run and bootstrap (each had
    its own, each a little different)."""
    commands = dict(_commands(cli_parser()))
    seen: dict[str, set] = {}
    for path in (("drain",), ("combine", "run"), ("bootstrap",)):
        for flag in ("--engine", "--master", "--metrics-port"):
            (action,) = [a for a in commands[path]._actions if flag in a.option_strings]
            seen.setdefault(flag, set()).add((action.help, tuple(action.choices or ()), action.default))
    assert all(len(found) == 1 for found in seen.values()), seen


def test_exit_status_2_means_a_usage_error_and_nothing_else():
    """One table of exit statuses; a failed run (a cluster not answering, a lease lost, a task failing) has its
    own status, never the usage error's 2 (every error of ours exited 2)."""
    from connector.accumulo.errors import (
        AccumuloSecurityError,
        ConnectionLostError,
        TableNotFoundError,
        TimedOutError,
    )
    from connector.cli.common import EXIT_FAILED, EXIT_STATUSES, EXIT_USAGE, exit_status_markdown, exit_status_of
    from connector.jobs import CombineError, CombineInputError, DrainError, DrainInputError
    from connector.snapshot import BootstrapError, BootstrapInputError

    for wrong in (OptionError("x"), TableNotFoundError("x"), AccumuloSecurityError("x"), DrainInputError("x"),
                  CombineInputError("x"), BootstrapInputError("x")):
        assert exit_status_of(wrong) == EXIT_USAGE == 2, wrong
    for failed in (ConnectionLostError("x"), TimedOutError("x"), DrainError("x"), CombineError("x"),
                   BootstrapError("x")):
        assert exit_status_of(failed) == EXIT_FAILED != 2, failed
    statuses = [status for status, _ in EXIT_STATUSES]
    assert statuses == sorted(set(statuses)) and {0, 1, 2, 3, 4, 5, 130, 143} == set(statuses)
    assert all(f"| {status} |" in exit_status_markdown() for status in statuses)
    epilog = cli_parser().epilog or ""
    assert all(f"  {status:>3}  " in epilog for status in statuses) and "docs/reference.md: Exit statuses" in epilog
