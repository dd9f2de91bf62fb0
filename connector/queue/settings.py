"""How a drain runs: :class:`DrainSettings`, every knob of a drain declared once, with its default.

The ``accumulo-export drain`` flags, the Spark data sources' options (``export-queue``,
``accumulo-export``, ``export-queue-drain``) and the README's table of drain settings all derive from the
declarations below (:mod:`connector.settings`); the object is passed whole from the CLI or Spark options
down to the drain of a bucket group. Adding a drain setting is: a field here, the code that uses it, and
the README table regenerated (``python -m integration.docs --readme``).

Tags say which data sources take a setting as an option: ``plan`` (how a queue's reads are planned: the
``export-queue`` source and the streaming drain), ``export`` (how entries become cells on B: the
``accumulo-export`` sink and the streaming drain), ``drain`` (the streaming drain only), ``spark`` (Spark
only: refused with ``--engine local``).
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.export.tombstones import DeleteMode
from connector.export.translators import DEFAULT_TRANSLATOR, HELP, METAVAR, check_translator_name
from connector.settings import OptionError, Settings, integer, seconds, setting

#: a streaming drain's full sweep for entries written without a bucket mark (seconds)
DEFAULT_SWEEP_SECONDS = 30.0
#: how soon a stream relays what crashed row-transaction producers left in their outboxes (seconds)
DEFAULT_RELAY_SECONDS = 10.0
#: the most data bytes per exported batch (`buffer_bytes`)
DEFAULT_BUFFER_BYTES = 1 << 20
#: a drain compacts the queue's tablets when their files hold this many dead keys (connector.queue.compaction)
DEFAULT_COMPACT_DEAD_KEYS = 100_000
#: how long a read or write on A or B may wait for a tablet server during a drain (seconds)
DEFAULT_SERVER_WAIT = 300.0

PLAN, EXPORT, DRAIN, SPARK = "plan", "export", "drain", "spark"


@dataclass(frozen=True)
class DrainSettings(Settings):
    """Every setting of a drain (see the module's description); the defaults are the ones documented."""

    translator: str = setting(DEFAULT_TRANSLATOR, HELP, parse=check_translator_name, metavar=METAVAR,
                              tags={EXPORT})
    delete_mode: str = setting(DeleteMode.DELETE.value, "how deletes are written on B: delete (Accumulo deletes) "
                               "or tombstone (tombstone puts, immune to the compaction hazard: README)",
                               choices=[m.value for m in DeleteMode], tags={EXPORT})
    buffer_bytes: int = setting(DEFAULT_BUFFER_BYTES, "the most data bytes per exported batch: the row and value "
                                "of queue entries, the text and binary columns of rows written to the sink (a "
                                "larger one goes alone)", parse=integer(1), tags={EXPORT})
    fail_fast: bool = setting(False, "stop at the first malformed or untranslatable entry (nothing of its batch is "
                                     "exported or deleted) instead of dead-lettering it", tags={EXPORT})
    server_wait: float = setting(DEFAULT_SERVER_WAIT, "seconds a read or write on A or B may wait for a tablet server "
                                 "(one restarting after a crash) before the drain fails; nothing unexported is "
                                 "deleted, a rerun finishes", parse=seconds, option=None, metavar="SECONDS")
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
    buckets_per_partition: int | None = setting(None, "buckets per Spark task (default: the buckets of one tablet)",
                                                parse=integer(1), tags={PLAN, SPARK}, flag=None)
    checkpoint: str | None = setting(None, "a Spark stream's checkpoint folder, kept (default: a temporary one, "
                                           "removed)", option=None, tags={SPARK})

    def __post_init__(self) -> None:
        try:
            check_translator_name(self.translator)
            DeleteMode(self.delete_mode)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        if self.max_entries_per_trigger and self.max_bytes_per_trigger:
            raise OptionError("set max_entries_per_trigger or max_bytes_per_trigger, not both")
        for name in ("buffer_bytes", "max_entries_per_trigger", "max_bytes_per_trigger", "buckets_per_partition"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise OptionError(f"{name} must be an int >= 1, got {value!r}")
        dead = self.compact_dead_keys
        if not isinstance(dead, int) or isinstance(dead, bool) or dead < 0:
            raise OptionError(f"compact_dead_keys must be an int >= 0, got {dead!r}")
        for name in ("server_wait", "trigger_seconds", "sweep_seconds", "relay_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < float("inf"):
                raise OptionError(f"{name} must be a number of seconds > 0, got {value!r}")

    @classmethod
    def spark_only(cls) -> tuple[str, ...]:
        """The settings that apply to Spark drains only."""
        return tuple(s.name for s in cls.settings() if SPARK in s.tags)
