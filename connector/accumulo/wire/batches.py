"""Whole Arrow batches of cell changes for ``BatchWriter.add_cells``: checked, sized against the frame rule
of :mod:`.frames`, and encoded natively into ``update`` frames (:mod:`.native`).

The writer keeps a :class:`CellBatch` until it is flushed: after a reconnect it re-encodes the batch for the
new writer id.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidMutationError
from ..mutation import _checked_visibility
from ..visibility import VisibilityError
from .frames import update_message_limit
from .native import encode_update_frames


class CellBatch:
    """A batch given to ``add_cells``, checked, with its longest binary (the frame rule needs it)."""

    __slots__ = ("cells", "largest")

    def __init__(self, cells: pa.RecordBatch) -> None:
        _check_visibilities(cells)
        self.cells = cells
        self.largest = _largest_binary(cells)

    def frames(self, writer_id: str, max_frame_bytes: int, chunk_bytes: int) -> list[bytes]:
        """The batch's ``update`` frames for ``writer_id``: of about ``chunk_bytes`` (as ``add_mutation``
        sends), a row too large for that with the whole budget of ``max_frame_bytes``. Raises
        ``InvalidMutationError`` for a cell or a row that cannot be sent."""
        limit = update_message_limit(max_frame_bytes, self.largest)
        if limit < 1:
            raise InvalidMutationError(
                f"a cell of {self.largest} bytes cannot fit in one Thrift frame under "
                f"max_frame_bytes={max_frame_bytes} (frame + largest value must fit; see "
                f"connector.accumulo.wire.frames)")
        try:
            return encode_update_frames(writer_id, self.cells, min(chunk_bytes, limit))
        except InvalidMutationError:
            if chunk_bytes >= limit:
                raise
            return encode_update_frames(writer_id, self.cells, limit)


def _check_visibilities(cells: pa.RecordBatch) -> None:
    """Each distinct visibility expression of the batch checked once, as ``Mutation`` checks each cell's."""
    cv = cells.column("cv")
    for expr in pc.unique(cv).to_pylist():
        if not expr:
            continue
        try:
            _checked_visibility(expr)
        except VisibilityError as exc:
            first = pc.index(cv, pa.scalar(expr, cv.type)).as_py()
            row = cells.column("row")[first].as_py()
            raise InvalidMutationError(f"row {row!r}: {exc}") from None


def _largest_binary(cells: pa.RecordBatch) -> int:
    """The longest row, family, qualifier, visibility or value of the batch."""
    largest = 0
    for name in ("row", "cf", "cq", "cv", "value"):
        longest = pc.max(pc.binary_length(cells.column(name))).as_py()
        if longest is not None and longest > largest:
            largest = longest
    return largest
