"""Bulk loads of sorted RFiles that keep every cell's timestamp (this project's gateway only).

Large snapshots go into Accumulo faster as files than as mutations: the gateway writes sorted RFiles with
Accumulo's own RFile writer into a staging directory on the destination cluster's file system, then loads them
with ``importDirectory(dir).to(table).tableTime(false).load()``, which keeps the timestamps the files carry
(``tableTime(true)`` would stamp every key with the tablet's time). The gateway holds the cluster's identity and
its Hadoop configuration, so this side needs neither Hadoop nor Kerberos::

    with conn.bulk_import("dest") as bulk:
        with bulk.file("f0") as f:            # one RFile; cells in Accumulo's Key order
            f.add_cells(sort_cells(batch))      # the same Arrow batches as BatchWriter.add_cells
        bulk.load()                           # every cell keeps its timestamp

A file's cells travel as the ``update`` frames a ``BatchWriter`` sends (:class:`.wire.batches.CellBatch`; the
file writer's id is just another writer id). The gateway sorts each frame's cells by Key (row, family,
qualifier, visibility ascending, timestamp descending, a delete before a put at the same timestamp) and
appends them; across frames keys must keep rising, so send each file's cells sorted (:func:`sort_cells`), batch
after batch. A key lower than one already written, or a cell without a timestamp, fails the file: the gateway
deletes it and the next :meth:`BulkFile.flush` or :meth:`BulkFile.close` raises ``MutationsRejectedError``
naming the key. An exact duplicate of the key just written is dropped.

A file counts only once closed (:meth:`BulkFile.close`); :meth:`BulkImport.load` refuses while a file of the
import is still open on the gateway. Writing a file again under the same name replaces it (the way to recover
from a lost connection while writing it). :meth:`BulkImport.load` again after it succeeded loads nothing:
Accumulo moved the files into the table. :meth:`BulkImport.files_left` tells a client that resumes (with
``Connection.bulk_import(table, bulk_id=...)``) whether the import happened: 0 once it did; a staging directory
the gateway does not have raises ``BulkImportNotFoundError``, which says nothing about whether it was loaded.

Against an upstream accumulo-proxy, which lacks these calls, every entry point raises :class:`AccumuloError`
saying the bulk path needs this project's gateway. The gateway's side, the staging directory
(``gateway.bulk.dir``) and what a production site sets: ``integration/gateway/README.md``, "Bulk imports".
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ._idl import proxy
from .errors import AccumuloError, ConnectionLostError, MutationsRejectedError, translate
from .extensions import BULK_RFILE, is_unknown_method
from .session import Session
from .transport import close_client, is_transient, send_frame
from .wire.batches import CellBatch
from .wire.frames import check_max_frame_bytes, check_writer_id

__all__ = ["BulkFile", "BulkImport", "KEY_ORDER", "sort_cells"]

log = logging.getLogger(__name__)

#: Accumulo's Key order as pyarrow sort keys over an updates batch: row, family, qualifier, visibility
#: ascending (bytewise), timestamp descending, a delete before a put at the same timestamp
KEY_ORDER = [("row", "ascending"), ("cf", "ascending"), ("cq", "ascending"), ("cv", "ascending"),
             ("ts", "descending"), ("delete", "descending")]


def _needs_our_gateway(conn: Session, exc: BaseException) -> AccumuloError:
    return AccumuloError(
        f"bulk imports need this project's gateway (integration/gateway): the gateway at {conn.address()} "
        f"does not have the {BULK_RFILE!r} calls (an upstream accumulo-proxy answers them with an unknown-method "
        f"error: {exc})")


def sort_cells(cells: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """An updates batch (``connector.accumulo.UPDATE_SCHEMA``: row, cf, cq, cv, ts, value, delete) in Accumulo's Key
    order (:data:`KEY_ORDER`), exact duplicate keys removed (the first one kept), as one batch. A batch
    without the ``delete`` column gets one (a null value is a delete, as ``BatchWriter.add_cells`` reads it).
    Cells without a timestamp sort last; a bulk file refuses them. A batch already in order with no duplicate
    comes back as it is, after one vectorized pass over it."""
    table = pa.Table.from_batches([cells]) if isinstance(cells, pa.RecordBatch) else cells
    if "delete" not in table.column_names:
        table = table.append_column("delete", pc.is_null(table.column("value")))
    table = table.combine_chunks()
    if table.num_rows > 1 and not _rising(table):
        table = table.take(pc.sort_indices(table, sort_keys=KEY_ORDER)).combine_chunks()  # nulls last
        keep = pa.concat_arrays([pa.array([True]), pc.invert(_same_as_previous(table))])
        table = table.filter(keep).combine_chunks()
    batches = table.to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def _pairs(table: pa.Table, name: str) -> tuple[pa.Array, pa.Array]:
    """Each cell's ``name`` (from the second on) and its predecessor's."""
    column = table.column(name).chunk(0)
    return column.slice(1), column.slice(0, len(column) - 1)


def _same_as_previous(table: pa.Table) -> pa.Array:
    """For each cell from the second on: whether its key equals the previous cell's (nulls never equal)."""
    same = None
    for name, _ in KEY_ORDER:
        after, before = _pairs(table, name)
        equal = pc.fill_null(pc.equal(after, before), False)
        same = equal if same is None else pc.and_(same, equal)
    return same


