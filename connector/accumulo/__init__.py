"""A Python 3 client for Apache Accumulo through a Thrift gateway speaking the Accumulo Proxy 2.x interface.

Shaped like pyaccumulo/happybase::

    with Connection("127.0.0.1", 42424) as conn:          # secret from ACCUMULO_GATEWAY_SECRET(_FILE)
        conn.create_table("t", exist_ok=True)
        with conn.batch_writer("t") as writer:
            writer.add_mutation(Mutation("row1").put("cf", "cq", b"value", timestamp=7))
        for cell in conn.scan("t", Range.prefix("row")):
            print(cell.row, cell.value)
"""

from .bulk import BulkFile, BulkImport, sort_cells
from .cells import Cell, IteratorSetting, Key, Range
from .conditional import Condition, ConditionalMutation, ConditionalWriter
from .connection import DEFAULT_PORT, Connection
from .errors import (
    AccumuloError,
    AccumuloSecurityError,
    AccumuloServerError,
    BulkImportNotFoundError,
    ConnectionLostError,
    InvalidMutationError,
    MutationsRejectedError,
    SendDeadlinePassedError,
    TableExistsError,
    TableNotFoundError,
    TimedOutError,
    TlsError,
    UnknownScannerError,
    UnknownWriterError,
)
from .mutation import ColumnUpdate, Mutation
from .secret import SECRET_ENV, SECRET_FILE_ENV, resolve_secret
from .tls import TlsOptions
from .transport import RetryPolicy
from .wire.frames import DEFAULT_MAX_FRAME_BYTES
from .wire.native import CELLS_SCHEMA, UPDATE_SCHEMA
from .writer import BatchWriter, send_deadline

__all__ = [
    "AccumuloError", "AccumuloSecurityError", "AccumuloServerError", "BatchWriter", "BulkFile", "BulkImport",
    "BulkImportNotFoundError", "CELLS_SCHEMA", "Cell", "ColumnUpdate", "Condition", "ConditionalMutation",
    "ConditionalWriter", "Connection",
    "ConnectionLostError", "DEFAULT_MAX_FRAME_BYTES", "DEFAULT_PORT", "InvalidMutationError", "IteratorSetting", "Key",
    "Mutation", "MutationsRejectedError", "Range", "RetryPolicy", "SECRET_ENV", "SECRET_FILE_ENV",
    "SendDeadlinePassedError", "TableExistsError",
    "TableNotFoundError", "TimedOutError", "TlsError", "TlsOptions", "UPDATE_SCHEMA", "UnknownScannerError",
    "UnknownWriterError", "resolve_secret", "send_deadline", "sort_cells",
]
