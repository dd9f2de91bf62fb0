"""``make docs``: the documentation site, built into ``docs/site/`` (not committed): the guides (``README.md`` and
every ``docs/*.md``) rendered to HTML with an index page, beside the API reference of ``connector``, rendered by
pdoc from the docstrings into ``docs/site/api/``. ``--reference``: the generated tables of ``docs/reference.md``
(translators, settings, options, cluster keys, environment, exit statuses), rewritten from their one declaration
in the code (``tests/test_docs.py`` fails when they are stale).

Any warning fails the build, so the site stays whole: for the API reference, a type annotation pdoc cannot
resolve, a broken cross-reference, a docstring it cannot parse; for the guides, a link to a file or heading that
does not exist, a guide the README front page does not link or the index does not list, a stale generated
table, and a reference in the code (``docs/operations.md: Metrics``) to a guide or heading that does not exist.
The site is built, not committed: the docstrings and the markdown files are the sources.
"""

from __future__ import annotations

import argparse
import html
import importlib
import importlib.metadata
import os
import pkgutil
import re
import shutil
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "connector"
README = ROOT / "README.md"
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference.md"
SITE = DOCS / "site"

#: the guides of ``docs/`` as the index lists them, by kind; every ``docs/*.md`` is one of them (checked)
GUIDES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Tutorial", ("tutorial.md",)),
    ("How-to guides", ("producing.md", "draining.md", "bootstrap-and-cutover.md", "spark.md", "spark-connect.md",
                       "kerberos.md", "operations.md", "development.md")),
    ("Reference", ("reference.md", "benchmarks.md")),
    ("Design", ("design.md",)),
)

#: the code whose text may point at a guide's section (``docs/operations.md: Metrics``)
CODE_DIRS = ("connector", "examples", "integration")


def public_modules(package: str = PACKAGE) -> list[ModuleType]:
    """The package and every module under it whose dotted name has no part starting with ``_``."""
    root = importlib.import_module(package)
    found = [root]
    for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(importlib.import_module(info.name))
    return found


def _namedtuple_signatures(modules: Sequence[ModuleType]) -> None:
    """pdoc resolves a NamedTuple's ``__init__`` annotations in the module of its generated ``__new__``
    (``namedtuple_X``), where ``from __future__ import annotations`` leaves names undefined (pdoc issue
    #765): point ``__new__`` at the class's own module so they resolve there."""
    for module in modules:
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields")
                    and value.__module__ == module.__name__):
                value.__new__.__module__ = module.__name__


def render(output: Path) -> list[str]:
    """Render the API reference into ``output`` (replaced); return the warnings, formatted, if any."""
    import pdoc
    import pdoc.render

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        modules = public_modules()
        _namedtuple_signatures(modules)
        pdoc.render.configure(docformat="restructuredtext", footer_text=f"accumulo-export-connector {_version()}",
                              search=True, show_source=True)
        shutil.rmtree(output, ignore_errors=True)
        # the modules above, already imported and patched; connector._native is private
        # the package and its direct sub-packages and modules (pdoc descends from each): the package's __all__
        # is its front door, so pdoc would not descend from the package itself
        specs = [PACKAGE, *(m.__name__ for m in modules if m.__name__.count(".") == 1)]
        pdoc.pdoc(*specs, output_directory=output)
    return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


def _version() -> str:
    return importlib.metadata.version("accumulo-export-connector")


# --- the markdown pages: what they hold ------------------------------------------------------------------------

def pages() -> list[Path]:
    """The documentation's markdown pages: the README front page, then every guide in ``docs/``."""
    return [README, *sorted(DOCS.glob("*.md"))]


def _outside_code(text: str) -> Iterator[str]:
    """The lines of a markdown text that are not inside a fenced code block."""
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def code_blocks(path: Path) -> list[tuple[str, str]]:
    """The fenced code blocks of a markdown page, in order: (language, code)."""
    return re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(), flags=re.DOTALL | re.MULTILINE)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower case, punctuation but ``-`` and ``_``
    dropped, spaces made ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[^\w\- ]", "", text.lower().replace("`", ""))
    return text.replace(" ", "-")


def headings(path: Path) -> list[str]:
    """The headings of a markdown page, in order (their text, without the ``#``)."""
    return [m.group(1).strip() for line in _outside_code(path.read_text())
            if (m := re.match(r"#{1,6} (.+?)\s*#*$", line))]


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub numbers repeated ones (``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(path):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """The targets of a page's markdown links, outside code blocks and code spans."""
    found = []
    for line in _outside_code(path.read_text()):
        found += re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line))
    return found


def _local(target: str) -> bool:
    return not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto: ...


def link_problems(checked: Sequence[Path] | None = None) -> list[str]:
    """Every link of the pages to a file of the repository that does not exist, or to a heading it lacks."""
    problems = []
    for page in checked or pages():
        for target in links(page):
            if not _local(target):
                continue
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(ROOT)}: link to {target}"
            if not linked.exists():
                problems.append(f"{where}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                problems.append(f"{where}: {linked.relative_to(ROOT)} has no heading with that anchor")
    return problems


def reachability_problems() -> list[str]:
    """A guide the README front page does not link, or that the index (``GUIDES``) does not list."""
    guides = {p.name for p in DOCS.glob("*.md")}
    listed = [name for _, names in GUIDES for name in names]
    linked = {Path(t.partition("#")[0]).name for t in links(README) if t.startswith("docs/")}
    return ([f"docs/{name}: not linked from README.md" for name in sorted(guides - linked)]
            + [f"docs/{name}: not listed in integration/docs.py GUIDES" for name in sorted(guides - set(listed))]
            + [f"integration/docs.py GUIDES lists docs/{name}, which does not exist" for name in listed
               if name not in guides])


_CODE_REFERENCE = re.compile(r"((?:docs/[\w-]+|README)\.md)(?:: ([^)\n\"'`]+))?")


