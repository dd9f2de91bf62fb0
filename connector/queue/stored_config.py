"""The configuration a queue was initialised with, stored in the queue's own rows.

Every reader and writer of a queue must agree on its bucket count and serializers: a drain told the wrong
bucket count finds nothing, and a producer told the wrong one writes rows no drain can place. So ``init``
stores them (row ``<qid>#config``, see :mod:`connector.queue.layout`), a conflicting ``init`` is refused, and
later users check against them or read them from there.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connector.accumulo import Connection, Range
from connector.serializers import DEFAULT_SERIALIZER

from .config import QueueConfig
from .errors import QueueConfigError, QueueError
from .layout import CONFIG_FAMILY, CONFIG_QUALIFIER, QueueLayout

#: the fields every user of a queue must agree on (``buckets_per_tablet`` only shapes the splits)
CHECKED = ("num_buckets", "key_serializer", "value_serializer")
FLAGS = {"num_buckets": "--buckets", "key_serializer": "--key-serializer", "value_serializer": "--value-serializer"}


@dataclass(frozen=True)
class ConfigCell:
    """The one cell where a queue (export or combine) keeps the configuration ``init`` stored, and how
    messages name that queue. Reading, storing (atomically, first ``init`` wins) and checking live here."""

    table: str
    row: bytes
    family: bytes
    qualifier: bytes
    #: e.g. "queue 'idx' in table 'exports'"
    name: str
    #: the command that stores it, for messages
    init_command: str
    error: type[QueueError] = QueueConfigError

    def read(self, conn: Connection) -> dict[str, Any] | None:
        """What ``init`` stored, or None if nothing is stored."""
        for cell in conn.scan(self.table, Range.exact_row(self.row), columns=[(self.family, self.qualifier)],
                              batch_size=2):
            try:
                stored = json.loads(cell.value)
                if not isinstance(stored, dict) or not isinstance(stored.get("num_buckets"), int):
                    raise ValueError("no num_buckets")
            except ValueError as exc:
                raise self.error(f"{self.name}: unreadable stored configuration {cell.value[:200]!r} ({exc})") from None
            return stored
        return None

    def missing(self, hint: str = "", near: str | None = None) -> QueueError:
        """The error for no stored configuration; ``near``: the closest existing queue's id, to suggest."""
        guess = f" (did you mean queue {near!r}?)" if near else ""
        return self.error(f"{self.name} has no stored configuration{guess}: run '{self.init_command}' first{hint}")

    def check(self, conn: Connection, fields: dict[str, Any], *, required: bool = False,
              near: Callable[[], str | None] = lambda: None) -> None:
        """Raise when ``fields`` disagree with what is stored (or, with ``required``, when nothing is: ``near``
        then names the closest existing queue)."""
        stored = self.read(conn)
        if stored is None:
            if required:
                raise self.missing(near=near())
            return
        conflicts = [f"{name.replace('num_', '')} {stored.get(name)!r}, not {fields[name]!r}"
                     for name in CHECKED if stored.get(name) != fields[name]]
        if conflicts:
            raise self.error(f"{self.name} was initialised with {'; '.join(conflicts)}")

    def store(self, conn: Connection, fields: dict[str, Any]) -> bool:
        """Store ``fields`` unless a configuration is stored already (atomically: of two racing ``init``s one
        wins and the other is checked against it). True if this call stored them."""
        value = json.dumps(fields, sort_keys=True).encode("utf-8")
        if conn.put_if_absent(self.table, self.row, self.family, self.qualifier, value)[0]:
            return True
        self.check(conn, fields, required=True)  # someone else's init won: it must agree with ours
        return False

    def given_conflicts(self, stored: dict[str, Any], given: dict[str, Any]) -> None:
        """Raise when a value given on the command line disagrees with the stored one."""
        conflicts = [f"{FLAGS[name]} {value!r}, but it was initialised with {stored.get(name)!r}"
                     for name, value in given.items() if value is not None and value != stored.get(name)]
        if conflicts:
            raise self.error(f"{self.name}: {'; '.join(conflicts)}")


def _cell(table: str, qid: str) -> ConfigCell:
    return ConfigCell(table, QueueLayout(qid, 1).config_row, CONFIG_FAMILY, CONFIG_QUALIFIER,
                      f"queue {qid!r} in table {table!r}", "queue init")


def read_stored_config(conn: Connection, table: str, qid: str) -> dict[str, Any] | None:
    """The configuration stored by ``init`` for queue ``qid`` in ``table``, or None if there is none."""
    return _cell(table, qid).read(conn)


def check_config(conn: Connection, config: QueueConfig, *, required: bool = False) -> None:
    """Raise ``QueueConfigError`` when ``config`` disagrees with what the queue was initialised with (or,
    with ``required=True``, when the queue has no stored configuration: the message names the closest queue
    of the table)."""
    _cell(config.table, config.qid).check(conn, config.stored_fields(), required=required,
                                          near=lambda: nearest_queue(conn, config.table, config.qid))


