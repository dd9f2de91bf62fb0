"""``make docs``: the site renders with no warning (the API reference from the docstrings, a page per public
package; the guides as HTML with an index); the reference's generated tables match the declarations they come
from; every link of the pages and every reference of the code to a guide's section resolves."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def test_site_renders_without_warnings(tmp_path):
    out = subprocess.run([sys.executable, "-m", "integration.docs", "--output", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stderr == ""
    api = tmp_path / "api"
    pages = {p.relative_to(api).as_posix() for p in api.rglob("*.html")}
    for package in ("accumulo", "export", "queue", "transactions", "combine", "snapshot", "spark", "cli"):
        assert f"connector/{package}.html" in pages
    assert not any("/_" in page for page in pages)  # private modules (the Rust core) stay out
    accumulo = (api / "connector" / "accumulo.html").read_text()
    assert "Connection" in accumulo and "BatchWriter" in accumulo
    # the guides beside it, each linked from the index, their links pointing at the rendered pages
    index = (tmp_path / "index.html").read_text()
    guides = sorted(p.with_suffix(".html").name for p in (ROOT / "docs").glob("*.md"))
    assert len(guides) >= 8
    for page in [*guides, "readme.html", "api/index.html"]:
        assert f'href="{page}"' in index, page
    readme = (tmp_path / "readme.html").read_text()
    assert 'href="tutorial.html"' in readme and 'href="reference.html#glossary"' in readme
    assert '<h2 id="glossary">' in (tmp_path / "reference.html").read_text()
    assert "<table>" in (tmp_path / "reference.html").read_text()


def test_a_link_to_a_missing_file_or_heading_is_a_warning(tmp_path, monkeypatch):
    """A guide's link to a file or heading that does not exist is a warning (``make docs`` fails on any); a link
    to a heading that exists, or link syntax inside a code block, is not."""
    from integration import docs

    page = tmp_path / "guide.md"
    page.write_text("# Guide\n\n## A heading\n\nSee [it](#a-heading), [that](#no-such-heading) and "
                    "[this](missing.md).\n\n```sh\n[not a link](#inside-code)\n```\n")
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    problems = docs.link_problems([page])
    assert problems == ["guide.md: link to #no-such-heading: guide.md has no heading with that anchor",
                        "guide.md: link to missing.md: no such file"]


def test_reference_tables_are_generated_from_the_code():
    """Translators, drain settings, data source options, cluster keys, environment variables and exit statuses
    are declared once in the code; the tables of ``docs/reference.md`` must be what
    ``python -m integration.docs --reference`` writes (run it after changing a declaration)."""
    from integration.docs import REFERENCE, reference_sections, with_generated_tables

    reference = REFERENCE.read_text()
    assert with_generated_tables(reference) == reference, \
        "stale docs/reference.md tables: run python -m integration.docs --reference"
    sections = reference_sections()
    for name in ("translators", "drain-settings", "data-source-options", "cluster-keys", "environment",
                 "exit-statuses"):
        assert sections[name].count("\n") >= 3, name
    from connector.spark.options import SURFACES

    for surface in SURFACES.values():  # every option of every documented source is in its table
        if surface.name != "export-queue-warm-up":
            for name in surface.names():
                documented = f"`{name}`" in sections["data-source-options"] or f"`{name.split('.')[0]}.*`" in \
                    sections["data-source-options"] or name in {"host", "port", "hosts"}
                assert documented, (surface.name, name)


def test_every_link_of_the_readme_and_the_guides_resolves_and_every_guide_is_reachable():
    """Links between the pages (and to files of the repository) point at files and headings that exist; the
    README front page links every guide of ``docs/``, and the site's index lists each."""
    from integration.docs import link_problems, links, pages, reachability_problems

    assert len(pages()) >= 9 and sum(len(links(p)) for p in pages()) >= 50
    assert link_problems() == []
    assert reachability_problems() == []


def test_the_readme_is_a_front_page():
    """The README is what a newcomer reads in five minutes: under 300 lines, the two commands, the main flows,
    and the way to every guide."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 300
    for needed in ("make demo", "make test", "accumulo-export drain", "accumulo-export bootstrap",
                   "accumulo-export verify", "accumulo-export wait", "RowTransactions", "## Where to go next"):
        assert needed in readme, needed


def test_references_of_the_code_to_the_guides_name_existing_files_and_headings():
    """Help texts, messages and docstrings point at a guide's section as ``docs/<guide>.md: <Heading>``: the file
    and the heading exist; nothing points at a section of the old one-page README."""
    from integration.docs import code_reference_problems, code_references

    found = code_references()
    assert len([ref for ref in found if ref[2]]) >= 20, found  # the help texts' references, at least
    assert code_reference_problems() == []
    from connector.cli.main import parser

    assert "docs/reference.md: Exit statuses" in (parser().epilog or "")


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
