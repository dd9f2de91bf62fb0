"""Settings: every value a user gives a job or a connection, declared once, parsed strictly.

A settings class is a frozen dataclass deriving from :class:`Settings` whose fields are declared with
:func:`setting`: the name, how its text parses, the default and what it does for the user. From that one
declaration come the CLI flags (:meth:`Settings.add_arguments`, :meth:`Settings.from_args`), the parsing of
Spark data source options and config-file keys (:meth:`Settings.from_options`), the options a job hands to
Spark (:meth:`Settings.to_options`) and the option tables of docs/reference.md (:meth:`Settings.markdown_rows`).

Every surface is strict: a :class:`Surface` knows every name it accepts (groups of settings under prefixes,
plus the few options Spark itself passes through, each by name), and refuses any other with the closest
known name, saying where it was given (:func:`refuse_unknown`). A value that does not parse is refused with
the setting's name and the reason. Nothing unknown is ever ignored: a misspelt TLS or secret key must never
quietly mean plain text or another secret.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from connector.errors import ConnectorError

T = TypeVar("T")
S = TypeVar("S", bound="Settings")
Parse = Callable[[str], Any]


class OptionError(ConnectorError, ValueError):
    """A setting is unknown, missing or wrong, wherever it was given (a data source option, a config-file
    key, an environment variable); the message names it, where it was given and, for an unknown name, the
    closest known one."""


# --- names --------------------------------------------------------------------------------------------------

def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely misspells (None when none is close)."""
    lowered = {k.lower(): k for k in known}
    found = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[found[0]] if found else None


def unknown_name_message(name: str, known: Collection[str], where: str, what: str = "option") -> str:
    """``<where>: unknown <what> 'name' (did you mean 'x'?)``, or the list of known names when none is close."""
    near = closest(name, known)
    hint = f" (did you mean {near!r}?)" if near else f"; known {what}s: {', '.join(sorted(known))}"
    return f"{where}: unknown {what} {name!r}{hint}"


def refuse_unknown(given: Iterable[str], known: Collection[str], where: str, what: str = "option") -> None:
    """Raise :class:`OptionError` for the first name of ``given`` (in sorted order) that ``known`` lacks."""
    for name in sorted(given):
        if name not in known:
            raise OptionError(unknown_name_message(name, known, where, what))


# --- value parsers: text -> value, or ValueError with the reason ----------------------------------------------

def text(raw: str) -> str:
    """Any non-empty text."""
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number within the bounds given."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise ValueError(f"must be <= {maximum}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def seconds(raw: str) -> float:
    """A number of seconds > 0 (and finite)."""
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {raw!r}") from None
    if not value > 0 or math.isinf(value):
        raise ValueError(f"must be a number of seconds > 0, got {raw}")
    return value


def boolean(raw: str) -> bool:
    """true/false (also 1/0, yes/no; any case)."""
    lowered = raw.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"must be true or false, got {raw!r}")


def choice(*values: str) -> Callable[[str], str]:
    """One of ``values``."""

    def parse(raw: str) -> str:
        if raw not in values:
            near = closest(raw, values)
            raise ValueError(f"must be one of {', '.join(values)}, not {raw!r}"
                             + (f" (did you mean {near!r}?)" if near else ""))
        return raw

    parse.__name__ = "choice"
    return parse


def port(raw: str) -> int:
    """A TCP port: 1-65535."""
    value = integer(1)(raw)
    if value > 65535:
        raise ValueError(f"must be a TCP port (1-65535), got {value}")
    return value


# --- declarations ---------------------------------------------------------------------------------------------

_AUTO = "<auto>"