def _rising(table: pa.Table) -> bool:
    """Whether every key is strictly above the one before it in Key order (nulls: not)."""
    above = None  # from the last key part to the first: above_i = part_i above or (part_i equal and above_i+1)
    for name, order in reversed(KEY_ORDER):
        after, before = _pairs(table, name)
        higher = pc.greater(after, before) if order == "ascending" else pc.less(after, before)
        higher = pc.fill_null(higher, False)
        above = higher if above is None else pc.or_(higher, pc.and_(pc.fill_null(pc.equal(after, before), False),
                                                                    above))
    return bool(pc.all(above).as_py())


class BulkImport:
    """A bulk import into ``table``: a staging directory on the destination cluster that RFiles go into
    (:meth:`file`) until :meth:`load` hands them to Accumulo. ``bulk_id`` resumes one created before (by this
    process or another; any gateway of the cluster with the same ``gateway.bulk.dir`` serves it).

    As a context manager it removes the staging directory on leaving (after :meth:`load` it is empty), except
    when :meth:`load` itself failed: then the directory is kept for a retry (the warning names the bulk id)."""

    def __init__(self, connection: Session, table: str, *, bulk_id: str | None = None) -> None:
        self.connection = connection
        self.table = table
        self._load_failed = False
        if bulk_id is None:  # not retried: a lost reply would leave a second, orphaned directory behind
            bulk_id = str(self._call("createBulkImport", table, retry=False))
        #: the staging directory's id (what ``Connection.bulk_import(table, bulk_id=...)`` resumes)
        self.bulk_id = bulk_id

    def __repr__(self) -> str:
        return f"BulkImport(table={self.table!r}, bulk_id={self.bulk_id!r})"

    def _call(self, method: str, *args: Any, retry: bool = True) -> Any:
        try:
            return self.connection.call(method, *args, retry=retry)
        except AccumuloError as exc:
            if is_unknown_method(exc):
                raise _needs_our_gateway(self.connection, exc) from exc
            raise

    def file(self, name: str, **options: Any) -> BulkFile:
        """A writer of RFile ``name`` (letters, digits, ``_``, ``-``) of this import; see :class:`BulkFile`.
        A file of that name written before, or still open, is replaced once this one is closed."""
        return BulkFile(self, name, **options)

    def load(self) -> None:
        """Load the closed files into the table, each cell at the timestamp its file gives it; returns once
        Accumulo has loaded them. Harmless to repeat: a load after a successful one finds nothing to load."""
        try:
            self._call("importBulk", self.bulk_id)
        except BaseException:
            self._load_failed = True
            raise
        self._load_failed = False

    def files_left(self) -> int:
        """Closed files waiting to be loaded: 0 once :meth:`load` succeeded. ``BulkImportNotFoundError`` if the
        gateway has no staging directory of this id (deleted, or made by a gateway with another
        ``gateway.bulk.dir``); any other ``AccumuloError`` says nothing about the import."""
        return int(self._call("bulkFilesLeft", self.bulk_id))

    def delete(self) -> None:
        """Remove the staging directory and whatever is in it (files not loaded are lost; open file writers of
        it are discarded). Harmless to repeat."""
        self._call("deleteBulkImport", self.bulk_id)

    def __enter__(self) -> BulkImport:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._load_failed:
            log.warning("bulk import %s into %s: load failed; its staging directory is kept: resume with "
                        "bulk_import(%r, bulk_id=%r) (files_left() says whether it was loaded)", self.bulk_id,
                        self.table, self.table, self.bulk_id)
            return
        try:
            self.delete()
        except Exception as cleanup:
            if exc_type is None:
                raise
            log.warning("bulk import %s: could not remove its staging directory: %s", self.bulk_id, cleanup)