def code_references(dirs: Sequence[str] = CODE_DIRS) -> list[tuple[str, str, str | None]]:
    """Where the code's text (help, messages, docstrings, comments) points into the documentation:
    (the code file, the page, the heading or None), for each ``docs/x.md: Heading`` (a heading runs to the end
    of its line, a closing parenthesis or quote: keep a reference on one line) and each bare ``docs/x.md``."""
    found = []
    for folder in dirs:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # this file describes the form of a reference
            text = path.read_text()
            for m in _CODE_REFERENCE.finditer(text):
                if text[max(0, m.start() - 1)] == "/" and m.group(1) == "README.md":
                    continue  # another folder's README (integration/gateway/README.md)
                heading = m.group(2).strip().rstrip(".,;") if m.group(2) else None
                found.append((path.relative_to(ROOT).as_posix(), m.group(1), heading))
    return found


def code_reference_problems(dirs: Sequence[str] = CODE_DIRS) -> list[str]:
    """A reference of the code to a page or heading that does not exist, and a bare "README" (a section of the
    old one-page README: name the guide and its heading instead)."""
    problems = []
    for file, page, heading in code_references(dirs):
        target = ROOT / page
        if not target.is_file():
            problems.append(f"{file}: names {page}, which does not exist")
        elif heading is not None and heading not in headings(target):
            problems.append(f"{file}: names {page}: {heading}, but {page} has no such heading")
    for folder in dirs:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # this file names the README as the page it renders
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bREADME\b(?!\.md)", line):
                    problems.append(f"{path.relative_to(ROOT)}:{n}: names the README without a file and heading "
                                    f"(docs/<guide>.md: <Heading>): {line.strip()}")
    return problems


# --- the generated tables of docs/reference.md -----------------------------------------------------------------

def reference_sections() -> dict[str, str]:
    """The reference's generated sections, by marker name, from the declarations they document."""
    from connector.accumulo.options import GatewayOptions
    from connector.cli.common import exit_status_markdown
    from connector.clusters_config import SURFACE as CLUSTER_KEYS
    from connector.export.translators import markdown_table
    from connector.queue.settings import DEFAULT_SERVER_WAIT, DrainSettings
    from connector.settings import ENVIRONMENT, Group
    from connector.spark.options import markdown_tables

    (wait,) = [s for s in GatewayOptions.settings() if s.name == "server_wait"]  # a gateway's: sets both clusters'
    drain = ["| flag | data source option | default | meaning |", "|---|---|---|---|",
             *DrainSettings.markdown_rows(),
             f"| `{wait.flag}` | `source.{wait.option}`, `dest.{wait.option}` | the cluster's, else "
             f"`{DEFAULT_SERVER_WAIT:g}` | {wait.help} (a drain's bound when the cluster names none) |"]
    keys = ["| key | default | meaning |", "|---|---|---|"]
    keys += [f"| `{n}` | {f'`{d}`' if d else ''} | {m} |" for group in CLUSTER_KEYS.groups
             for n, d, m in Group(group.settings, exclude=group.exclude).documented()]
    env = ["| variable | meaning |", "|---|---|", *(f"| `{k}` | {v} |" for k, v in ENVIRONMENT.items())]
    return {"translators": markdown_table() + "\n", "drain-settings": "\n".join(drain) + "\n",
            "data-source-options": markdown_tables(), "cluster-keys": "\n".join(keys) + "\n",
            "environment": "\n".join(env) + "\n", "exit-statuses": exit_status_markdown()}


def _markers(name: str) -> tuple[str, str]:
    return (f"<!-- generated: {name} (python -m integration.docs --reference) -->\n", f"<!-- end: {name} -->")


