"""``make docs``: the API reference renders from the docstrings with no warning, a page per public package;
the README's generated tables match the declarations they come from."""

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


def test_readme_tables_are_generated_from_the_code():
    """Translators, drain settings, data source options, cluster keys and environment variables are declared
    once in the code; the README's tables of them must be what ``python -m integration.docs --readme``
    writes (run it after changing a declaration)."""
    from integration.docs import readme_sections, readme_with_sections

    readme = (ROOT / "README.md").read_text()
    assert readme_with_sections(readme) == readme, "stale README tables: run python -m integration.docs --readme"
    sections = readme_sections()
    for name in ("translators", "drain-settings", "data-source-options", "cluster-keys", "environment"):
        assert sections[name].count("\n") >= 3, name
    from connector.spark.options import SURFACES

    for surface in SURFACES.values():  # every option of every documented source is in its table
        if surface.name != "export-queue-warm-up":
            for name in surface.names():
                documented = f"`{name}`" in sections["data-source-options"] or f"`{name.split('.')[0]}.*`" in \
                    sections["data-source-options"] or name in {"host", "port", "hosts"}
                assert documented, (surface.name, name)


def test_design_document_references_resolve():
    """DESIGN.md is the repository's own; the code cites it and its invariants by number, and it names the
    test that holds each invariant: all of that must resolve."""
    import re

    design = (ROOT / "DESIGN.md").read_text()
    numbers = [int(n) for n in re.findall(r"^(\d+)\. \*\*", design, flags=re.MULTILINE)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 9
    cited = []
    for path in [*ROOT.glob("connector/**/*.py"), *ROOT.glob("tests/*.py"), *ROOT.glob("integration/**/*.py")]:
        cited += [int(n) for n in re.findall(r"invariants? (\d+)", path.read_text())]
    assert cited and max(cited) <= len(numbers)
    current = None
    for ref in re.findall(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`", design):
        file, test = ref
        if file:
            current = ROOT / file
            assert current.is_file(), file
        if test:
            assert current is not None and f"def {test}(" in current.read_text(), (current, test)
