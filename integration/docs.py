"""``make docs``: the API reference of ``connector``, rendered by pdoc from the docstrings into ``docs/``; and
``--readme``: the README's generated tables (translators, settings, options, cluster keys, environment, exit
statuses), rewritten from their one declaration in the code (``tests/test_docs.py`` fails when they are stale).

Any warning while rendering (a type annotation pdoc cannot resolve, a broken cross-reference, a docstring
it cannot parse) fails the build, so the reference stays complete. ``docs/`` is built, not committed: the
docstrings are the source, and a committed copy would go stale with every change to them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import pkgutil
import shutil
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "connector"


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
    """Render the reference into ``output`` (replaced); return the warnings, formatted, if any."""
    import pdoc
    import pdoc.render

    version = importlib.metadata.version("accumulo-export-connector")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        modules = public_modules()
        _namedtuple_signatures(modules)
        pdoc.render.configure(docformat="restructuredtext", footer_text=f"accumulo-export-connector {version}",
                              search=True, show_source=True)
        shutil.rmtree(output, ignore_errors=True)
        # the modules above, already imported and patched; connector._native is private
        # the package and its direct sub-packages and modules (pdoc descends from each): the package's __all__
        # is its front door, so pdoc would not descend from the package itself
        specs = [PACKAGE, *(m.__name__ for m in modules if m.__name__.count(".") == 1)]
        pdoc.pdoc(*specs, output_directory=output)
    return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


README = ROOT / "README.md"


def readme_sections() -> dict[str, str]:
    """The README's generated sections, by marker name, from the declarations they document."""
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
    return (f"<!-- generated: {name} (python -m integration.docs --readme) -->\n", f"<!-- end: {name} -->")


def readme_with_sections(text: str) -> str:
    """``text`` (the README) with every generated section replaced by what the code declares now."""
    for name, body in readme_sections().items():
        start, end = _markers(name)
        if start not in text or end not in text:
            raise ValueError(f"README.md has no generated section {name!r} (markers {start.strip()} ... {end})")
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = head + start + body + end + tail
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the API reference into docs/ (fails on any warning).")
    parser.add_argument("--output", type=Path, default=ROOT / "docs", help="folder (default: docs/)")
    parser.add_argument("--readme", action="store_true", help="rewrite the README's generated tables instead")
    opts = parser.parse_args(argv)
    if opts.readme:
        README.write_text(readme_with_sections(README.read_text()))
        print(f"docs: {README} tables regenerated")
        return 0
    problems = render(opts.output)
    for line in problems:
        print(f"docs: {line}", file=sys.stderr)
    if problems:
        print(f"docs: {len(problems)} warning(s); fix the docstrings or annotations named above", file=sys.stderr)
        return 1
    print(f"docs: {opts.output / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
