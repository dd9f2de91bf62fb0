"""The front door: ``import connector`` gives the names of the main flows, lazily, and the README, the guides and
the examples import from there."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys

import connector

from .conftest import ROOT


def test_the_flat_list_is_the_declared_one_and_every_name_resolves():
    assert connector.__all__ == sorted([*connector._EXPORTS, "__version__"])
    for name in connector.__all__:
        assert getattr(connector, name) is not None, name
    assert connector.__version__ == importlib.metadata.version("accumulo-export-connector")
    assert connector.DrainSettings is __import__("connector.queue", fromlist=["x"]).DrainSettings
    try:
        connector.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_import_connector_loads_no_spark_until_a_spark_name_is_used():
    code = ("import sys, connector; connector.DrainJob; connector.cluster; connector.RowTransactions; "
            "print('pyspark' in sys.modules); connector.spark_session; print('pyspark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_readme_guides_and_examples_import_from_the_front_door():
    from integration.docs import code_blocks, pages

    blocks = [(page.name, code) for page in pages() for language, code in code_blocks(page)
              if language in ("python", "py")]  # run, and shown only
    assert len({page for page, _ in blocks}) >= 5
    for page, block in blocks:
        imports = re.findall(r"^from (connector[\w.]*) import", block, flags=re.MULTILINE)
        assert imports and set(imports) == {"connector"}, (page, block)
    example = (ROOT / "examples" / "inverted_count_index.py").read_text()
    assert "from connector import " in example