def with_generated_tables(text: str) -> str:
    """``text`` (``docs/reference.md``) with every generated section replaced by what the code declares now."""
    for name, body in reference_sections().items():
        start, end = _markers(name)
        if start not in text or end not in text:
            raise ValueError(f"docs/reference.md has no generated section {name!r} (markers {start.strip()} ... "
                             f"{end})")
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = head + start + body + end + tail
    return text


# --- the guides as HTML ----------------------------------------------------------------------------------------

_STYLE = """body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:0 1rem;color:#222}
nav,footer{font-size:.9rem;padding:.6rem 0;color:#555}nav{border-bottom:1px solid #ddd}footer{border-top:1px solid #ddd}
code,pre{font:13px/1.4 ui-monospace,monospace;background:#f5f5f5}pre{padding:.6rem;overflow-x:auto}
table{border-collapse:collapse;font-size:.9rem}td,th{border:1px solid #ddd;padding:.25rem .5rem;vertical-align:top}
h1,h2,h3{line-height:1.2}a{color:#0b57d0}"""


def _html_name(page: Path) -> str:
    return "readme.html" if page == README else page.with_suffix(".html").name


def _page(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)} · accumulo-export-connector</title><style>{_STYLE}</style></head><body>\n"
            f'<nav><a href="index.html">Documentation</a> · <a href="readme.html">README</a> · '
            f'<a href="tutorial.html">Tutorial</a> · <a href="reference.html">Reference</a> · '
            f'<a href="api/index.html">API reference</a></nav>\n<main>\n{body}\n</main>\n'
            f"<footer>accumulo-export-connector {_version()}</footer></body></html>\n")


def _rewrite_links(body: str, page: Path, output: Path) -> str:
    """Links between pages point at their HTML; links to other files of the repository at the checkout."""
    rendered = {p.resolve(): _html_name(p) for p in pages()}

    def href(m: re.Match[str]) -> str:
        target = html.unescape(m.group(1))
        if not _local(target) or target.startswith("#"):
            return m.group(0)
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve()
        new = rendered.get(linked) or os.path.relpath(linked, output.resolve())
        return f'href="{html.escape(new + ("#" + anchor if anchor else ""))}"'

    return re.sub(r'href="([^"]*)"', href, body)


def _title(page: Path) -> str:
    found = headings(page)
    return found[0] if found else page.stem


def render_guides(output: Path) -> list[str]:
    """Render the README and the guides into ``output`` as HTML, with ``index.html`` linking them and the API
    reference (``api/``); return the problems found (broken links, unlinked guides, stale tables), if any."""
    import markdown

    problems = link_problems() + reachability_problems() + code_reference_problems()
    if REFERENCE.is_file() and with_generated_tables(REFERENCE.read_text()) != REFERENCE.read_text():
        problems.append("docs/reference.md: stale generated tables: run python -m integration.docs --reference")
    output.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for page in pages():
            converter = markdown.Markdown(extensions=["tables", "fenced_code", "toc", "sane_lists"],
                                          extension_configs={"toc": {"slugify": lambda text, _sep: slug(text)}})
            body = _rewrite_links(converter.convert(page.read_text()), page, output)
            (output / _html_name(page)).write_text(_page(_title(page), body))
    problems += [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]
    items = ['<h1>Accumulo export connector: documentation</h1>',
             f'<p><a href="readme.html">{html.escape(_title(README))}</a>: the front page (what it is, the two '
             "commands, the main flows, where to go next).</p>"]
    for kind, names in GUIDES:
        items.append(f"<h2>{html.escape(kind)}</h2><ul>")
        items += [f'<li><a href="{_html_name(DOCS / n)}">{html.escape(_title(DOCS / n))}</a></li>'
                  for n in names if (DOCS / n).is_file()]
        if kind == "Reference":
            items.append('<li><a href="api/index.html">API reference</a>: every public module of '
                         "<code>connector</code>, from its docstrings</li>")
        items.append("</ul>")
    (output / "index.html").write_text(_page("Documentation", "\n".join(items)))
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the documentation site into docs/site/: the guides as HTML "
                                                 "and the API reference (fails on any warning).")
    parser.add_argument("--output", type=Path, default=SITE, help="folder (default: docs/site/)")
    parser.add_argument("--reference", action="store_true",
                        help="rewrite the generated tables of docs/reference.md instead")
    opts = parser.parse_args(argv)
    if opts.reference:
        REFERENCE.write_text(with_generated_tables(REFERENCE.read_text()))
        print(f"docs: {REFERENCE} tables regenerated")
        return 0
    problems = render(opts.output / "api") + render_guides(opts.output)
    for line in problems:
        print(f"docs: {line}", file=sys.stderr)
    if problems:
        print(f"docs: {len(problems)} warning(s); fix what is named above", file=sys.stderr)
        return 1
    print(f"docs: {opts.output / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