def require_config(conn: Connection, config: QueueConfig) -> None:
    """Raise ``QueueConfigError`` (one line) unless ``config`` names a queue that ``init`` made, in a table that
    exists, with the bucket count and serializers it was initialised with: what a reader of the queue checks
    before it trusts what it does not find (entries of another bucket count do not parse and would be missed)."""
    if not conn.table_exists(config.table):
        near = conn.closest_table(config.table)
        guess = f" (did you mean {near!r}?)" if near else ""
        raise QueueConfigError(f"queue {config.qid!r}: its table {config.table!r} does not exist{guess}; create the "
                               "queue with 'queue init'")
    check_config(conn, config, required=True)


def queue_ids(conn: Connection, table: str) -> list[str]:
    """The ids of the queues ``init`` made in ``table`` (one scan of their config cells)."""
    suffix = QueueLayout("q", 1).config_row[1:]  # b"#config"
    return sorted(cell.row[:-len(suffix)].decode("utf-8", "replace")
                  for cell in conn.scan(table, columns=[(CONFIG_FAMILY, CONFIG_QUALIFIER)])
                  if cell.row.endswith(suffix))


def nearest_queue(conn: Connection, table: str, qid: str) -> str | None:
    """The id of the queue of ``table`` closest to ``qid`` (for "did you mean"), or None."""
    ids = queue_ids(conn, table)
    return next(iter(difflib.get_close_matches(qid, ids, n=1, cutoff=0.5)), None) or (ids[0] if len(ids) == 1 else None)


def _has_rows(conn: Connection, table: str, qid: str) -> bool:
    """Whether ``table`` holds any entry (``<qid>:``) or record (``<qid>#``) row of queue ``qid``."""
    return any(True for prefix in (f"{qid}:", f"{qid}#")
               for _ in conn.scan(table, Range.prefix(prefix.encode("utf-8")), batch_size=1))


def store_config(conn: Connection, config: QueueConfig) -> bool:
    """Store ``config`` as the queue's configuration unless one is stored already (atomically: of two racing
    ``init``s one wins and the other is checked against it). Returns True if this call stored it; raises
    ``QueueConfigError`` when a different configuration is stored."""
    return _cell(config.table, config.qid).store(conn, config.stored_fields())


def resolve_config(conn: Connection, table: str, qid: str, *, num_buckets: int | None = None,
                   key_serializer: str | None = None, value_serializer: str | None = None) -> QueueConfig:
    """The queue's configuration: what ``init`` stored, checked against any value given; for a queue without
    a stored configuration (made before it was stored, or by another program), the values given, provided the
    table holds any row of that queue: a misspelt id with ``--buckets`` would read as an empty queue."""
    cell = _cell(table, qid)
    stored = cell.read(conn)
    if stored is None:
        if num_buckets is None:
            raise cell.missing(", or give the bucket count (--buckets)", nearest_queue(conn, table, qid))
        if not _has_rows(conn, table, qid):
            near = nearest_queue(conn, table, qid)
            guess = f" (did you mean queue {near!r}?)" if near else ""
            raise QueueConfigError(f"{cell.name} was never initialised{guess}: it has no stored configuration and the "
                                   f"table holds no entry or record of it; run '{cell.init_command}' first")
        return QueueConfig(table=table, qid=qid, num_buckets=num_buckets,
                           key_serializer=key_serializer or DEFAULT_SERIALIZER,
                           value_serializer=value_serializer or DEFAULT_SERIALIZER)
    cell.given_conflicts(stored, {"num_buckets": num_buckets, "key_serializer": key_serializer,
                                  "value_serializer": value_serializer})
    return QueueConfig.from_stored(table, qid, stored)


#: beside the configuration in the config row: the translator the queue's entries are meant for (optional)
TRANSLATOR_QUALIFIER = b"translator"


def read_translator(conn: Connection, config: QueueConfig) -> str | None:
    """The translator name ``init`` stored for the queue, or None."""
    row = config.layout.config_row
    for cell in conn.scan(config.table, Range.exact_row(row), columns=[(CONFIG_FAMILY, TRANSLATOR_QUALIFIER)],
                          batch_size=2):
        return cell.value.decode("utf-8")
    return None


def store_translator(conn: Connection, config: QueueConfig, name: str) -> None:
    """Store the queue's translator unless one is stored (atomically); a different stored one is refused."""
    _, held = conn.put_if_absent(config.table, config.layout.config_row, CONFIG_FAMILY, TRANSLATOR_QUALIFIER,
                                 name.encode("utf-8"))
    stored = held.decode("utf-8")
    if stored != name:
        raise QueueConfigError(f"queue {config.qid!r} in table {config.table!r} was initialised with translator "
                               f"{stored!r}, not {name!r}")
