"""Thrift frame limits: the one place that decides how large a frame the client may send.

A Thrift server closes the connection when a frame is longer than its limit: upstream accumulo-proxy's
``maxFrameSize`` defaults to 16M, libthrift's own default is 16,384,000 bytes, our gateway's is 64 MiB
(``--max-frame-bytes``). Upstream's proxy (libthrift 0.17, non-blocking server) also refuses a frame in
which one binary (a value, row or column) is longer than its limit minus the frame's own size: measured
with maxFrameSize=16M, one 7.99 MiB value passes and 8.01 MiB does not; four 3 MiB values in one frame
pass and five do not, while 15.9 MiB of 4 KB cells pass. The client sees only a dropped connection, so
it must never send such a frame.

The rule, for every frame: ``frame bytes + its largest binary <= max_frame_bytes``. The client cuts
``update`` calls into frames that keep it, and refuses before sending a mutation, or a one-call write,
that cannot. The default, 15 MiB, keeps below every server default (so one value can be ~7.5 MiB).

Both ways of writing ``update`` frames keep ``entries + largest binary <=
update_entries_budget(max_frame_bytes)``: ``BatchWriter.add_mutation`` encodes each mutation with the
Rust encoder of :mod:`.native` and weighs it with its exact size (:func:`frame_cost`), and a batch for
``add_cells`` (:mod:`.batches`) is cut into messages of at most :func:`update_message_limit` bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import AccumuloError
from ..mutation import Mutation
from .native import encode_column_updates

DEFAULT_MAX_FRAME_BYTES = 15 << 20
#: the smallest limit accepted: below it even a few ordinary cells would not fit in a frame
MIN_MAX_FRAME_BYTES = 64 << 10
#: bytes of an ``update`` message besides its row entries: message header and name (~10), writer id
#: (up to MAX_WRITER_ID_BYTES plus its length), map header (<= 7), stop bytes
UPDATE_OVERHEAD_BYTES = 512
MAX_WRITER_ID_BYTES = 256
#: the same for a generic call (updateAndFlush): secret, table name and struct headers fit in this
CALL_OVERHEAD_BYTES = 4096


def check_max_frame_bytes(max_frame_bytes: int) -> int:
    if not isinstance(max_frame_bytes, int) or max_frame_bytes < MIN_MAX_FRAME_BYTES:
        raise ValueError(f"max_frame_bytes must be an int >= {MIN_MAX_FRAME_BYTES}, got {max_frame_bytes!r}")
    return max_frame_bytes


def update_entries_budget(max_frame_bytes: int) -> int:
    """How many bytes of encoded row entries one ``update`` frame may carry under ``max_frame_bytes``."""
    return max_frame_bytes - UPDATE_OVERHEAD_BYTES


def check_writer_id(writer_id: str) -> None:
    # the budget above assumes a writer id of bounded size (upstream: a UUID, ours: similar)
    if len(writer_id.encode("utf-8")) > MAX_WRITER_ID_BYTES:
        raise AccumuloError(f"the server returned a writer id of {len(writer_id)} characters; "
                            f"at most {MAX_WRITER_ID_BYTES} fit the frame budget")


def largest_binary(row: bytes, updates: Sequence[Sequence[Any]], size_bound: int) -> int:
    """The longest binary of a mutation (row, family, qualifier, visibility or value). ``size_bound``
    (the mutation's size) bounds it: small mutations skip the exact count."""
    if size_bound <= 1 << 16:
        return size_bound
    return max(len(row), *(max(len(u[0]), len(u[1]), len(u[2]), len(u[4])) for u in updates))


def update_message_limit(max_frame_bytes: int, largest: int) -> int:
    """The longest ``update`` message a columnar encoder may produce under ``max_frame_bytes`` when the
    longest binary it carries is ``largest`` bytes: the same ``entries + largest <= budget`` rule as the
    per-mutation path (the message head is counted again on top: a few bytes of slack)."""
    return update_entries_budget(max_frame_bytes) - largest


#: ``BatchWriter``'s default bound on one mutation's size
DEFAULT_MAX_MUTATION_BYTES = 16 << 20


def mutation_fits(mutation: Mutation, max_frame_bytes: int,
                  max_mutation_bytes: int = DEFAULT_MAX_MUTATION_BYTES) -> bool:
    """Whether ``BatchWriter.add_mutation`` would accept the mutation's size under these limits (checked
    before writing anything, by callers that promise all or nothing)."""
    if mutation.size > max_mutation_bytes:
        return False
    _, cost, largest = frame_cost(mutation)
    return cost + largest <= update_entries_budget(max_frame_bytes)


def frame_cost(mutation: Mutation) -> tuple[bytes, int, int]:
    """A mutation's encoded updates (the Rust encoder's ``ColumnUpdate`` structs), its bytes as its own row
    entry (an upper bound when the row is already in the chunk) and its longest binary: what the frame
    rule weighs."""
    structs, cost = encode_column_updates(mutation.row, mutation.updates)
    return structs, cost, largest_binary(mutation.row, mutation.updates, mutation.size)
