"""Isolated scans that survive a lost connection without ever handing out half a row.

With ``isolated=True`` the gateway reads each row whole at one version (Accumulo's ``enableIsolation()``), but
a scan that resumes on a fresh scanner after a lost connection reads the rest of a row at the version of *that*
moment: resuming mid-row could mix two versions of one row. So an isolated scan holds back the last row of
each ``nextK`` page until a later page (or the end of the scan) shows that row is complete, hands out only
complete rows, and resumes at the first row after the last complete one (:func:`resume_range`), dropping the
held-back cells (they are read again, whole, by the new scanner).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from .cells import Cell, Key, Range

P = TypeVar("P")  # a page: a list of cells or a cells batch


def resume_range(rng: Range, last: Key) -> Range:
    """The rest of ``rng`` from the row after ``last``'s row (all of whose cells were handed out)."""
    return Range(Key(last.row + b"\x00"), True, rng.stop, rng.stop_inclusive)


def _split_cells(cells: list[Cell]) -> int:
    """Where the last row of a non-empty list of cells starts."""
    last = cells[-1].row
    i = len(cells) - 1
    while i > 0 and cells[i - 1].row == last:
        i -= 1
    return i


def _split_batch(batch: pa.RecordBatch) -> int:
    rows = batch.column("row")
    return pc.index(rows, rows[len(rows) - 1]).as_py()  # rows are sorted: the first one equal to the last


def whole_rows(fetch: Callable[[Any, str, int], tuple[P, bool]]) -> Callable[[Any, str, int], tuple[P, bool]]:
    """``fetch`` (one ``nextK`` page of a scanner: a list of cells or a cells batch, and ``more``) made to return
    only complete rows: each page's last row is held back and put in front of the next page of the same scanner;
    the page after which nothing is left returns it. A page of a new scanner (a resumed scan) drops what was held
    back."""
    held: list[Any] = [None, None]  # the scanner id, its held-back cells

    def fetch_rows(client: Any, scanner_id: str, k: int) -> tuple[P, bool]:
        page: Any
        page, more = fetch(client, scanner_id, k)
        if held[0] != scanner_id:
            held[:] = [scanner_id, None]
        if held[1] is not None:
            page = held[1] + page if isinstance(page, list) else pa.concat_batches([held[1], page])
            held[1] = None
        n = len(page) if isinstance(page, list) else page.num_rows
        if more and n:
            cut = _split_cells(page) if isinstance(page, list) else _split_batch(page)
            held[1] = page[cut:] if isinstance(page, list) else page.slice(cut)
            page = page[:cut] if isinstance(page, list) else page.slice(0, cut)
        return page, more

    return fetch_rows
