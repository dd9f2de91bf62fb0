"""The configuration a queue was initialised with, stored in the queue's own rows.

Every reader and writer of a queue must agree on its bucket count and serializers: a drain told the wrong
bucket count finds nothing, and a producer told the wrong one writes rows no drain can place. So ``init``
stores them (row ``<qid>#config``, see :mod:`connector.queue.layout`), a conflicting ``init`` is refused, and
later users check against them or read them from there.
"""

from __future__ import annotations

import json
from typing import Any

from connector.accumulo import Condition, ConditionalMutation, Connection, Range

from .config import QueueConfig
from .errors import QueueError
from .layout import CONFIG_FAMILY, CONFIG_QUALIFIER, QueueLayout

#: the fields every user of a queue must agree on (``buckets_per_tablet`` only shapes the splits)
CHECKED = ("num_buckets", "key_serializer", "value_serializer")
_FLAGS = {"num_buckets": "--buckets", "key_serializer": "--key-serializer", "value_serializer": "--value-serializer"}


class QueueConfigError(QueueError, ValueError):
    """A queue's stored configuration is missing, unreadable, or disagrees with the one given."""


def read_stored_config(conn: Connection, table: str, qid: str) -> dict[str, Any] | None:
    """The configuration stored by ``init`` for queue ``qid`` in ``table``, or None if there is none."""
    row = QueueLayout(qid, 1).config_row
    for cell in conn.scan(table, Range.exact_row(row), columns=[(CONFIG_FAMILY, CONFIG_QUALIFIER)], batch_size=2):
        try:
            stored = json.loads(cell.value)
            if not isinstance(stored, dict) or not isinstance(stored.get("num_buckets"), int):
                raise ValueError("no num_buckets")
        except ValueError as exc:
            raise QueueConfigError(f"queue {qid!r} in table {table!r}: unreadable stored configuration "
                                   f"{cell.value[:200]!r} ({exc})") from None
        return stored
    return None


def _stored_fields(config: QueueConfig) -> dict[str, Any]:
    return {"num_buckets": config.num_buckets, "key_serializer": config.key_serializer,
            "value_serializer": config.value_serializer, "buckets_per_tablet": config.tablet_buckets}


def _conflicts(config: QueueConfig, stored: dict[str, Any]) -> list[str]:
    return [f"{name.replace('num_', '')} {stored.get(name)!r}, not {getattr(config, name)!r}"
            for name in CHECKED if stored.get(name) != getattr(config, name)]


def check_config(conn: Connection, config: QueueConfig, *, required: bool = False) -> None:
    """Raise ``QueueConfigError`` when ``config`` disagrees with what the queue was initialised with (or,
    with ``required=True``, when the queue has no stored configuration)."""
    stored = read_stored_config(conn, config.table, config.qid)
    if stored is None:
        if required:
            raise QueueConfigError(f"queue {config.qid!r} in table {config.table!r} has no stored configuration: "
                                   "run 'queue init' first")
        return
    conflicts = _conflicts(config, stored)
    if conflicts:
        raise QueueConfigError(f"queue {config.qid!r} in table {config.table!r} was initialised with "
                               f"{'; '.join(conflicts)}")


def store_config(conn: Connection, config: QueueConfig) -> bool:
    """Store ``config`` as the queue's configuration unless one is stored already (atomically: of two racing
    ``init``s one wins and the other is checked against it). Returns True if this call stored it; raises
    ``QueueConfigError`` when a different configuration is stored."""
    row = config.layout.config_row
    value = json.dumps(_stored_fields(config), sort_keys=True).encode("utf-8")
    with conn.conditional_writer(config.table) as writer:
        mutation = ConditionalMutation(row, [Condition(CONFIG_FAMILY, CONFIG_QUALIFIER)])  # only if absent
        mutation.put(CONFIG_FAMILY, CONFIG_QUALIFIER, value)
        status = writer.write(mutation)
    if status == "ACCEPTED":
        return True
    check_config(conn, config, required=True)  # someone else's init won: it must agree with ours
    return False


def resolve_config(conn: Connection, table: str, qid: str, *, num_buckets: int | None = None,
                   key_serializer: str | None = None, value_serializer: str | None = None) -> QueueConfig:
    """The queue's configuration: what ``init`` stored, checked against any value given; for a queue without
    a stored configuration (made before it was stored, or by another program), the values given."""
    given = {"num_buckets": num_buckets, "key_serializer": key_serializer, "value_serializer": value_serializer}
    stored = read_stored_config(conn, table, qid)
    if stored is None:
        if num_buckets is None:
            raise QueueConfigError(f"queue {qid!r} in table {table!r} has no stored configuration: run "
                                   "'queue init' first, or give the bucket count (--buckets)")
        return QueueConfig(table=table, qid=qid, num_buckets=num_buckets,
                           key_serializer=key_serializer or "json", value_serializer=value_serializer or "json")
    conflicts = [f"{_FLAGS[name]} {value!r}, but the queue was initialised with {stored.get(name)!r}"
                 for name, value in given.items() if value is not None and value != stored.get(name)]
    if conflicts:
        raise QueueConfigError(f"queue {qid!r} in table {table!r}: {'; '.join(conflicts)}")
    return QueueConfig(table=table, qid=qid, num_buckets=stored["num_buckets"],
                       buckets_per_tablet=stored.get("buckets_per_tablet"),
                       key_serializer=stored.get("key_serializer", "json"),
                       value_serializer=stored.get("value_serializer", "json"))
