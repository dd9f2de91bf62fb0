"""Processing a combine queue, one bucket at a time (invariant 6).

A pass over a bucket reads it with one scan (each key row: outbox cells, version, value, queued updates) and,
a chunk of rows at a time:

1. relays the outbox cells an earlier pass left (it crashed between its combine and its relay);
2. for every key with queued updates, folds the value and the updates with the combiner, gives the batch of
   changes ``(key, old, new, seq)`` to the observer, and writes one conditional mutation per row: the new value
   and version, a delete of each consumed update at its own timestamp, and an outbox cell per export. The
   condition: the version is still the one read (every combine changes it). So a combine applies exactly the
   updates it read, once; updates queued meanwhile stay for the next pass;
3. relays the accepted outbox cells into the export queue (the entry row holds export key and seq, so a
   relay repeated after a crash writes the same row), flushes, and only then deletes them at their timestamp;
4. re-reads the rows whose condition was lost (another pass won) or whose outcome is unknown, and retries
   them, at most ``max_attempts`` times; what is left waits for the next pass.

A key whose combiner, observer or serializer fails keeps its updates queued; the error is reported with the key
and the other keys proceed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connector.accumulo import ConditionalMutation, Connection
from connector.queue import QueueConfig
from connector.queue.codec import EntryCodec
from connector.queue.stored_config import check_config
from connector.transactions.commit import ACCEPTED, REJECTED, UNKNOWN, Committer
from connector.transactions.layout import OutboxCell, export_cell, parse_version
from connector.transactions.relay import Relay, relay_sources
from connector.transactions.targets import record_source

from .config import CombineConfig
from .functions import Change, Combiner, Observer, combiner_from_name, observer_from_name
from .key_rows import KeyRow, key_rows, read_key_rows
from .layout import COMBINE_TX_LAYOUT, STATE_FAMILY, UPDATE_FAMILY, VALUE_QUALIFIER
from .stats import CombineStats

log = logging.getLogger(__name__)

#: at most this many updates of one key go into one conditional mutation (conditions and deletes per update);
#: a key with more is combined again in the same pass
MAX_UPDATES_PER_COMBINE = 5_000


@dataclass
class _Plan:
    state: KeyRow
    mutation: ConditionalMutation
    consumed: int
    outbox: list[OutboxCell]
    change: Change | None
    seq: int
    new_value: bytes | None


class CombineProcessor:
    """Combines the queued updates of whole buckets (see the module's description).

    ``combiner``/``observer``: callables or names (``sum``; ``changes``; ``module:callable``); with an
    observer, ``export_queue`` is the queue its exports go to (initialised; it may live in another table).
    ``rows_per_batch`` key rows are combined per round of conditional writes. ``clock_us`` gives wall-clock
    microseconds for sequence numbers.
    """

    def __init__(self, conn: Connection, config: CombineConfig, combiner: str | Combiner = "sum",
                 observer: str | Observer | None = None, export_queue: QueueConfig | None = None, *,
                 max_attempts: int = 5, rows_per_batch: int = 1000, scan_batch: int = 5000,
                 writer_options: Mapping[str, Any] | None = None,
                 clock_us: Callable[[], int] = lambda: time.time_ns() // 1000) -> None:
        if max_attempts < 1 or rows_per_batch < 1:
            raise ValueError("max_attempts and rows_per_batch must be >= 1")
        self.connection = conn
        self.config = config
        self.combiner: Combiner = combiner_from_name(combiner) if isinstance(combiner, str) else combiner
        self.observer: Observer | None = observer_from_name(observer) if isinstance(observer, str) else observer
        if self.observer is not None and export_queue is None:
            raise ValueError("an update observer needs an export queue for its exports")
        self.export_queue = export_queue
        self._export_codec = EntryCodec(export_queue) if export_queue is not None else None
        self._export_checked = False
        self.max_attempts = max_attempts
        self.rows_per_batch = rows_per_batch
        self.scan_batch = scan_batch
        self._writer_options = dict(writer_options or {})
        self._clock_us = clock_us
        self._layout = config.layout
        self._key_ser, self._value_ser = config.serializers()
        # open for one process_buckets call: the same commit and relay code as row transactions
        self._committer = Committer(conn, config.table, COMBINE_TX_LAYOUT)
        self._relayer = Relay(conn, config.table, COMBINE_TX_LAYOUT, writer_options)

    # --- entry points -----------------------------------------------------------------------------------

    def process_buckets(self, buckets: Iterable[int]) -> CombineStats:
        """One pass over each bucket in turn; returns what was done."""
        started = time.monotonic()
        stats = CombineStats()
        if self.export_queue is not None and not self._export_checked:
            # relaying into a queue initialised differently would put entries where its drain never looks
            check_config(self.connection, self.export_queue, required=True)
            # so a streaming drain of the export queue relays what a crashed pass left in our outboxes
            record_source(self.connection, self.export_queue.table, self.export_queue.layout.config_row,
                          self.config.table, COMBINE_TX_LAYOUT)
            self._export_checked = True
        try:
            for bucket in buckets:
                scanned_at = time.monotonic()  # before the bucket's rows were read: where a relay's hold starts
                cells = self.connection.scan(self.config.table, self._layout.bucket_range(bucket),
                                             batch_size=self.scan_batch)
                chunk: list[KeyRow] = []
                for row in key_rows(cells):
                    chunk.append(row)
                    if len(chunk) >= self.rows_per_batch:
                        self._process_rows(chunk, stats, scanned_at)
                        chunk = []
                if chunk:
                    self._process_rows(chunk, stats, scanned_at)
        finally:
            self._close()
            stats.seconds = time.monotonic() - started
        return stats

    # --- one chunk of rows ------------------------------------------------------------------------------

    def _process_rows(self, rows: list[KeyRow], stats: CombineStats, read_at: float) -> None:
        left = [(r.row, o) for r in rows for o in r.outbox]
        if left:
            self._relay(left, read_at)
            stats.leftovers += len(left)
        pending = [r for r in rows if r.updates]
        stats.keys += len(pending)
        attempts: dict[bytes, int] = {}
        while pending:
            plans = self._plan(pending, stats)
            sent_at = time.monotonic()
            statuses = self._write([p.mutation for p in plans])
            again: list[bytes] = []
            going_on: list[KeyRow] = []
            accepted_outbox: list[tuple[bytes, OutboxCell]] = []
            for p in plans:
                row = p.state.row
                status = statuses[row]
                if status == ACCEPTED:
                    stats.updates += p.consumed
                    if p.change is not None:
                        stats.changed += 1
                        stats.deleted += p.change.new is None
                    accepted_outbox += [(row, c) for c in p.outbox]
                    if p.consumed < len(p.state.updates):
                        # more updates than one mutation takes: go on with the rest from the state we wrote
                        # (if the row changed since, the condition fails and it is re-read)
                        going_on.append(KeyRow(row, p.state.updates[p.consumed:], [], str(p.seq).encode("ascii"),
                                             p.new_value))
                elif status in (REJECTED, UNKNOWN):
                    # another pass won the row, or we cannot know whether ours applied: re-read decides
                    stats.conflicts += 1
                    attempts[row] = attempts.get(row, 0) + 1
                    if attempts[row] >= self.max_attempts:
                        stats.contended += 1
                        log.warning("combine queue %s: key row %r still contended after %d attempts; left for "
                                    "the next pass", self.config.cid, row, attempts[row])
                    else:
                        again.append(row)
                else:
                    self._fail(stats, self._describe(row), f"conditional mutation {status}")
            if accepted_outbox:
                self._relay(accepted_outbox, sent_at)
                stats.exports += len(accepted_outbox)
            reread_at = time.monotonic()
            reread = read_key_rows(self.connection, self.config.table, again, self.scan_batch) if again else []
            left = [(r.row, o) for r in reread for o in r.outbox]
            if left:
                self._relay(left, reread_at)  # ours from an UNKNOWN outcome that did apply, or another pass's
                stats.leftovers += len(left)
            pending = going_on + [r for r in reread if r.updates]

    def _plan(self, rows: list[KeyRow], stats: CombineStats) -> list[_Plan]:
        """Combine each row; then observe the batch of changes; then build the conditional mutations."""
        combined: list[tuple[KeyRow, Any, bytes | None, int, int, Change | None]] = []
        for r in rows:
            key: Any = None
            try:
                key = self._key_ser.loads(self._layout.key_of(r.row))
                prev_seq = parse_version(r.seq)
                old = self._value_ser.loads(r.value) if r.value is not None else None
                consumed = min(len(r.updates), MAX_UPDATES_PER_COMBINE)
                deltas = [self._value_ser.loads(v) for _, _, v in r.updates[:consumed]]
                new = self.combiner(key, old, deltas)
                new_bytes = None if new is None else self._value_ser.dumps(new)
            except Exception as exc:  # noqa: BLE001 - the user's combiner or serializer: reported with its key
                self._fail(stats, self._describe(r.row, key), f"{type(exc).__name__}: {exc}")
                continue
            # rises per key, so versioned replay on B orders this key's changes
            seq = max(self._clock_us(), prev_seq + 1)
            change = Change(key, old, new, seq) if new_bytes != r.value else None
            combined.append((r, key, new_bytes, seq, consumed, change))

        exports, failed = self._observe([c for *_, c in combined if c is not None], stats)
        plans = []
        for r, key, new_bytes, seq, consumed, change in combined:
            if change is not None and id(change) in failed:
                continue
            try:
                plans.append(self._mutation(r, new_bytes, seq, consumed, change,
                                            exports.get(id(change), []) if change is not None else []))
            except Exception as exc:  # noqa: BLE001 - an export the export queue's serializers refuse
                self._fail(stats, self._describe(r.row, key), f"export: {type(exc).__name__}: {exc}")
        return plans

    def _mutation(self, r: KeyRow, new_bytes: bytes | None, seq: int, consumed: int, change: Change | None,
                  exports: list[tuple[Any, Any]]) -> _Plan:
        # the version read before the value and the updates (see layout): unchanged means none of them changed;
        # r.seq None: only while the key has no version
        m = COMBINE_TX_LAYOUT.commit_mutation(r.row, r.seq, seq)
        for uid, ts, _ in r.updates[:consumed]:
            m.delete(UPDATE_FAMILY, uid, timestamp=ts)
        outbox: list[OutboxCell] = []
        if change is not None:
            if new_bytes is None:
                m.delete(STATE_FAMILY, VALUE_QUALIFIER, timestamp=seq)
            else:
                m.put(STATE_FAMILY, VALUE_QUALIFIER, new_bytes, timestamp=seq)
            assert self._export_codec is not None or not exports
            for export_key, export_value in exports:
                entry_row, value = self._export_codec.encode(export_key, export_value, seq)  # type: ignore[union-attr]
                outbox.append(export_cell(self.export_queue.table, entry_row, value, seq))  # type: ignore[union-attr]
            COMBINE_TX_LAYOUT.add_outbox(m, outbox)
        return _Plan(r, m, consumed, outbox, change, seq, new_bytes)

    def _observe(self, changes: list[Change],
                 stats: CombineStats) -> tuple[dict[int, list[tuple[Any, Any]]], set[int]]:
        """The observer's exports by change (id), and the changes whose observation failed."""
        if self.observer is None or not changes:
            return {}, set()
        try:
            return self._exports_of(changes, self.observer(changes)), set()
        except Exception:  # noqa: BLE001 - find the keys to blame: observe them one by one
            pass
        exports: dict[int, list[tuple[Any, Any]]] = {}
        failed: set[int] = set()
        for change in changes:
            try:
                exports.update(self._exports_of([change], self.observer([change])))
            except Exception as exc:  # noqa: BLE001 - the user's observer: reported with its key
                failed.add(id(change))
                self._fail(stats, repr(change.key), f"observer: {type(exc).__name__}: {exc}")
        return exports, failed

    @staticmethod
    def _exports_of(changes: list[Change],
                    produced: Iterable[tuple[Change, Any, Any]]) -> dict[int, list[tuple[Any, Any]]]:
        ids = {id(c) for c in changes}
        out: dict[int, list[tuple[Any, Any]]] = {}
        for change, key, value in produced:
            if id(change) not in ids:
                raise ValueError("observer returned an export for a change that is not in its batch")
            out.setdefault(id(change), []).append((key, value))
        return out

    # --- Accumulo ---------------------------------------------------------------------------------------

    def _write(self, mutations: list[ConditionalMutation]) -> dict[bytes, str]:
        return self._committer.write(mutations)

    def _relay(self, items: list[tuple[bytes, OutboxCell]], read_at: float) -> None:
        """Copy outbox cells into the export queue, flush, mark, then delete them (the relay of row
        transactions: see :mod:`connector.transactions.relay`; ``read_at``: before they were read or committed,
        where the relay's hold starts)."""
        self._relayer.relay(items, read_at)

    def _close(self) -> None:
        self._relayer.close()
        self._committer.close()

    # --- errors -----------------------------------------------------------------------------------------

    def _describe(self, row: bytes, key: Any = None) -> str:
        if key is not None:
            return repr(key)
        try:
            return repr(self._key_ser.loads(self._layout.key_of(row)))
        except Exception:  # noqa: BLE001 - an undecodable key: name its row instead
            return f"row {row[:100]!r}"

    def _fail(self, stats: CombineStats, key: str, message: str) -> None:
        stats.failed += 1
        text = f"key {key}: {message}"
        if len(stats.errors) < CombineStats.MAX_ERRORS:
            stats.errors.append(text)
        log.warning("combine queue %s: %s; its updates stay queued", self.config.cid, text)


def combine_buckets(conn: Connection, config: CombineConfig, buckets: Iterable[int], combiner: str | Combiner = "sum",
                    observer: str | Observer | None = None, export_queue: QueueConfig | None = None,
                    **options: Any) -> CombineStats:
    """One pass over ``buckets`` (see :class:`CombineProcessor` for the options)."""
    return CombineProcessor(conn, config, combiner, observer, export_queue, **options).process_buckets(buckets)


def combine_all(conn: Connection, config: CombineConfig, combiner: str | Combiner = "sum",
                observer: str | Observer | None = None, export_queue: QueueConfig | None = None, *,
                max_passes: int = 100, **options: Any) -> CombineStats:
    """Passes over the buckets that have work, until one finds nothing to do or makes no progress (keys that
    keep failing stay queued); returns the totals. Plain Python, no Spark."""
    from .status import combine_status

    processor = CombineProcessor(conn, config, combiner, observer, export_queue, **options)
    total = CombineStats()
    # updates that crashed row-transaction producers left in their outboxes are combined in this call
    relay_sources(conn, config.table, config.layout.config_row)
    for _ in range(max_passes):
        pending = combine_status(conn, config).pending_buckets()
        if not pending:
            break
        stats = processor.process_buckets(pending)
        total += stats
        if stats.progress == 0 and not stats.conflicts:
            break
    return total
