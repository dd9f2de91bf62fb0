"""The Spark data sources' options: every name each source accepts, declared once, checked strictly.

Each source is a :class:`~connector.settings.Surface` made of settings groups: a cluster's gateway under a
prefix (``source.``, ``dest.``, or none for ``accumulo``: :class:`~connector.accumulo.options.GatewayOptions`),
the queue (``queue.``: :class:`~connector.queue.QueueConfig`), the drain's settings that source takes
(:class:`~connector.queue.settings.DrainSettings`, by tag), and the source's own (:class:`SinkTarget`,
:class:`TableRead`). A source checks the options it was given when Spark creates it, before anything is
read or written: an unknown name is refused with the closest known one, a bad value names its option. The
option tables of docs/reference.md are :func:`markdown_tables`. Options Spark itself passes to a source (a streaming
sink's ``checkpointLocation``) are allowed by name.

This module imports no pyspark: the CLI, the docs and the tests use it without starting Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from typing import Any

from connector.accumulo.options import GatewayOptions, refuse_secrets
from connector.queue import QueueConfig
from connector.queue.config import OPTION_PREFIX as QUEUE_PREFIX
from connector.queue.config import queue_options
from connector.queue.settings import DRAIN, EXPORT, PLAN, DrainSettings
from connector.settings import Group, OptionError, Settings, Surface, integer, setting

__all__ = ["ACCUMULO", "ACCUMULO_EXPORT", "DEST_PREFIX", "EXPORT_QUEUE", "EXPORT_QUEUE_DRAIN", "GatewayOptions",
           "OptionError", "SOURCE_PREFIX", "SURFACES", "SinkTarget", "StreamProgress", "StreamTrigger", "TableRead",
           "WARM_UP", "WarmUp", "as_dict", "checked", "markdown_tables", "queue_config", "queue_options",
           "refuse_secrets"]

SOURCE_PREFIX = "source."
DEST_PREFIX = "dest."


@dataclass(frozen=True)
class SinkTarget(Settings):
    """Where the ``accumulo-export`` sink writes, besides the destination's gateway (``dest.*``)."""

    table: str = setting(MISSING, "the destination table", flag=None)
    report_dir: str | None = setting(None, "a folder where each batch's (or micro-batch's) counters are written as "
                                           "JSON", flag=None)


def progress_id(raw: str) -> str:
    """An id for progress rows: 1-64 letters, digits, ``_`` or ``-`` (it becomes part of a row)."""
    if not 0 < len(raw) <= 64 or not all(c.isascii() and (c.isalnum() or c in "_-") for c in raw):
        raise ValueError(f"must be 1-64 letters, digits, _ or -, got {raw!r}")
    return raw


@dataclass(frozen=True)
class StreamProgress(Settings):
    """The streaming drain's live counters (an option of the ``export-queue-drain`` source only)."""

    progress_id: str | None = setting(None, "the tasks keep their running counters in progress rows of the queue "
                                            "under this id and their micro-batch, so a micro-batch's counts are "
                                            "seen while it runs (none: no rows); whoever sets it removes the rows "
                                            "(`accumulo-export drain --stream` does)", parse=progress_id, flag=None)


@dataclass(frozen=True)
class StreamTrigger(Settings):
    """How a stream of the ``export-queue`` or ``export-queue-drain`` source is triggered, where Spark cannot
    tell the source itself (before 4.2)."""

    available_now: bool = setting(False, "the query runs with trigger(availableNow=True) on Spark 4.0 or 4.1, whose "
                                         "fallback is one micro-batch: that batch reads what a full scan finds in "
                                         "each bucket, without read limits (Spark 4.2+ tells the source itself; "
                                         "`start_stream` sets it)", flag=None)


@dataclass(frozen=True)
class TableRead(Settings):
    """What the ``accumulo`` source reads, besides the cluster's gateway (no prefix)."""

    table: str = setting(MISSING, "the table to read (a missing one is an error at planning)", flag=None)
    prefix: str | None = setting(None, "read the rows starting with this text (UTF-8)", flag=None)
    start_row: str | None = setting(None, "the first row read, inclusive (UTF-8 text)", flag=None)
    end_row: str | None = setting(None, "the last row read, inclusive (UTF-8 text)", flag=None)
    columns: str | None = setting(None, "comma-separated families and family:qualifier pairs (default: all "
                                        "columns)", flag=None)
    authorizations: str | None = setting(None, "comma-separated; cells whose visibility they do not satisfy are "
                                               "not read (default: all of the gateway user's)", flag=None)
    batch_size: int = setting(10_000, "cells per scan page, one Arrow batch each", parse=integer(1), flag=None)
    pushdown: bool = setting(False, "take Spark's filters on row, cf and cq as scan ranges and fetched columns "
                                    "(Spark 5.0+, with spark.sql.python.filterPushdown.enabled=true; refused before: "
                                    "up to 4.3 a DataFrame's scans share one pushdown's partitions)", flag=None)


