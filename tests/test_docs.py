"""``make docs``: the API reference renders from the docstrings with no warning, a page per public package."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def test_api_reference_renders_without_warnings(tmp_path):
    out = subprocess.run([sys.executable, "-m", "integration.docs", "--output", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stderr == ""
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.html")}
    for package in ("accumulo", "export", "queue", "transactions", "combine", "spark", "cli"):
        assert f"connector/{package}.html" in pages
    assert not any("/_" in page for page in pages)  # private modules (the Rust core) stay out
    accumulo = (tmp_path / "connector" / "accumulo.html").read_text()
    assert "Connection" in accumulo and "BatchWriter" in accumulo
