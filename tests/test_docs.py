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


def _package_docstrings():
    import ast

    for init in sorted((ROOT / "connector").rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if "Modules" in doc or ":mod:`." in doc:  # the packages whose docstring lists its modules
            yield init.parent, doc


def test_package_docstrings_that_list_their_modules_list_every_one():
    """A package docstring that lists its modules (pdoc shows it on the package's page) names each of them, and
    every module it points to (``:mod:`.name```) exists: a module added or removed updates the list."""
    import re

    checked = 0
    for package, doc in _package_docstrings():
        modules = {p.stem for p in package.glob("*.py") if not p.stem.startswith("__")}
        modules |= {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
        named = set(re.findall(r"``(\w+)``", doc)) | set(re.findall(r":mod:`\.(\w+)`", doc))
        where = package.relative_to(ROOT)
        assert sorted(modules - named) == [], f"{where}/__init__.py does not name these modules"
        pointed = set(re.findall(r":mod:`\.(\w+)`", doc))
        assert sorted(pointed - modules) == [], f"{where}/__init__.py points to modules it does not hold"
        checked += 1
    assert checked >= 6


def test_the_native_stub_declares_exactly_what_the_module_holds():
    """``connector/_native.pyi`` types the Rust module by hand: every function, class and constant the module
    holds is declared there, and nothing else."""
    import ast

    from connector import _native

    stub = ast.parse((ROOT / "connector" / "_native.pyi").read_text())
    declared = {n.name for n in stub.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    declared |= {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    held = {name for name in dir(_native) if not name.startswith("__")}
    assert sorted(declared ^ held) == []


def test_files_named_in_the_architecture_and_design_documents_exist():
    """``ARCHITECTURE.md`` and ``DESIGN.md`` name files by hand (where to make each change): each one named
    exists (a short name as the end of some file's path)."""
    import re

    tracked = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*")
               if p.is_file() and not {".venv", "target", ".git", ".smoke"} & set(p.relative_to(ROOT).parts)]
    missing = []
    for doc in ("ARCHITECTURE.md", "DESIGN.md"):
        for name in set(re.findall(r"`([\w./-]+\.(?:py|rs|java|json|thrift|md|toml))`", (ROOT / doc).read_text())):
            if not any(path == name or path.endswith("/" + name) for path in tracked):
                missing.append(f"{doc}: {name}")
    assert sorted(missing) == []