@dataclass(frozen=True)
class Setting:
    """One declared setting (see :func:`setting`): ``name`` is its field's name."""

    name: str
    help: str
    parse: Parse
    default: Any
    #: the CLI flag (None: not a flag)
    flag: str | None
    #: the option / config-file key, before any prefix (None: not an option)
    option: str | None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    #: flags of one group are mutually exclusive
    exclusive: str | None = None
    #: labels for the surfaces that take it (a surface may take only some of a class's settings)
    tags: frozenset[str] = frozenset()
    #: what the help shows as the default when the field's own default is None ("" shows none)
    shown_default: str | None = None
    is_flag: bool = False  # a bool: the CLI flag takes no value

    def text_of(self, value: Any) -> str:
        """``value`` as option text (what :attr:`parse` reads back)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, tuple | list):
            return ",".join(str(v) for v in value)
        return str(value)

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.default is dataclasses.MISSING:
            return "required"
        if self.default is None:
            return ""
        return self.text_of(self.default)


@dataclass(frozen=True)
class _Spec:
    help: str
    parse: Parse | None
    flag: str | None
    option: str | None
    metavar: str | None
    choices: tuple[str, ...] | None
    exclusive: str | None
    tags: frozenset[str]
    shown_default: str | None


def setting(default: Any = None, help: str = "", *, parse: Parse | None = None, flag: str | None = _AUTO,
            option: str | None = _AUTO, metavar: str | None = None, choices: Sequence[str] | None = None,
            exclusive: str | None = None, tags: Iterable[str] = (), shown_default: str | None = None,
            compare: bool = True) -> Any:
    """Declare a field of a :class:`Settings` dataclass.

    ``parse`` turns an option's text into the value (default: from the field's type: bool, int, float, str);
    ``flag`` is the CLI flag (default ``--field-name``; None: no flag), ``option`` the data source option or
    config-file key (default the field's name; None: not an option). ``choices`` restricts the value (and
    the flag's choices). ``exclusive``: flags of one group exclude each other. ``tags`` label the surfaces
    that take the setting (:meth:`Settings.option_names`). ``compare=False`` leaves it out of equality."""
    if choices is not None and parse is None:
        parse = choice(*choices)
    spec = _Spec(help, parse, flag, option, metavar, tuple(choices) if choices else None, exclusive,
                 frozenset(tags), shown_default)
    return dataclasses.field(default=default, compare=compare, metadata={"setting": spec})


_BY_TYPE: dict[Any, Parse] = {bool: boolean, int: integer(), float: seconds, str: text}


def _parser_for(hint: Any) -> Parse:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args else hint
    if base not in _BY_TYPE:
        raise TypeError(f"no default parser for {hint!r}: give the setting a parse=")
    return _BY_TYPE[base]


class Settings:
    """Base of settings dataclasses (frozen): the declared fields, parsed from and written to options, CLI
    flags and documentation. Fields declared without :func:`setting` (composed settings, say) are not
    settings themselves.

    Every value is checked by its declaration when the object is made, however it was given (a flag, an
    option, a keyword in Python): its type, what its ``parse`` says of its text, and the ``exclusive``
    groups. A subclass's own ``__post_init__`` calls ``super().__post_init__()`` first and checks only what
    spans several settings or what no declaration can say."""

    #: the error a value that fails its declaration raises (a subclass may name one of its own)
    ERROR: typing.ClassVar[type[Exception]] = OptionError

    def __post_init__(self) -> None:
        self.check_declared()

    def check_declared(self) -> None:
        """Raise :attr:`ERROR` naming the first setting whose value its declaration refuses, or the two
        settings of an ``exclusive`` group that are both set."""
        chosen: dict[str, str] = {}
        for s in self.settings():
            value = getattr(self, s.name)
            if value is None or (s.default is not dataclasses.MISSING and _same_value(value, s.default)):
                continue  # unset, or the default: declared values are checked where they are declared
            types_of = _base_types(type(self))  # type: ignore[arg-type]  # classes are hashable
            problem = _refused(s, value, types_of[s.name])
            if problem:
                raise self.ERROR(f"{s.name}: {problem}")
            if s.exclusive:
                if s.exclusive in chosen:
                    raise self.ERROR(f"set {chosen[s.exclusive]} or {s.name}, not both")
                chosen[s.exclusive] = s.name

    @classmethod
    def settings(cls) -> tuple[Setting, ...]:
        """The declared settings, in field order."""
        return _settings_of(cls)  # type: ignore[arg-type]  # classes are hashable

    @classmethod
    def option_names(cls, prefix: str = "", tags: Collection[str] | None = None) -> frozenset[str]:
        """The option names this class accepts under ``prefix`` (only those tagged with one of ``tags``)."""
        return frozenset(prefix + s.option for s in cls.settings()
                         if s.option is not None and (tags is None or s.tags & set(tags)))

    @classmethod
    def values_from_options(cls, options: Mapping[str, Any], prefix: str = "", where: str = "option",
                            tags: Collection[str] | None = None) -> dict[str, Any]:
        """The values of the options given (absent or empty ones are left out: the defaults apply), each
        parsed; a value that does not parse raises :class:`OptionError` naming ``where`` and the option."""
        values: dict[str, Any] = {}
        for s in cls.settings():
            if s.option is None or (tags is not None and not s.tags & set(tags)):
                continue
            raw = options.get(prefix + s.option)
            if raw is None or (isinstance(raw, str) and raw == ""):
                continue
            try:
                values[s.name] = s.parse(raw if isinstance(raw, str) else s.text_of(raw))
            except ValueError as exc:
                raise OptionError(f"{where} {prefix + s.option!r}: {exc}") from None
        return values

    @classmethod
    def from_options(cls: type[S], options: Mapping[str, Any], prefix: str = "", where: str = "option",
                     tags: Collection[str] | None = None, **given: Any) -> S:
        """The settings the options give (``prefix`` + option name), the defaults for the rest; ``given``
        fills fields that are not options. Unknown names are the surface's to refuse (:class:`Surface`)."""
        values = cls.values_from_options(options, prefix, where, tags)
        for s in cls.settings():
            if s.default is dataclasses.MISSING and s.name not in values and s.name not in given:
                raise OptionError(f"{where} {prefix + (s.option or s.name)!r} is required")
        try:
            return cls(**values, **given)
        except OptionError:
            raise
        except ValueError as exc:  # a check of the class itself (__post_init__)
            raise OptionError(str(exc)) from None

    def to_options(self, prefix: str = "", tags: Collection[str] | None = None) -> dict[str, str]:
        """These settings as option text (None values left out), readable by :meth:`from_options`."""
        out = {}
        for s in self.settings():
            if s.option is None or (tags is not None and not s.tags & set(tags)):
                continue
            value = getattr(self, s.name)
            if value is not None:
                out[prefix + s.option] = s.text_of(value)
        return out

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, *, skip: Collection[str] = (),
                      shown_defaults: Mapping[str, str] | None = None) -> None:
        """Add a flag per setting (those with one, but ``skip``): its default stays None, so that
        :meth:`from_args` tells a given flag from the default, which the help shows (``shown_defaults``: what
        the help shows instead, by setting name)."""
        groups: dict[str, Any] = {}
        for s in cls.settings():
            if s.flag is None or s.name in skip:
                continue
            target: Any = parser
            if s.exclusive:
                if s.exclusive not in groups:
                    groups[s.exclusive] = parser.add_mutually_exclusive_group()
                target = groups[s.exclusive]
            text = s.help
            shown = (shown_defaults or {}).get(s.name, s.default_text())
            if shown and not s.is_flag:
                text += f" (default: {shown})"
            if s.is_flag:
                target.add_argument(s.flag, dest=s.name, action="store_true", default=None, help=text)
            else:
                target.add_argument(s.flag, dest=s.name, type=_argparse_type(s), default=None, help=text,
                                    metavar=s.metavar or ("{" + ",".join(s.choices) + "}" if s.choices else None))

    @classmethod
    def from_args(cls: type[S], args: argparse.Namespace, **given: Any) -> S:
        """The settings of the flags given (the defaults for the rest); ``given`` wins over both."""
        values = {s.name: getattr(args, s.name) for s in cls.settings()
                  if s.flag is not None and getattr(args, s.name, None) is not None}
        return cls(**{**values, **given})

    @classmethod
    def markdown_rows(cls, prefix: str = "", tags: Collection[str] | None = None) -> list[str]:
        """Rows of a docs/reference.md table: ``| flag | option | default | meaning |``."""
        rows = []
        for s in cls.settings():
            if tags is not None and not s.tags & set(tags):
                continue
            flag = f"`{s.flag}`" if s.flag else ""
            option = f"`{prefix}{s.option}`" if s.option else ""
            default = f"`{s.default_text()}`" if s.default_text() else ""
            rows.append(f"| {flag} | {option} | {default} | {s.help} |")
        return rows


