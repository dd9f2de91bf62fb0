"""Exporting: replay ``SequencedExport`` batches into Accumulo at timestamp = sequence number."""

from .accumulo_exporter import (
    AccumuloExporter,
    DestinationTableMissingError,
    ExportRejectedError,
    prepare_destination_table,
)
from .adapter import PerExportExporter, batch_exporter
from .cell_rows import cell_rows
from .core import (
    MAX_SEQ,
    BatchTranslationError,
    CellChange,
    CountsCells,
    EntryFailure,
    Exporter,
    SequencedExport,
    TranslationError,
    Translator,
    current_seq,
)
from .difference import DifferenceUpdate, difference
from .replicator import replicator
from .tombstones import TOMBSTONE, DeleteMode, DestinationModeError, checked_mode, prepare_destination, recorded_mode
from .translators import translator_from_name

__all__ = [
    "AccumuloExporter", "BatchTranslationError", "CellChange", "CountsCells", "DeleteMode", "DestinationModeError",
    "DestinationTableMissingError", "DifferenceUpdate", "EntryFailure", "ExportRejectedError", "Exporter", "MAX_SEQ",
    "PerExportExporter", "SequencedExport", "TOMBSTONE", "TranslationError", "Translator", "batch_exporter",
    "cell_rows", "checked_mode", "current_seq", "difference", "prepare_destination", "prepare_destination_table",
    "recorded_mode", "replicator", "translator_from_name",
]
