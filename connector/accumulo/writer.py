"""BatchWriter: buffers mutations, sends them in chunks, and makes them durable on ``flush()``."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

import pyarrow as pa

from ._idl import proxy
from .error_names import TIMED_OUT
from .errors import (
    ConnectionLostError,
    InvalidMutationError,
    MutationsRejectedError,
    SendDeadlinePassedError,
    translate,
)
from .mutation import Mutation
from .session import Session
from .transport import close_client, is_transient, send_frame
from .wire.batches import CellBatch
from .wire.frames import (
    DEFAULT_MAX_MUTATION_BYTES,
    check_max_frame_bytes,
    check_writer_id,
    frame_cost,
    update_entries_budget,
)
from .wire.native import encode_update_entries, update_message

log = logging.getLogger(__name__)

# The bound writers are held to, on which a tombstone purge relies (connector.snapshot.purge; DESIGN.md: "The
# purge's bound"): one place for its parts.
#: the longest a flush of a BatchWriter lets the gateway wait for tablet servers before it fails with
#: ``TimedOutError`` (Accumulo's ``BatchWriterConfig.setTimeout``), rather than retrying for ever; a connection's
#: ``server_wait`` may lower it, never raise it
WRITER_TIMEOUT_SECONDS = 120.0
#: a drain exports a batch only within this long after reading it from the queue, and deletes its entries only when
#: the export returned within it (else they stay, to be read again: connector.queue.drain)
EXPORT_HOLD_SECONDS = 180.0
#: the longest after its read that a writer's copy of an export can land: a writer sends a batch's frames (first or
#: replayed after a reconnect) only within the hold (send_deadline), and each lands within the writer's timeout
LATE_WRITE_SECONDS = EXPORT_HOLD_SECONDS + WRITER_TIMEOUT_SECONDS
#: the shortest grace of a tombstone purge: two late writes (connector.snapshot.purge says why)
MIN_PURGE_GRACE_SECONDS = 2 * LATE_WRITE_SECONDS

DURABILITY = {"default": 0, "none": 1, "log": 2, "flush": 3, "sync": 4}

#: the deadline (time.monotonic()) of what this context's writers are given: see send_deadline
_SEND_DEADLINE: ContextVar[float | None] = ContextVar("send_deadline", default=None)


@contextlib.contextmanager
def send_deadline(deadline: float) -> Iterator[None]:
    """What a :class:`BatchWriter` is given within the block carries ``deadline`` (a ``time.monotonic()`` value): the
    writer never sends it after that moment, neither first nor replayed after a reconnect. It drops all it holds
    then and raises ``SendDeadlinePassedError``. How a drain and a relay keep a batch they read within its hold
    (DESIGN.md: "The purge's bound"); nested blocks keep the earliest deadline. A context variable: writers fed
    from another thread honour it only when that thread runs in a copy of this context
    (``contextvars.copy_context()``)."""
    outer = _SEND_DEADLINE.get()
    token = _SEND_DEADLINE.set(deadline if outer is None else min(outer, deadline))
    try:
        yield
    finally:
        _SEND_DEADLINE.reset(token)


class _WriterLost(ConnectionError):
    """The gateway forgot our writer (restart or idle expiry): reopen and replay, like a dropped socket."""


class BatchWriter:
    """Writes mutations to one table through the gateway.

    Mutations are grouped by row into chunks of about ``chunk_bytes`` and sent as they fill (one-way calls,
    no round trip), encoded by the Rust encoder of ``update`` (:mod:`.wire.native`), as ``add_cells``
    batches are. Every chunk fits one Thrift frame under ``max_frame_bytes`` (default: the connection's;
    the rule is in :mod:`.wire.frames`); a mutation that cannot fit in one frame is refused by
    ``add_mutation`` with ``InvalidMutationError``, before anything is sent.

    ``flush()`` waits until everything sent is durable, and raises ``MutationsRejectedError`` naming what
    Accumulo rejected. The writer stays usable afterwards: it closes the server-side writer and opens a
    fresh one, because upstream's proxy keeps a writer's first rejection and raises it on every later
    flush, never writing anything after it. After that error, mutations sent since the last successful
    flush may be partly applied: resend what you need (harmless for cells with explicit timestamps). The
    exporter does so by not acknowledging the batch.

    Until a flush succeeds the writer keeps what it sent. If the connection drops or the gateway restarts,
    it reconnects, opens a new server-side writer and sends those mutations again (bounded retries, then
    ``ConnectionLostError``). Replaying is harmless for cells with explicit timestamps; cells without one
    get the time of the replay. A ``flush()`` happens automatically when ``max_memory`` bytes are unflushed.

    ``timeout_ms`` bounds how long the gateway waits for tablet servers to take the writes (default: the
    connection's ``server_wait``, at most :data:`WRITER_TIMEOUT_SECONDS`; 0: no bound, for writes no tombstone
    purge relies on); past it ``flush()`` raises ``TimedOutError``, and what it held is not known to be durable
    (resend it).

    What it is given within :func:`send_deadline` is never sent after that deadline (a first send or a replay):
    the writer drops everything it holds instead and raises ``SendDeadlinePassedError``, and stays usable. A flush
    after the deadline that has nothing to send, on an unbroken connection, succeeds.

    As a context manager it flushes and closes on exit; if the block raised, it calls :meth:`abort` (drops what
    was not flushed) and the original exception propagates.
    """

    def __init__(
        self,
        connection: Session,
        table: str,
        *,
        max_memory: int = 64 << 20,
        chunk_bytes: int = 4 << 20,
        max_mutation_bytes: int = DEFAULT_MAX_MUTATION_BYTES,
        latency_ms: int = 0,
        timeout_ms: int | None = None,
        threads: int = 0,
        durability: str | None = None,
        max_frame_bytes: int | None = None,
    ) -> None:
        if chunk_bytes <= 0 or max_memory < chunk_bytes:
            raise ValueError("need 0 < chunk_bytes <= max_memory")
        if durability is not None and durability not in DURABILITY:
            raise ValueError(f"durability must be one of {sorted(DURABILITY)}, not {durability!r}")
        self.connection = connection
        self.table = table
        self.max_memory = max_memory
        self.max_frame_bytes = check_max_frame_bytes(
            connection.max_frame_bytes if max_frame_bytes is None else max_frame_bytes)
        #: row entries one update frame may carry; a chunk never grows past it
        self.frame_budget = update_entries_budget(self.max_frame_bytes)
        self.chunk_bytes = min(chunk_bytes, self.frame_budget)
        self.max_mutation_bytes = max_mutation_bytes
        if timeout_ms is None:  # the connection's bound on waiting for tablet servers, within the writers' bound
            bound = round(WRITER_TIMEOUT_SECONDS * 1000)
            timeout_ms = min(connection.server_wait_ms or bound, bound)
        self._options = proxy.WriterOptions(
            maxMemory=max_memory, latencyMs=latency_ms, timeoutMs=timeout_ms, threads=threads,
            durability=DURABILITY[durability] if durability else None,
        )
        self._lock = threading.RLock()
        # the chunk being built: row -> [number of updates, their encoded structs per mutation, ...] (bytes, not
        # the ColumnUpdate tuples: a chunk of tuples kept alive costs Python's garbage collector more than encoding)
        self._rows: dict[bytes, list[Any]] = {}
        self._rows_bytes = 0
        self._rows_largest = 0  # longest binary in the chunk being built (see frames)
        # sent since the last successful flush, in order: encoded chunks (rows, entries) and cell batches
        self._unacked: list[tuple[int, bytes] | CellBatch] = []
        self._unacked_bytes = 0
        self._largest_frame = 0  # of the unacknowledged ones, to explain a connection the server closed
        #: the earliest send_deadline of what the writer holds (rows being built and unacknowledged); None: none
        self._deadline: float | None = None
        self._client: Any = None
        self._writer_id: str | None = None
        self._broken = False
        self._closed = False
        #: mutations accepted by add_mutation since the writer was opened
        self.mutations_added = 0
        #: cell changes accepted by add_cells since the writer was opened
        self.cells_added = 0
        self.connection.retry_policy().run(self._open, self._on_transient, f"createWriter on {table}")

    # --- public -------------------------------------------------------------------------------------

    @property
    def writer_id(self) -> str | None:
        """The server-side writer's id; it changes when the writer is reopened (after a rejection, say)."""
        return self._writer_id

    def add_mutation(self, mutation: Mutation) -> None:
        """Queue one mutation; raises ``InvalidMutationError`` (nothing queued) if it cannot be sent."""
        if not mutation.updates:
            raise InvalidMutationError(f"mutation for row {mutation.row!r} has no updates")
        if mutation.size > self.max_mutation_bytes:
            raise InvalidMutationError(
                f"mutation for row {mutation.row!r} is {mutation.size} bytes, over the limit of "
                f"{self.max_mutation_bytes} (max_mutation_bytes)"
            )
        structs, cost, largest = frame_cost(mutation)
        if cost + largest > self.frame_budget:
            raise InvalidMutationError(
                f"mutation for row {mutation.row[:60]!r} encodes to {cost} bytes with a largest value of "
                f"{largest}: one Thrift frame under max_frame_bytes={self.max_frame_bytes} cannot carry it "
                f"(frame + largest value must fit; see connector.accumulo.wire.frames); split it, or raise "
                f"max_frame_bytes if the server allows (upstream proxy: maxFrameSize, gateway: --max-frame-bytes)"
            )
        with self._lock:
            self._check_open()
            self._take_deadline()
            if self._rows and self._rows_bytes + cost + max(largest, self._rows_largest) > self.frame_budget:
                self._send_rows()  # this chunk is full as far as the frame limit goes
            entry = self._rows.get(mutation.row)
            if entry is None:
                self._rows[mutation.row] = [len(mutation.updates), structs]
            else:  # a row twice in one chunk: one map entry (a Thrift map keeps one value per key)
                entry[0] += len(mutation.updates)
                entry.append(structs)
            self._rows_bytes += cost
            if largest > self._rows_largest:
                self._rows_largest = largest
            self.mutations_added += 1
            if self._rows_bytes >= self.chunk_bytes:
                self._send_rows()
            if self._unacked_bytes >= self.max_memory or (self._broken and self._unacked):
                self._flush_locked()

    def add_mutations(self, mutations: Iterable[Mutation]) -> None:
        for m in mutations:
            self.add_mutation(m)

    def add_cells(self, cells: pa.RecordBatch) -> None:
        """Queue a whole batch of cell changes (``UPDATE_SCHEMA``: row, cf, cq, cv, ts
        (null: the server chooses), value (null for a delete), delete), encoded natively into ``update``
        frames. Cells of one row form one mutation and travel in one frame.

        Raises ``InvalidMutationError`` (nothing queued, nothing sent) for a bad visibility expression, an
        empty row, a put without a value, a negative timestamp, or a row that cannot fit in one frame.
        Afterwards the batch is treated like added mutations: sent at once, replayed after a reconnect,
        durable after ``flush()``.
        """
        if cells.num_rows == 0:
            return
        batch = CellBatch(cells)
        with self._lock:
            self._check_open()
            self._take_deadline()
            frames = batch.frames(self._writer_id or "", self.max_frame_bytes, self.chunk_bytes)  # raises first
            self._send_rows()  # what add_mutation queued before goes first
            self._unacked.append(batch)
            self._unacked_bytes += sum(map(len, frames))
            self.cells_added += cells.num_rows
            self._send_frames(frames)
            if self._unacked_bytes >= self.max_memory or (self._broken and self._unacked):
                self._flush_locked()

    def flush(self) -> None:
        """Send everything queued and return once it is durable in Accumulo."""
        with self._lock:
            self._check_open()
            self._flush_locked()

    def close(self) -> None:
        """Flush, then release the server-side writer and the socket. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            flushed = False
            try:
                self._flush_locked()
                flushed = True
                self._close_server_writer(report=True)
            finally:
                if not flushed:
                    self._close_server_writer(report=False)  # e.g. the fresh one opened after a rejection
                self._closed = True
                close_client(self._client)

    def abort(self) -> None:
        """Drop everything not yet flushed and close the writer without flushing: the server-side writer
        and the socket are released, and what was sent since the last flush may or may not be applied
        (cells with explicit timestamps can be resent). Never raises for a dead connection; safe to call
        twice, and after ``close()``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._drop_held()
            try:
                self._close_server_writer(report=False)
            finally:
                close_client(self._client)

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close() if exc_type is None else self.abort()

    # --- internals ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"writer on {self.table} is closed")

    def _take_deadline(self) -> None:
        """What is being added carries the context's send_deadline: keep the earliest of what the writer holds."""
        deadline = _SEND_DEADLINE.get()
        if deadline is not None and (self._deadline is None or deadline < self._deadline):
            self._deadline = deadline

    def _check_deadline(self) -> None:
        """Before a send: past the deadline of what the writer holds, drop all of it (it must never be sent, not even
        replayed later) and raise."""
        if self._deadline is None:
            return
        late = time.monotonic() - self._deadline
        if late <= 0:
            return
        self._drop_held()
        raise SendDeadlinePassedError(
            f"writer on {self.table}: the deadline of the batch it carries passed {late:.1f} s ago, before all of it "
            f"was sent (a lost connection or a stall held it past its hold): dropped, to be read again")

    def _drop_held(self) -> None:
        """Forget everything not flushed: the chunk being built and what was sent unacknowledged."""
        self._rows.clear()
        self._rows_bytes = self._rows_largest = 0
        self._unacked.clear()
        self._unacked_bytes = self._largest_frame = 0
        self._deadline = None

    def _open(self) -> None:
        close_client(self._client)
        self._client = None
        client = self.connection.new_client()
        try:
            writer_id = client.createWriter(self.connection.shared_secret, self.table, self._options)
        except Exception as exc:
            close_client(client)
            if is_transient(exc):
                raise
            raise translate(exc) from exc
        check_writer_id(writer_id)
        self._writer_id = writer_id
        self._client = client

    def _close_server_writer(self, report: bool) -> None:
        if self._client is None or self._writer_id is None:
            return
        try:
            self._client.closeWriter(self._writer_id)
        except proxy.UnknownWriter:
            pass  # flushed already; the gateway may have expired it since
        except Exception as exc:
            # upstream's proxy raises a writer's old rejection again here; transport errors: it expires
            if report and not is_transient(exc):
                raise translate(exc) from exc

    def _replace_writer(self) -> None:
        """After a rejection: upstream's proxy would raise it on every later flush and drop every later
        update, so close this server-side writer and open a fresh one (on our gateway: merely tidy)."""
        self._close_server_writer(report=False)
        self._broken = True  # until a fresh one is open (a reopen cut short, even by Ctrl-C, leaves no client)
        try:
            self._open()
        except Exception as exc:  # noqa: BLE001 - the next flush reopens, and reports what fails then
            log.warning("writer on %s: reopening after a rejection failed (%s); will retry", self.table, exc)
            return
        self._broken = False

    def _on_transient(self, _exc: BaseException) -> None:
        self._broken = True

    def _send_rows(self) -> None:
        """Move the chunk being built to the unacknowledged list and send it (one-way)."""
        if not self._rows:
            return
        n_rows, entries = encode_update_entries(self._rows, self._rows_bytes)
        self._rows = {}
        self._rows_bytes = 0
        self._rows_largest = 0
        self._unacked.append((n_rows, entries))
        self._unacked_bytes += len(entries)
        if not self._broken:  # else replayed by the next flush
            self._send_frames([update_message(self._writer_id or "", n_rows, entries)])

    def _send_frames(self, frames: list[bytes]) -> None:
        """Send ``update`` frames one-way; a dropped connection marks the writer broken (the next flush
        reconnects and resends everything unacknowledged) instead of failing the caller."""
        if self._broken:
            return
        try:
            for frame in frames:
                self._check_deadline()
                self._largest_frame = max(self._largest_frame, len(frame))
                send_frame(self._client, frame)
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("writer on %s lost its connection (%s); will reconnect and resend", self.table, exc)
            self._broken = True

    def _flush_locked(self) -> None:
        self._send_rows()
        try:
            self.connection.retry_policy().run(self._flush_once, self._on_transient, f"flush of writer on {self.table}")
        except ConnectionLostError as exc:
            if self._largest_frame > 1 << 20:
                # a server whose frame limit is below ours closes the connection on the frame: say so
                raise ConnectionLostError(
                    f"{exc}; the largest frame in flight was {self._largest_frame} bytes "
                    f"(max_frame_bytes={self.max_frame_bytes}): a server whose frame limit is lower closes "
                    f"the connection on such a frame (upstream proxy: maxFrameSize, gateway: --max-frame-bytes)"
                ) from exc.__cause__
            raise
        self._drop_held()  # durable now (the chunk being built was sent first)

    def _flush_once(self) -> None:
        if self._broken:
            if self._unacked:
                self._check_deadline()  # before reconnecting: past it, nothing is replayed
            self._open()
            for sent in self._unacked:
                if isinstance(sent, CellBatch):
                    frames = sent.frames(self._writer_id or "", self.max_frame_bytes, self.chunk_bytes)
                else:
                    frames = [update_message(self._writer_id or "", *sent)]
                for frame in frames:
                    self._check_deadline()
                    self._largest_frame = max(self._largest_frame, len(frame))
                    send_frame(self._client, frame)
            self._broken = False
        try:
            self._client.flush(self._writer_id)
        except proxy.UnknownWriter as exc:
            raise _WriterLost(f"gateway no longer knows writer: {exc.msg}") from exc
        except proxy.MutationsRejectedException as exc:
            self._drop_held()  # the server applied what it could and reported the rest; do not resend
            self._replace_writer()
            if TIMED_OUT in (exc.msg or ""):  # no tablet server within the writer's timeout
                raise self.connection.timed_out(self.table, "took the writes") from exc
            raise MutationsRejectedError(f"table {self.table}: {exc.msg}") from exc
        except Exception as exc:
            if is_transient(exc):
                raise
            raise translate(exc) from exc
