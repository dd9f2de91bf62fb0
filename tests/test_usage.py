"""What the commands say about themselves: ``accumulo-export --version`` and the gateway jar's ``--help``."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess

import pytest

from integration.harness import gateway_jar

from .conftest import ROOT, run_cli


def test_version_names_the_connector_python_and_pyspark():
    out = run_cli(dict(os.environ), "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (f"accumulo-export {importlib.metadata.version('accumulo-export-connector')} "
                          f"(Python {platform.python_version()}, PySpark {importlib.metadata.version('pyspark')})\n")
    assert out.stderr == ""


def test_version_needs_no_cluster_config():
    env = dict(os.environ, ACCUMULO_EXPORT_CONFIG=str(ROOT / "no-such-clusters.toml"))
    out = run_cli(env, "--version")
    assert out.returncode == 0 and out.stdout.startswith("accumulo-export "), out.stderr


def readme_gateway_keys() -> list[str]:
    """The keys of the README's gateway.properties table (the documented settings)."""
    text = (ROOT / "integration" / "gateway" / "README.md").read_text()
    keys = re.findall(r"^\| `([a-z.]+)` \|", text, flags=re.MULTILINE)
    assert len(keys) >= 10, keys
    return keys


def run_jar(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", "-Xmx64m", "-jar", str(gateway_jar()), *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_gateway_help_prints_usage_and_every_property(gateway_classpath, flag):
    out = run_jar(flag)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: java -jar accumulo-gateway.jar --config gateway.properties\n")
    listed = re.findall(r"^  ([a-z]+\.[a-z.]+)$", out.stdout, flags=re.MULTILINE)
    assert sorted(listed) == sorted(readme_gateway_keys())  # every key the gateway reads, as documented
    assert "gateway.port\n      Thrift port; 0 picks a free one (see the READY line) (default 42424)" in out.stdout
    assert "starting" not in out.stderr.lower()  # help starts nothing


def test_gateway_unknown_argument_points_to_help(gateway_classpath):
    out = run_jar("--confg", "x.properties")
    assert out.returncode == 2
    assert out.stderr.strip() == "gateway: unknown argument: --confg (--help prints the usage)"
    out = run_jar()
    assert out.returncode == 2
    assert out.stderr.strip() == "gateway: --config is required (--help prints the usage)"


@pytest.mark.parametrize("command", [
    ["drain", "--source", "A", "--dest", "B", "--table", "t", "--queue", "q", "--dest-table", "x"],
    ["verify", "--source", "A", "--dest", "B", "--table", "t", "--queue", "q", "--dest-table", "x",
     "--producer-table", "p", "--snapshot", "mirror", "--translator", "cells"],
    ["queue", "status", "--cluster", "A", "--table", "t", "--queue", "q"],
    ["wait", "--cluster", "A", "--table", "t", "--queue", "q", "--seq", "1"],
], ids=lambda c: c[0])
def test_an_unreachable_cluster_is_exit_5_in_one_line_naming_it(tmp_path, command):
    """The new user's finding: three WARNING lines of retries came before the error. The retries are counted
    in the one line now (and logged at INFO, shown with --verbose)."""
    config = tmp_path / "clusters.toml"
    config.write_text('[clusters.A]\nport = 1\nsecret_env = "S"\n[clusters.B]\nport = 2\nsecret_env = "S"\n')
    env = {**os.environ, "ACCUMULO_EXPORT_CONFIG": str(config), "S": "x"}
    done = run_cli(env, *command)
    assert done.returncode == 5, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert re.search(r"cluster 'A'.*unreachable after \d+ attempts", lines[0]), lines[0]
