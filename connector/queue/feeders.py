"""Which queues feed a destination table, recorded on the destination itself.

Verify and repair compare a destination with what ONE producer table implies through ONE queue. A destination
that another queue also writes into holds cells that table does not imply, and a repair would delete them. So
every drain and bootstrap records, once per process, the queue it writes for as a table property of the
destination (``table.custom.accumulo_export.feeder.<queue id>`` = JSON naming the queue), and verify reads them
back (:func:`destination_feeders`). A queue's id is a random token kept in its config row (``i:id``), made the
first time it is asked for: two queues of the same name on two clusters have different ids.

Recording needs the permission to alter the destination table. Without it a drain goes on (a warning says
that verify cannot see this feeder); verify then knows only the feeders that could be recorded.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from dataclasses import dataclass

from connector.accumulo import AccumuloSecurityError, Connection, Range

from .config import QueueConfig

log = logging.getLogger(__name__)

FEEDER_PROPERTY = "table.custom.accumulo_export.feeder."
ID_FAMILY, ID_QUALIFIER = b"i", b"id"


@dataclass(frozen=True)
class Feeder:
    """A queue that writes into a destination: its id and, for messages, its table and name."""

    queue_id: str
    queue_table: str
    qid: str

    def describe(self) -> str:
        return f"queue {self.qid!r} of table {self.queue_table!r}"

    def to_json(self) -> str:
        return json.dumps({"queue_table": self.queue_table, "qid": self.qid}, sort_keys=True)


def queue_id(conn: Connection, queue: QueueConfig) -> str:
    """The queue's id (made and stored the first time: a conditional put, so concurrent callers agree)."""
    row = queue.layout.config_row

    def stored() -> str | None:
        for cell in conn.scan(queue.table, Range.exact_row(row), columns=[(ID_FAMILY, ID_QUALIFIER)], batch_size=2):
            return cell.value.decode("ascii")
        return None

    found = stored()
    if found is None:
        _, held = conn.put_if_absent(queue.table, row, ID_FAMILY, ID_QUALIFIER, secrets.token_hex(8).encode("ascii"))
        found = held.decode("ascii")
    return found


def feeder_of(conn: Connection, queue: QueueConfig) -> Feeder:
    """The queue ``queue`` on ``conn`` as a feeder."""
    return Feeder(queue_id(conn, queue), queue.table, queue.qid)


_recorded: set[tuple[str, str, str]] = set()
_lock = threading.Lock()


def record_feeder(dest: Connection, dest_table: str, feeder: Feeder, where: str = "") -> None:
    """Record on ``dest_table`` that ``feeder`` writes into it (once per process; a property that is already
    there is not written again). Without the permission to alter the table, a warning says so."""
    key = (where or dest.address(), dest_table, feeder.queue_id)
    with _lock:
        if key in _recorded:
            return
    name = FEEDER_PROPERTY + feeder.queue_id
    try:
        if dest.table_properties(dest_table).get(name) != feeder.to_json():
            dest.set_table_property(dest_table, name, feeder.to_json())
    except AccumuloSecurityError as exc:
        log.warning("cannot record on %s that %s feeds it (%s): verify will not know of this feeder", dest_table,
                    feeder.describe(), exc)
    with _lock:
        _recorded.add(key)


def destination_feeders(dest: Connection, dest_table: str) -> list[Feeder]:
    """The feeders recorded on ``dest_table``, by queue id."""
    out = []
    for name, value in sorted(dest.table_properties(dest_table).items()):
        if name.startswith(FEEDER_PROPERTY):
            try:
                d = json.loads(value)
                out.append(Feeder(name.removeprefix(FEEDER_PROPERTY), str(d["queue_table"]), str(d["qid"])))
            except (ValueError, KeyError, TypeError):
                out.append(Feeder(name.removeprefix(FEEDER_PROPERTY), "?", f"unreadable record {value[:60]!r}"))
    return out