def _same_value(value: Any, default: Any) -> bool:
    return type(value) is type(default) and value == default


def _refused(s: Setting, value: Any, types: tuple[type, ...] | None) -> str | None:
    """Why ``value`` is not a value of setting ``s`` (None: it is): not of the declared type, or its text
    refused by the setting's ``parse``."""
    if types is not None and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
        return f"expected {' or '.join(t.__name__ for t in types)}, got {value!r}"
    try:
        s.parse(s.text_of(value))
    except ValueError as exc:
        return str(exc)
    return None


@cache
def _base_types(cls: type) -> dict[str, tuple[type, ...] | None]:
    """The types each declared field's value may have (None: not checked), from the field's annotation."""
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[type, ...] | None] = {}
    for s in _settings_of(cls):
        hint = hints.get(s.name)
        args = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) in (
            typing.Union, types.UnionType) else [hint]
        base = typing.get_origin(args[0]) or args[0] if len(args) == 1 else None
        if base is float:
            out[s.name] = (int, float)  # a whole number of seconds is a number of seconds
        elif isinstance(base, type):
            out[s.name] = (base,)
        else:
            out[s.name] = None
    return out


@cache
def _settings_of(cls: type) -> tuple[Setting, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("setting")
        if spec is None:
            continue
        hint = hints.get(f.name)
        parse = spec.parse or _parser_for(hint)
        is_flag = hint is bool
        flag = ("--" + f.name.replace("_", "-")) if spec.flag == _AUTO else spec.flag
        option = f.name if spec.option == _AUTO else spec.option
        out.append(Setting(f.name, spec.help, parse, f.default, flag, option, spec.metavar, spec.choices,
                           spec.exclusive, spec.tags, spec.shown_default, is_flag))
    return tuple(out)


def argparse_type(parse: Parse, name: str = "value") -> Callable[[str], Any]:
    """``parse`` as an argparse ``type=``: its ``ValueError`` becomes argparse's one-line usage error."""

    def typed(raw: str) -> Any:
        try:
            return parse(raw)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = name  # argparse names the type in some messages
    return typed


def _argparse_type(s: Setting) -> Callable[[str], Any]:
    return argparse_type(s.parse, s.name)


# --- surfaces -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Group:
    """The options of one settings class under a prefix (only those tagged with one of ``tags``)."""

    settings: type[Settings]
    prefix: str = ""
    tags: frozenset[str] | None = None
    #: option names (before the prefix) this surface leaves out
    exclude: frozenset[str] = frozenset()
    #: documented as one row (``<prefix>*``: summary) instead of one per option
    summary: str | None = None

    def names(self) -> frozenset[str]:
        return self.settings.option_names(self.prefix, self.tags) - {self.prefix + n for n in self.exclude}

    def documented(self) -> list[tuple[str, str, str]]:
        """(option name, default text, what it does) of each option of the group (one row with the
        ``summary`` when it has one)."""
        if self.summary:
            return [(f"{self.prefix}*", "", self.summary)]
        names = self.names()
        return [(self.prefix + s.option, s.default_text(), s.help) for s in self.settings.settings()
                if s.option is not None and self.prefix + s.option in names]


@dataclass(frozen=True)
class Surface:
    """Every name one configuration surface accepts: groups of settings, plus names passed through by the
    framework around it (each allowed by name). ``where`` says how messages name the surface."""

    name: str
    where: str
    groups: tuple[Group, ...]
    passthrough: frozenset[str] = frozenset()
    what: str = "option"

    def names(self) -> frozenset[str]:
        return frozenset().union(*(g.names() for g in self.groups)) | self.passthrough

    def check(self, given: Iterable[str]) -> None:
        """Refuse any name this surface does not know (case-insensitively, as Spark passes options)."""
        known = self.names()
        refuse_unknown([n.lower() for n in given], {k.lower() for k in known}, self.where, self.what)


# --- environment variables ------------------------------------------------------------------------------------

#: the prefixes of this package's environment variables: any other variable with one of them is a mistake
ENV_PREFIXES = ("ACCUMULO_EXPORT_", "ACCUMULO_GATEWAY_")
#: every environment variable this package reads, with what it does
ENVIRONMENT = {
    "ACCUMULO_EXPORT_CONFIG": "the clusters.toml the CLI and cluster() read (default "
                              "$XDG_CONFIG_HOME or ~/.config, then accumulo-export/clusters.toml)",
    "ACCUMULO_GATEWAY_SECRET_FILE": "a file holding the gateways' shared secret, for connections that name no "
                                    "secret source",
    "ACCUMULO_GATEWAY_SECRET": "the gateways' shared secret itself, for connections that name no secret source",
}


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse an environment variable that carries one of our prefixes but is not one we read (a misspelt
    ``ACCUMULO_GATEWAY_SECRET_FILE`` must not quietly mean another secret)."""
    env = os.environ if environ is None else environ
    ours = [name for name in env if name.startswith(ENV_PREFIXES)]
    refuse_unknown(ours, ENVIRONMENT, "environment", "variable")
