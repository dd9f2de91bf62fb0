"""An exporter written with ``export`` only, as a full :class:`~connector.export.core.Exporter`.

The drain hands every exporter whole Arrow batches (``export_batch``). A user's exporter that takes lists
of ``SequencedExport`` gets them through this adapter: each export deserialized in Python (the slow path),
the batch given to ``export``, and when that names exports it cannot translate, the rest given again
without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from connector.serializers import DEFAULT_SERIALIZER, serializer_from_name

from .core import BatchTranslationError, EntryFailure, Exporter, SequencedExport


class PerExportExporter:
    """``export_batch`` over an object with ``export(list of SequencedExport)``."""

    def __init__(self, exporter: Any) -> None:
        if not callable(getattr(exporter, "export", None)):
            raise TypeError(f"exporter must have an export(batch) method, got {type(exporter).__name__}")
        self.exporter = exporter

    def __repr__(self) -> str:
        return f"PerExportExporter({self.exporter!r})"

    def export(self, exports: Sequence[SequencedExport]) -> None:
        self.exporter.export(exports)

    def export_batch(self, exports: pa.RecordBatch, *, key_serializer: str = DEFAULT_SERIALIZER,
                     value_serializer: str = DEFAULT_SERIALIZER) -> list[EntryFailure]:
        """Deserialize each export, ``export`` the batch; exports that do not deserialize, or that ``export``
        names as untranslatable, are returned as failures and the rest is exported without them."""
        keys_serde, values_serde = serializer_from_name(key_serializer), serializer_from_name(value_serializer)
        decoded: list[SequencedExport] = []
        index: list[int] = []
        failures: list[EntryFailure] = []
        for i, (key, value, seq) in enumerate(zip(*(c.to_pylist() for c in exports.columns), strict=True)):
            # a deserializer may raise anything on bad bytes: name it in the reason instead of guessing types
            try:
                key_obj = keys_serde.loads(key)
            except Exception as exc:  # noqa: BLE001
                failures.append(EntryFailure(i, "undecodable", f"undecodable key: {type(exc).__name__}: {exc}"))
                continue
            try:
                value_obj = values_serde.loads(value)
            except Exception as exc:  # noqa: BLE001
                failures.append(EntryFailure(i, "undecodable", f"undecodable value: {type(exc).__name__}: {exc}"))
                continue
            decoded.append(SequencedExport(key_obj, value_obj, seq))
            index.append(i)
        if decoded:
            try:
                self.exporter.export(decoded)
            except BatchTranslationError as exc:
                failures += [EntryFailure(index[j], "translation", reason) for j, reason in exc.failures.items()]
                rest = [e for j, e in enumerate(decoded) if j not in exc.failures]
                if rest:
                    self.exporter.export(rest)
        return sorted(failures)


def batch_exporter(exporter: Any) -> Exporter:
    """``exporter`` itself when it is a full :class:`Exporter` (it has ``export_batch``), else wrapped in
    :class:`PerExportExporter`."""
    if isinstance(exporter, Exporter):
        return exporter
    return PerExportExporter(exporter)
