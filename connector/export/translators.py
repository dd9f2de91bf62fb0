"""The translator registry: every built-in translator, once, with what it takes and what it writes.

The CLI's ``--translator`` help and checks, the Spark ``translator`` option, the native dispatch
(:mod:`connector.export.native_translate`) and the table of docs/reference.md all derive from :data:`TRANSLATORS`. A
translator that also runs natively has a Rust module in ``connector/_native/src/translate`` registered in that
crate's ``TRANSLATORS`` table; ``tests/test_native_translators.py`` checks that the two lists agree. Adding a
native translator is: its Rust module and table line, its Python twin and the line below, their tests.

Why a native translator has a Python twin (``difference``, ``replicator``, ``cell_rows`` in this package; the
one place that says so): the twin serves only what the crate cannot take. (1) The drain's fallback: the few
entries the crate hands back because only Python decides them exactly (bytes ``json.loads`` takes and
serde_json refuses, a message showing non-ASCII text, a packed value of another shape or a malformed one),
translated in :mod:`connector.export.native_translate`. (2) Values of a serializer the crate does not decode
(a queue's ``module:callable`` serializer), decoded and translated in Python. (3) Exports given one by one as
``SequencedExport`` objects: ``AccumuloExporter.export``, a ``PerExportExporter``, a user's translator
(``module:callable``) that calls a built-in one. ``tests/test_native_translators.py`` holds each twin to its
native translator, export for export and message for message. Nothing else is kept twice: the ``packed``
encoding, say, has one decoder, the crate's (:mod:`connector.packed`).

Besides the built-in names, a translator is ``package.module:callable`` (user code, loaded by name where the
drain runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from connector.plugins import callable_from_name
from connector.settings import closest

from .cell_rows import cell_rows
from .core import Translator
from .difference import difference
from .replicator import replicator
from .value import PREFIX as VALUE_PREFIX
from .value import ValueTranslator, parse_value_translator


@dataclass(frozen=True)
class TranslatorInfo:
    """One built-in translator: ``name`` (``syntax`` when it takes an argument), the export value it takes,
    what it writes (its puts and deletes), and whether it runs natively over whole batches."""

    name: str
    translator: Translator
    takes: str
    writes: str
    native: bool
    #: how the name is written when it takes an argument (``value[=CF[:CQ]]``), and its forms
    syntax: str = ""
    forms: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        return self.syntax or self.name


#: the built-in translators, the default first
TRANSLATORS: tuple[TranslatorInfo, ...] = (
    TranslatorInfo("difference", difference, '`{"old": [cell, ...], "new": [cell, ...]}`',
                   "deletes the cells only in old, puts the new or changed ones", native=True),
    TranslatorInfo("replicator", replicator,
                   'a list of operations `{"op": "set"/"delete", row, cf, cq, ...}` (or `{"ops": [...]}`)',
                   "the last operation per cell (a set puts, a delete deletes)", native=True),
    TranslatorInfo("cells", cell_rows, 'a cell or a list of cells (optional `"delete": true`)',
                   "each cell (a delete, or a null value, deletes it)", native=True),
    TranslatorInfo(VALUE_PREFIX, ValueTranslator(), 'any value, or a combine\'s `{"old": ..., "new": ...}` '
                   "(its `new`)", "the cell (row = key, CF, CQ) = the value; a null value deletes it",
                   native=False, syntax="value[=CF[:CQ]]", forms=("value", "value=CF", "value=CF:CQ")),
)
DEFAULT_TRANSLATOR = TRANSLATORS[0].name
BUILT_IN: dict[str, Translator] = {t.name: t.translator for t in TRANSLATORS}
#: the built-in translators that run natively (the Rust crate's list must be the same)
NATIVE_TRANSLATORS = tuple(t.name for t in TRANSLATORS if t.native)
#: what the CLI shows as the translator's metavar
METAVAR = "{" + ",".join([*(t.shown for t in TRANSLATORS), "module:callable"]) + "}"
HELP = ("turns each export into destination cell changes: " + "; ".join(f"{t.shown}: {t.writes}" for t in TRANSLATORS)
        + "; module:callable: your own (docs/draining.md: Translators)")


def check_translator_name(name: str) -> str:
    """``name`` if it names a translator (a built-in one, ``value=CF[:CQ]`` or the form ``module:callable``,
    which is not imported here); ``ValueError`` naming the closest built-in name otherwise."""
    if name in BUILT_IN or parse_value_translator(name) is not None:
        return name
    module, colon, attr = name.partition(":")
    if colon and module and attr:
        return name
    near = closest(name, BUILT_IN)
    raise ValueError(f"unknown translator {name!r}" + (f" (did you mean {near!r}?)" if near else "")
                     + f": use one of {', '.join(t.shown for t in TRANSLATORS)} or module:callable")


def translator_from_name(name: str) -> Translator:
    """The built-in translator of that name (``value=CF[:CQ]`` names the value translator's cell), or the
    callable at ``package.module:attribute``; ``ValueError`` saying what is wrong otherwise."""
    check_translator_name(name)
    value = parse_value_translator(name)
    if value is not None:
        return value
    return callable_from_name("translator", name, BUILT_IN)  # type: ignore[no-any-return]


def native_name(translator: Translator | Callable[..., object]) -> str | None:
    """The name of the built-in translator ``translator`` is, when it runs natively; else None."""
    return next((t.name for t in TRANSLATORS if t.native and t.translator is translator), None)


def markdown_table() -> str:
    """The table of built-in translators in docs/reference.md."""
    rows = ["| name | export value | writes | runs |", "|---|---|---|---|"]
    for t in TRANSLATORS:
        shown = ", ".join(f"`{form}`" for form in (t.forms or (t.name,)))
        default = " (default)" if t.name == DEFAULT_TRANSLATOR else ""
        runs = "natively, over whole batches" if t.native else "in Python, per export"
        rows.append(f"| {shown}{default} | {t.takes} | {t.writes} | {runs} |")
    return "\n".join(rows)


__all__ = ["BUILT_IN", "DEFAULT_TRANSLATOR", "HELP", "METAVAR", "NATIVE_TRANSLATORS", "TRANSLATORS",
           "TranslatorInfo", "check_translator_name", "markdown_table", "native_name", "translator_from_name"]
