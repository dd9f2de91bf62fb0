"""How a drain runs: :class:`DrainSettings`, every knob of a drain declared once, with its default.

The ``accumulo-export drain`` flags, the Spark data sources' options (``export-queue``,
``accumulo-export``, ``export-queue-drain``) and the table of drain settings in docs/reference.md all derive from the
declarations below (:mod:`connector.settings`); the object is passed whole from the CLI or Spark options
down to the drain of a bucket group. Adding a drain setting is: a field here, the code that uses it, and
the reference's tables regenerated (``python -m integration.docs --reference``).

Tags say which data sources take a setting as an option: ``plan`` (how a queue's reads are planned: the
``export-queue`` source and the streaming drain), ``export`` (how entries become cells on B: the
``accumulo-export`` sink and the streaming drain), ``drain`` (the streaming drain only), ``spark`` (Spark
only: refused with ``--engine local``).
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.export.tombstones import DEFAULT_DELETE_MODE, DeleteMode
from connector.export.translators import DEFAULT_TRANSLATOR, HELP, METAVAR, check_translator_name
from connector.settings import Settings, integer, seconds, setting

#: a streaming drain's full sweep for entries written without a bucket mark (seconds)
DEFAULT_SWEEP_SECONDS = 30.0
#: how soon a stream relays what crashed row-transaction producers left in their outboxes (seconds)
DEFAULT_RELAY_SECONDS = 10.0
#: the most data bytes per exported batch (`buffer_bytes`)
DEFAULT_BUFFER_BYTES = 1 << 20
#: a drain compacts the queue's tablets when their files hold this many dead keys (connector.queue.compaction)
DEFAULT_COMPACT_DEAD_KEYS = 100_000
#: how often a stream purges its tombstone-mode destinations' tombstones (seconds; 0: never)
DEFAULT_PURGE_EVERY_SECONDS = 6 * 3600.0
#: how long a read or write on A or B may wait for a tablet server during a drain (seconds), when the cluster's
#: gateway options name no ``server_wait`` of their own
DEFAULT_SERVER_WAIT = 300.0

PLAN, EXPORT, DRAIN, SPARK = "plan", "export", "drain", "spark"


def seconds_or_off(raw: str) -> float:
    """A number of seconds > 0, or 0 (off)."""
    try:
        return 0.0 if float(raw) == 0 else seconds(raw)
    except ValueError:
        raise ValueError(f"must be a number of seconds > 0, or 0 (off), got {raw!r}") from None


@dataclass(frozen=True)
class DestinationSettings(Settings):
    """How exports become cells on a destination table, and whether that table may be created: the settings a
    drain (:class:`DrainSettings`) and a bootstrap (``BootstrapSettings``) share, declared here once."""

    translator: str | None = setting(
        None, HELP, parse=check_translator_name, metavar=METAVAR, tags={EXPORT},
        shown_default=f"the queue's, stored by 'queue init --translator'; else {DEFAULT_TRANSLATOR}")
    delete_mode: str | None = setting(
        None, "how deletes are written on B: tombstone (a put of a tombstone that hides older puts for good, even "
        "one arriving after a full compaction; reclaimed by 'purge-tombstones') or delete (Accumulo deletes: "
        "cheaper, but a late export after a full compaction shows a stale cell until a repair: "
        "docs/design.md: The compaction hazard). The destination table records its mode (its first writer's); a "
        "run asking for another one is refused", choices=[m.value for m in DeleteMode], tags={EXPORT},
        shown_default=f"the mode the destination table records; on a new one {DEFAULT_DELETE_MODE.value}")
    create_dest_table: bool = setting(False, "create the destination table when it does not exist (versioning "
                                      "iterator, one version); without it a missing table is refused, naming the "
                                      "closest existing one (a misspelt name must not start a new table)",
                                      tags={EXPORT})

    def translator_or(self, stored: str | None) -> str:
        """The translator in effect: the one given, else the queue's ``stored`` one, else the default."""
        return self.translator or stored or DEFAULT_TRANSLATOR


@dataclass(frozen=True)
class DrainSettings(DestinationSettings):
    """Every setting of a drain (see the module's description); the defaults are the ones documented."""

    buffer_bytes: int = setting(DEFAULT_BUFFER_BYTES, "the most data bytes per exported batch: the row and value "
                                "of queue entries, the text and binary columns of rows written to the sink (a "
                                "larger one goes alone)", parse=integer(1), tags={EXPORT})
    fail_fast: bool = setting(False, "stop at the first malformed or untranslatable entry (nothing of its batch is "
                                     "exported or deleted) instead of dead-lettering it", tags={EXPORT})
    trigger_seconds: float = setting(1.0, "a stream's micro-batch interval", parse=seconds, option=None,
                                     metavar="SECONDS")
    max_entries_per_trigger: int | None = setting(
        None, "a Spark stream's read limit: at most this many entries per micro-batch (none: all pending)",
        parse=integer(1), tags={PLAN, SPARK}, exclusive="limits")
    max_bytes_per_trigger: int | None = setting(
        None, "a Spark stream's read limit: at most about this many bytes (row + value) per micro-batch, shared "
              "among the pending buckets (none: all pending)", parse=integer(1), tags={PLAN, SPARK},
        exclusive="limits")
    sweep_seconds: float = setting(DEFAULT_SWEEP_SECONDS, "a stream's longest wait for an entry written without a "
                                   "bucket mark (a full sweep of the queue runs this often)", parse=seconds,
                                   tags={PLAN}, metavar="SECONDS")
    compact_dead_keys: int = setting(
        DEFAULT_COMPACT_DEAD_KEYS, "compact the queue's tablets once about this many delete markers may have "
        "collected in them (counted as the drain deletes, or found in their files): every scan of a bucket walks "
        "past its markers until a compaction drops them; 0: never", parse=integer(0), tags={PLAN}, metavar="KEYS")
    relay_seconds: float = setting(DEFAULT_RELAY_SECONDS, "a stream relays what crashed row-transaction producers "
                                   "left in the outboxes feeding the queue within about this long (a batch drain "
                                   "relays them once before it starts)", parse=seconds, tags={DRAIN},
                                   metavar="SECONDS")
    purge_every: float = setting(DEFAULT_PURGE_EVERY_SECONDS, "a stream purges the tombstones of its tombstone-mode "
                                 "destinations (its table and the queue's registered ones) this often, as "
                                 "'purge-tombstones' does with its default grace, in the stream's process; 0: never",
                                 parse=seconds_or_off, option=None, metavar="SECONDS")
    buckets_per_partition: int | None = setting(None, "buckets per Spark task (default: the buckets of one tablet)",
                                                parse=integer(1), tags={PLAN, SPARK}, flag=None)
    checkpoint: str | None = setting(None, "a Spark stream's checkpoint folder, kept (default: a temporary one, "
                                           "removed)", option=None, tags={SPARK})

    @classmethod
    def spark_only(cls) -> tuple[str, ...]:
        """The settings that apply to Spark drains only."""
        return tuple(s.name for s in cls.settings() if SPARK in s.tags)
