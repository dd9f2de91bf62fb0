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
