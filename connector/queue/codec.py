"""Exports to queue entries and back: serializers plus the row layout."""

from __future__ import annotations

from typing import Any

from connector.export.core import SequencedExport, TranslationError
from connector.export.tombstones import TOMBSTONE

from .config import QueueConfig
from .errors import MalformedEntryError

#: the tombstone as it shows in a serialized value: raw (bytes, packed) or as a JSON string; the drain's exporter
#: refuses it whatever the serializer (connector.export.accumulo_exporter), this is the cheap early refusal
_TOMBSTONE_TEXT = b"accumulo-export:tombstone"
_TOMBSTONE_FORMS = (TOMBSTONE, TOMBSTONE.decode().replace("\x00", "\\u0000").encode())


class EntryCodec:
    """Encodes ``(key, value, seq)`` as an entry row and value bytes, and decodes them back."""

    __slots__ = ("layout", "key_serializer", "value_serializer")

    def __init__(self, config: QueueConfig) -> None:
        self.layout = config.layout
        self.key_serializer, self.value_serializer = config.serializers()

    def encode(self, key: Any, value: Any, seq: int) -> tuple[bytes, bytes]:
        """The entry row and the value bytes for one export."""
        key_bytes = self.key_serializer.dumps(key)
        value_bytes = self.value_serializer.dumps(value)
        if _TOMBSTONE_TEXT in value_bytes and any(form in value_bytes for form in _TOMBSTONE_FORMS):
            raise TranslationError(f"the export of key {key!r} (seq {seq}) holds the tombstone's value "
                                   "(connector.export.TOMBSTONE), which a destination hides from every reader and "
                                   "a purge deletes; a producer may not write it")
        return self.layout.entry_row(key_bytes, seq), value_bytes

    def decode(self, row: bytes, value: bytes) -> SequencedExport:
        """The export an entry holds; raises ``MalformedEntryError`` with the reason when it cannot be read."""
        parsed = self.layout.parse_row(row)
        return self.decode_parts(parsed.key_bytes, value, parsed.seq, row)

    def decode_parts(self, key_bytes: bytes, value: bytes, seq: int, row: bytes = b"") -> SequencedExport:
        """The export of an entry whose row was parsed already (``key_bytes``, ``seq``)."""
        # a deserializer may raise anything on bad bytes; name it in the reason instead of guessing types
        try:
            key = self.key_serializer.loads(key_bytes)
        except Exception as exc:  # noqa: BLE001
            raise MalformedEntryError(row, f"undecodable key: {type(exc).__name__}: {exc}") from exc
        try:
            obj = self.value_serializer.loads(value)
        except Exception as exc:  # noqa: BLE001
            raise MalformedEntryError(row, f"undecodable value: {type(exc).__name__}: {exc}") from exc
        return SequencedExport(key, obj, seq)
