"""The ``packed`` queue value encoding: the built-in translators' inputs (difference updates, cell lists,
operation logs) in a binary layout without field names, about a third of their JSON.

A queue chooses it at ``queue init --value-serializer packed``; the choice is stored in the queue's
configuration row, so queues made before keep JSON and every drain reads each queue its own way. Its one decoder
and its constants are in the Rust core (``connector/_native/src/packed.rs``): the drain translates what it
decodes, and :func:`unpack` gives it to Python. Producers encode natively too (``connector/_native/src/pack.rs``,
:func:`pack`), and so does the Java example producer (``RowTransactionExample``). Test vectors that every side
checks: ``tests/vectors/packed.json``.

Layout (``varint``: unsigned LEB128; ``bytes``: a varint length then that many bytes)::

    value      = 0xFF 0x01 shape body       0xFF never starts UTF-8 text, so no JSON value looks packed
    shape      = 0x01 difference: body = list(old) list(new)
               | 0x02 cells:      body = list
               | 0x03 operations: body = list
    list       = varint(count) cell*count
    cell       = flags bytes(row) bytes(cf) bytes(cq) [bytes(cv)] [bytes(value)]
    flags      = 0x01 a cv follows (none: empty visibility)
               | 0x02 a value follows (none: a delete; every cell of a difference has one)
               | 0x04 text: every field was text (they decode as str, else as bytes)

Nothing may follow the body, other flag bits must be clear, a varint holds at most 64 bits and a row is never
empty (each is refused by both ``pack`` and ``unpack``). What ``dumps`` takes, and what ``loads``
gives back (the canonical form, which the Python translators read as they read JSON):

- a difference update ``{"old": [cell, ...], "new": [cell, ...]}`` (either may be missing or null, ``{}``
  changes nothing), a
  ``DifferenceUpdate``-like object with ``old``/``new`` attributes or an ``(old, new)`` pair: comes back
  as ``{"old": [...], "new": [...]}``;
- a cell or a list of cells ``{"row", "cf", "cq", "cv"?, "value"?, "delete"?}``: comes back as a list;
  a delete (``delete`` true, or a null or missing value) as ``{"row", "cf", "cq", "cv"?, "delete": True}``;
- a list of operations ``{"op": "set" | "delete", "row", "cf", "cq", "cv"?, "value"?}`` (or
  ``{"ops": [...]}``): comes back as the list.

Fields are text (str), bytes, or numbers, which are stored as their decimal text (what the translators
write for them). A ``cv`` is left out when falsy (None, empty, ``0``, ...): the translators read a falsy
``cv`` of a JSON value as no visibility too, so both encodings of a cell give the same destination cell.
Anything else (an empty row, a missing field, a set without a value, a mixed list) is refused by ``dumps``
with a ``ValueError`` or ``TypeError`` naming it.
"""

from __future__ import annotations

from typing import Any

from connector import _native

#: the two bytes every packed value starts with
MAGIC: bytes = _native.PACKED_MAGIC


def is_packed(data: bytes) -> bool:
    """Whether ``data`` starts as a packed value does (JSON never does)."""
    return data[:2] == MAGIC


def pack(obj: Any) -> bytes:
    """The packed bytes of a difference update, a cell or list of cells, or a list of operations (encoded by
    ``connector._native``: a producer's hot path); ``TypeError``/``ValueError`` naming what it cannot hold."""
    return _native.pack_value(obj)


def unpack(data: bytes) -> Any:
    """The canonical object of packed bytes (see the module's docs), decoded by the crate's one decoder, the
    drain's; ``ValueError`` naming what is wrong with bytes that are not a well-formed packed value."""
    return _native.unpack_value(bytes(data))
