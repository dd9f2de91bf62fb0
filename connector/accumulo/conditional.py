"""Conditional writes: apply a row's updates only if its conditions hold (compare-and-set on cells).

``ConditionalWriter.write_all`` takes any conditional mutations through thriftpy2's generic call;
:func:`write_conditional`, the hot path of combining and row transactions, sends the same call encoded
directly (:mod:`.wire.conditional`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ._idl import proxy
from .cells import IteratorSetting
from .errors import ConnectionLostError, InvalidMutationError, UnknownWriterError, translate
from .mutation import BytesLike, Mutation, to_bytes
from .session import Session
from .transport import send_frame
from .visibility import VisibilityError, check_visibility
from .wire.conditional import METHOD, encode_conditional_call
from .wire.frames import CALL_OVERHEAD_BYTES, largest_binary
from .wire.structs import column_update_to_thrift

log = logging.getLogger(__name__)
T = TypeVar("T")

#: how many times a conditional writer reopens itself for one call (see :class:`ConditionalWriter`)
REOPENS = 3

STATUS_NAMES = {v: k for k, v in proxy.ConditionalStatus._NAMES_TO_VALUES.items()}


@dataclass(frozen=True)
class Condition:
    """Holds when the cell's current value equals ``value``; with ``value=None``, when the cell is absent."""

    cf: BytesLike
    cq: BytesLike
    value: BytesLike | None = None
    visibility: BytesLike = b""
    timestamp: int | None = None
    iterators: Sequence[IteratorSetting] = ()

    def to_thrift(self) -> Any:
        visibility = to_bytes(self.visibility, "visibility")
        try:
            check_visibility(visibility)  # a server would refuse the whole call, or fail with no message
        except VisibilityError as exc:
            raise InvalidMutationError(f"condition on {self.cf!r}:{self.cq!r}: {exc}") from None
        column = proxy.Column(colFamily=to_bytes(self.cf, "column family"),
                              colQualifier=to_bytes(self.cq, "column qualifier"),
                              colVisibility=visibility)
        return proxy.Condition(column=column, timestamp=self.timestamp,
                               value=None if self.value is None else to_bytes(self.value, "value"),
                               iterators=[i.to_thrift() for i in self.iterators] or None)


class ConditionalMutation(Mutation):
    """A mutation applied only if all its conditions hold at the moment it reaches the tablet server."""

    __slots__ = ("conditions",)

    def __init__(self, row: BytesLike, conditions: Iterable[Condition] = ()) -> None:
        super().__init__(row)
        self.conditions = list(conditions)