@dataclass(frozen=True)
class WarmUp(Settings):
    """The warm-up source's own option (it takes the streaming drain's besides)."""

    partitions: int = setting(1, "tasks to warm up (Python workers started, connections opened)",
                              parse=integer(1), flag=None)


_QUEUE = Group(QueueConfig, QUEUE_PREFIX)
_SOURCE = Group(GatewayOptions, SOURCE_PREFIX, summary="cluster A's gateway: the gateway options below, each "
                                                       "prefixed with `source.`")
_DEST = Group(GatewayOptions, DEST_PREFIX, summary="cluster B's gateway: the gateway options below, each "
                                                   "prefixed with `dest.`")
#: what Spark passes to a streaming sink of its own accord
_STREAM_SINK = frozenset({"checkpointlocation"})

EXPORT_QUEUE = Surface("export-queue", "export-queue option",
                       (_SOURCE, _QUEUE, Group(DrainSettings, tags=frozenset({PLAN})), Group(StreamTrigger)))
ACCUMULO_EXPORT = Surface("accumulo-export", "accumulo-export option",
                          (_DEST, Group(SinkTarget), Group(DrainSettings, tags=frozenset({EXPORT})), _SOURCE, _QUEUE),
                          passthrough=_STREAM_SINK)
EXPORT_QUEUE_DRAIN = Surface("export-queue-drain", "export-queue-drain option",
                             (_SOURCE, _QUEUE, _DEST, Group(SinkTarget),
                              Group(DrainSettings, tags=frozenset({PLAN, EXPORT, DRAIN})), Group(StreamProgress),
                              Group(StreamTrigger)))
WARM_UP = Surface("export-queue-warm-up", "export-queue-warm-up option",
                  (*EXPORT_QUEUE_DRAIN.groups, Group(WarmUp)))
ACCUMULO = Surface("accumulo", "accumulo option",
                   (Group(GatewayOptions, summary="the cluster's gateway: the gateway options below, unprefixed"),
                    Group(TableRead)))
#: every data source's surface, by its format name
SURFACES = {s.name: s for s in (EXPORT_QUEUE, ACCUMULO_EXPORT, EXPORT_QUEUE_DRAIN, WARM_UP, ACCUMULO)}


def as_dict(options: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(options).items()}


def checked(surface: Surface, options: Any) -> dict[str, str]:
    """The options as a plain dict, once ``surface`` has refused any name it does not know and any secret."""
    opts = as_dict(options)
    refuse_secrets(opts, surface.where)
    surface.check(opts)
    return opts


def queue_config(options: Mapping[str, str], where: str = "option") -> QueueConfig:
    """The queue named by ``queue.table``, ``queue.id``, ``queue.buckets`` (and optional serializers)."""
    return QueueConfig.from_options(options, QUEUE_PREFIX, where)


def markdown_tables() -> str:
    """The option tables of docs/reference.md, one per data source (the warm-up source is internal): option, default,
    meaning."""
    out = ["The gateway options (under `source.` or `dest.`, or unprefixed for `accumulo`; the same keys as a "
           "cluster in `clusters.toml`):", "", "| option | default | meaning |", "|---|---|---|"]
    out += [f"| `{name}` | {f'`{default}`' if default else ''} | {meaning} |"
            for name, default, meaning in Group(GatewayOptions).documented()]
    out.append("")
    for surface in SURFACES.values():
        if surface is WARM_UP:
            continue
        out += [f"`{surface.name}`:", "", "| option | default | meaning |", "|---|---|---|"]
        out += [f"| `{name}` | {f'`{default}`' if default else ''} | {meaning} |"
                for group in surface.groups for name, default, meaning in group.documented()]
        out += [f"| `{name}` | | passed by Spark itself (allowed) |" for name in sorted(surface.passthrough)]
        out.append("")
    return "\n".join(out).rstrip() + "\n"
