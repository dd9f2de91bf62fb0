"""Bucket marks: the plain-Accumulo counterpart of the recipe's per-bucket weak notifications.

A producer that adds entries to a bucket sets the bucket's mark (``<qid>#mark:<bucketHex>``, see
:mod:`connector.queue.layout`) to a fresh random token, after its entries are durable. A streaming drain
plans from the marks, one small row per bucket, never from the entries. Once a micro-batch has drained a
bucket, the drain settles its mark with a conditional mutation on the token it planned with:

* the bucket is empty: delete the mark, only if it still holds that token;
* entries are left (a read limit stopped early): replace the token by a fresh one, so it is planned again.

A producer that marked meanwhile wrote a different token, so the condition fails and its mark stays: no mark
set after the drain read the bucket is lost, even two marks in the same server millisecond (tokens, not
timestamps, tell them apart). Entries written without a mark (a crash between entry and mark, or another
program writing the queue layout) are found by the drain's periodic full sweep.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from connector.accumulo import Condition, ConditionalMutation, Connection, Mutation, Range

from .config import QueueConfig
from .layout import ENTRY_FAMILY, ENTRY_QUALIFIER, MARK_FAMILY, MARK_QUALIFIER, QueueLayout


def new_token() -> bytes:
    """A token no other mark ever had."""
    return secrets.token_hex(16).encode("ascii")


def mark_mutations(layout: QueueLayout, buckets: Iterable[int]) -> list[Mutation]:
    """Mutations setting the marks of ``buckets``, each to a fresh token (send them after the entries)."""
    return [Mutation(layout.mark_row(b)).put(MARK_FAMILY, MARK_QUALIFIER, new_token()) for b in sorted(set(buckets))]


def read_marks(conn: Connection, config: QueueConfig) -> dict[int, bytes]:
    """The marked buckets and their tokens: one short scan, whatever the queue holds."""
    layout = config.layout
    marks: dict[int, bytes] = {}
    for cell in conn.scan(config.table, Range.prefix(layout.mark_prefix), columns=[(MARK_FAMILY, MARK_QUALIFIER)],
                          batch_size=max(16, config.num_buckets)):
        bucket = layout.bucket_of_mark(cell.row)
        if bucket is not None:
            marks[bucket] = cell.value
    return marks


def settle_marks(conn: Connection, config: QueueConfig, planned: Mapping[int, bytes], *,
                 drained_whole: Collection[int] = ()) -> dict[int, str]:
    """After a drain of the ``planned`` buckets (bucket -> the token it planned with): delete each mark that
    still holds its token if the bucket is empty, else give it a fresh token. Returns {bucket: outcome}
    ("cleared", "renewed", or "kept": a producer marked it meanwhile).

    A bucket in ``drained_whole`` was read to its end, without a read limit, after it was planned: its mark is
    cleared without looking whether the bucket is empty. That is safe because a producer sets a mark only
    after its entries are durable, so every entry behind the planned token was there when the bucket was
    read, and was exported (or dead-lettered); an entry added later came with a new token, which the
    condition protects. It saves one scan per bucket, most of the cost of settling."""
    if not planned:
        return {}
    layout = config.layout
    whole = set(drained_whole)
    to_look_at = [b for b in planned if b not in whole]
    # one short scan per bucket read with a limit; in parallel, as a backlog has every bucket limited
    with ThreadPoolExecutor(min(8, max(1, len(to_look_at))), thread_name_prefix="settle") as pool:
        empty = dict(zip(to_look_at, pool.map(lambda b: _is_empty(conn, config, b), to_look_at), strict=True))
    intents: list[tuple[int, ConditionalMutation, str]] = []
    for bucket, token in planned.items():
        mutation = ConditionalMutation(layout.mark_row(bucket), [Condition(MARK_FAMILY, MARK_QUALIFIER, token)])
        if bucket in whole or empty[bucket]:
            mutation.delete(MARK_FAMILY, MARK_QUALIFIER)
            intents.append((bucket, mutation, "cleared"))
        else:
            mutation.put(MARK_FAMILY, MARK_QUALIFIER, new_token())
            intents.append((bucket, mutation, "renewed"))
    with conn.conditional_writer(config.table) as writer:
        status = writer.write_all(m for _, m, _ in intents)
    return {bucket: outcome if status[m.row] == "ACCEPTED" else "kept" for bucket, m, outcome in intents}


def _is_empty(conn: Connection, config: QueueConfig, bucket: int) -> bool:
    cells = conn.scan(config.table, config.layout.bucket_range(bucket), columns=[(ENTRY_FAMILY, ENTRY_QUALIFIER)],
                      batch_size=1)
    return next(iter(cells), None) is None


def marks_for_entry_rows(rows: Iterable[bytes]) -> list[Mutation]:
    """Mark mutations for the buckets of these entry rows, whatever queue each belongs to (the row names its
    queue id and bucket: ``<qid>:<bucketHex>:...``); rows that are not entry rows are left out."""
    marked: set[bytes] = set()
    for row in rows:
        qid, sep, rest = row.partition(b":")
        hex_part, sep2, _ = rest.partition(b":")
        if sep and sep2 and qid and hex_part and set(hex_part) <= _HEX:
            marked.add(qid + b"#mark:" + hex_part)
    return [Mutation(r).put(MARK_FAMILY, MARK_QUALIFIER, new_token()) for r in sorted(marked)]


_HEX = frozenset(b"0123456789abcdef")