class ConditionalWriter:
    """Sends conditional mutations and reports, per row, ACCEPTED, REJECTED, VIOLATED, UNKNOWN or
    INVISIBLE_VISIBILITY. A dropped connection is not retried: the call may have been applied, so every row of
    it is UNKNOWN (as Accumulo's own ConditionalWriter reports an outcome it cannot know), and the caller
    re-reads and decides. A gateway that does not know the writer's id
    (it was restarted, the socket failed over to another gateway of the pool, or the writer sat idle past the
    gateway's expiry) refuses the call before applying any of it: the writer then opens a new id on the
    gateway it talks to now and sends the same mutations again, up to ``REOPENS`` times.

    Conditions see a cell only if ``authorizations`` satisfy its visibility. The default is none, as in
    Accumulo's Java ConditionalWriter and upstream's proxy: a condition on a cell with a visibility is then
    INVISIBLE_VISIBILITY. The set is always sent explicitly, so no server's own default matters.
    """

    def __init__(self, connection: Session, table: str, *, timeout_ms: int | None = None,
                 authorizations: Iterable[BytesLike] | None = None) -> None:
        self.connection = connection
        self.table = table
        if timeout_ms is None and connection.server_wait is not None:
            timeout_ms = connection.server_wait_ms
        self._options = proxy.ConditionalWriterOptions(
            timeoutMs=timeout_ms,
            authorizations={to_bytes(a, "auth") for a in authorizations or ()},
        )
        self._id = connection.call("createConditionalWriter", table, self._options)

    def reopen(self) -> None:
        """Open a new server-side writer (same table and options) on the gateway this thread talks to now."""
        self._id = self.connection.call("createConditionalWriter", self.table, self._options)

    def send(self, call: Callable[[], T]) -> T:
        """Run ``call`` (which names :attr:`writer_id`); when the gateway does not know the id, which it says
        before applying anything, reopen and run it again. A lost connection raises ``ConnectionLostError``
        (:meth:`statuses` turns it into UNKNOWN rows)."""
        for attempt in range(REOPENS + 1):
            try:
                return call()
            except UnknownWriterError:
                if attempt == REOPENS:
                    raise
                log.warning("the gateway does not know conditional writer %s of %s (restarted, failed over or "
                            "expired): nothing was applied; sending again through a new one", self._id, self.table)
                self.reopen()
        raise AssertionError("unreachable")

    @property
    def writer_id(self) -> str:
        """The server-side conditional writer's id (what a pre-encoded ``updateRowsConditionally`` names)."""
        return str(self._id)

    def write(self, mutation: ConditionalMutation) -> str:
        """Apply one conditional mutation; returns its status name."""
        return self.write_all([mutation])[mutation.row]

    def write_all(self, mutations: Iterable[ConditionalMutation]) -> dict[bytes, str]:
        """Apply conditional mutations (one per row); returns {row: status name}."""
        updates: dict[bytes, Any] = {}
        size = largest = 0
        for m in mutations:
            if m.row in updates:
                raise InvalidMutationError(f"two conditional mutations for row {m.row!r} in one call")
            if not m.conditions:
                raise InvalidMutationError(f"conditional mutation for row {m.row!r} has no conditions")
            if not m.updates:
                raise InvalidMutationError(f"conditional mutation for row {m.row!r} has no updates")
            size += m.size + sum(len(c.to_thrift().value or b"") + 64 for c in m.conditions)
            largest = max(largest, largest_binary(m.row, m.updates, m.size))
            updates[m.row] = proxy.ConditionalUpdates(
                conditions=[c.to_thrift() for c in m.conditions],
                updates=[column_update_to_thrift(u) for u in m.updates],
            )
        if size + largest + CALL_OVERHEAD_BYTES > self.connection.max_frame_bytes:
            raise InvalidMutationError(f"conditional mutations of about {size} bytes do not fit in one frame "
                                       f"(max_frame_bytes={self.connection.max_frame_bytes}); send fewer at once")
        return self.statuses(list(updates), lambda: self.connection.call("updateRowsConditionally", self._id, updates,
                                                                     secret=False, retry=False))

    def statuses(self, rows: Sequence[bytes], call: Callable[[], dict[bytes, int]]) -> dict[bytes, str]:
        """{row: status name} of an ``updateRowsConditionally`` ``call`` of ``rows`` (sent by :meth:`send`): all
        UNKNOWN when its answer was lost with the connection."""
        try:
            result = self.send(call)
        except ConnectionLostError as exc:
            log.warning("a conditional write of %d rows to %s lost its answer (%s): their outcome is unknown",
                        len(rows), self.table, exc)
            return dict.fromkeys(rows, "UNKNOWN")
        return {row: STATUS_NAMES[status] for row, status in result.items()}

    def close(self) -> None:
        # it expires on the gateway anyway
        with contextlib.suppress(Exception):
            self.connection.call("closeConditionalWriter", self._id, secret=False, retry=False)

    def __enter__(self) -> ConditionalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_conditional(writer: ConditionalWriter, mutations: Sequence[ConditionalMutation]) -> dict[bytes, str]:
    """Like ``writer.write_all(mutations)`` (one mutation per row), the call encoded directly
    (:func:`.wire.conditional.encode_conditional_call`); mutations whose conditions carry iterators, or two
    for one row, go through ``write_all``, which checks and encodes everything else."""
    if any(c.iterators for m in mutations for c in m.conditions) or len({m.row for m in mutations}) < len(mutations):
        return writer.write_all(mutations)
    conn = writer.connection

    def send() -> Any:
        payload = encode_conditional_call(writer.writer_id, mutations)
        try:
            with conn.raw_client(METHOD) as client:
                send_frame(client, payload)
                return client._recv(METHOD)
        except ConnectionLostError:
            raise
        except Exception as exc:
            raise translate(exc) from exc

    return writer.statuses([m.row for m in mutations], send)