class BulkFile:
    """One RFile of a :class:`BulkImport`, written from Arrow batches of cell changes on a socket of its own.

    :meth:`add_cells` takes the batches ``BatchWriter.add_cells`` takes (``connector.accumulo.UPDATE_SCHEMA``), each
    sorted by Key (:func:`sort_cells`) and each after the one before; every cell needs a timestamp. They are
    sent as one-way ``update`` frames of about ``chunk_bytes``; every ``flush_bytes`` sent, and at
    :meth:`flush`, the gateway reports whether the file failed (``MutationsRejectedError`` naming the key; the
    file is then deleted and this writer refuses more). :meth:`close` completes the file: only then does it count
    for :meth:`BulkImport.load`.

    Nothing is resent after a lost connection (the gateway may hold part of a frame): ``ConnectionLostError``
    says to write the file again, which replaces it. As a context manager it closes on leaving, or calls
    :meth:`abort` if the block raised.
    """

    def __init__(self, bulk: BulkImport, name: str, *, chunk_bytes: int = 4 << 20, flush_bytes: int = 64 << 20,
                 max_frame_bytes: int | None = None) -> None:
        if chunk_bytes <= 0 or flush_bytes < chunk_bytes:
            raise ValueError("need 0 < chunk_bytes <= flush_bytes")
        self.bulk = bulk
        self.name = name
        self.connection = bulk.connection
        self.max_frame_bytes = check_max_frame_bytes(
            self.connection.max_frame_bytes if max_frame_bytes is None else max_frame_bytes)
        self.chunk_bytes = chunk_bytes
        self.flush_bytes = flush_bytes
        #: cells sent by add_cells (duplicates the gateway dropped included)
        self.cells_added = 0
        self._unflushed = 0
        self._failed: str | None = None
        self._closed = False
        self._client: Any = None
        self.writer_id = self.connection.retry_policy().run(self._open, lambda _exc: None,
                                                            f"createBulkFileWriter {name}")

    def __repr__(self) -> str:
        return f"BulkFile({self.name!r}, bulk_id={self.bulk.bulk_id!r})"

    def _open(self) -> str:
        close_client(self._client)
        self._client = None
        client = self.connection.new_client()
        try:
            writer_id = client.createBulkFileWriter(self.connection.shared_secret, self.bulk.bulk_id, self.name)
        except Exception as exc:
            close_client(client)
            if is_transient(exc):
                raise
            if is_unknown_method(exc):
                raise _needs_our_gateway(self.connection, exc) from exc
            raise translate(exc) from exc
        check_writer_id(writer_id)
        self._client = client
        return str(writer_id)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        if self._failed is not None:
            raise MutationsRejectedError(self._failed)

    def _lost(self, exc: BaseException, what: str) -> ConnectionLostError:
        self._failed = (f"bulk file {self.name!r} of bulk import {self.bulk.bulk_id}: the connection was lost "
                        f"while {what} ({exc}); write the file again (bulk.file({self.name!r}) replaces it)")
        return ConnectionLostError(self._failed)

    def add_cells(self, cells: pa.RecordBatch) -> None:
        """Send a batch of cell changes, sorted by Key, each key above every key sent before (the gateway
        checks). ``InvalidMutationError`` (nothing sent) for a cell that cannot be sent at all (bad visibility,
        empty row, a put without a value, a row larger than a frame)."""
        self._check_open()
        if cells.num_rows == 0:
            return
        frames = CellBatch(cells).frames(self.writer_id, self.max_frame_bytes, self.chunk_bytes)
        try:
            for frame in frames:
                send_frame(self._client, frame)
        except Exception as exc:
            if is_transient(exc):
                raise self._lost(exc, "sending cells") from exc
            raise
        self.cells_added += cells.num_rows
        self._unflushed += sum(map(len, frames))
        if self._unflushed >= self.flush_bytes:
            self.flush()

    def _writer_call(self, method: str) -> None:
        try:
            getattr(self._client, method)(self.writer_id)
        except proxy.MutationsRejectedException as exc:
            self._failed = exc.msg or "bulk file failed"
            raise MutationsRejectedError(f"table {self.bulk.table}: {self._failed}") from exc
        except proxy.UnknownWriter as exc:
            self._failed = (f"bulk file {self.name!r}: the gateway no longer has its writer (idle longer than "
                            f"gateway.idle.timeout.ms, replaced by another writer of the name, its bulk import "
                            f"deleted, or the gateway restarted): write the file again ({exc.msg})")
            raise AccumuloError(self._failed) from exc
        except Exception as exc:
            if is_transient(exc):
                raise self._lost(exc, method) from exc
            raise translate(exc) from exc

    def flush(self) -> None:
        """Wait until the gateway has appended everything sent, and raise ``MutationsRejectedError`` if it
        failed the file (a key out of order, a cell without a timestamp: the message names it)."""
        self._check_open()
        self._writer_call("flush")
        self._unflushed = 0

    def close(self) -> None:
        """Complete the file; from then on it counts for :meth:`BulkImport.load`. ``MutationsRejectedError``
        if the gateway failed it (then nothing of it is loaded). A file without cells is not kept."""
        if self._closed:
            return
        try:
            self._check_open()
            self._writer_call("closeWriter")
        finally:
            self._closed = True
            close_client(self._client)

    def abort(self) -> None:
        """Give the file up: whatever of it was written is discarded, never loaded (a file of the name completed
        before stays). Never raises for a dead connection; safe after ``close()``."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._failed is None:
                # the gateway discards an open file writer that a new one of the same name replaces, and keeps
                # no empty file: so replace it with an empty one and close that
                replacement = self._client.createBulkFileWriter(self.connection.shared_secret,
                                                                self.bulk.bulk_id, self.name)
                self._client.closeWriter(replacement)
            else:  # the gateway deleted the file already; this only frees the writer (it repeats the failure)
                with contextlib.suppress(proxy.MutationsRejectedException, proxy.UnknownWriter):
                    self._client.closeWriter(self.writer_id)
        except Exception as exc:  # noqa: BLE001 - the gateway discards an idle file writer anyway
            log.debug("%r: abort could not discard the file on the gateway (%s)", self, exc)
        finally:
            close_client(self._client)

    def __enter__(self) -> BulkFile:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close() if exc_type is None else self.abort()
