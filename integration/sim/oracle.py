"""The simulation's oracle: what must hold, checked as the run goes and at its quiescent point.

- **wait**: when ``wait_for_seq`` returned for S, every commit at or below S that a producer knew of when the
  wait began (its ``txs.run`` had returned), and S itself, is readable on the destination at that moment
  (checked in the waiting thread, before any other process runs): for each such row, the destination cell shows
  what the row's latest such commit wrote, or the state of a later commit.
- **tombstone**: a tombstone value is never visible in a scan of the destination.
- **exact**: once every process has finished (or died) and a final relay, requeue and drain found nothing
  left, the destination equals what A's rows imply (each row's value cell is its destination cell; the stray
  rows written into B by the workload are left out: only a repair removes them).
- **stale**: once a drain wrote a tombstone at T for a cell, no scan shows a put of that cell at or below T
  (the tombstone's promise, which a purge must keep: :func:`watch_tombstones`), checked after every write.
- **repair**: no repair changed a correct cell (:func:`watch_repairs` defines it).
- **no unexpected errors**: the code under test raised nothing but its own errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connector.accumulo import Range
from connector.export.tombstones import TOMBSTONE

if TYPE_CHECKING:
    from .workload import Commit, World


def check_wait(world: World, seq: int, known: int | None = None) -> None:
    """Called right after ``wait_for_seq(..., seq)`` returned, in the same turn. ``known``: how many commits the
    producers had learnt the seq of when the wait began (those at or below ``seq`` are checked too)."""
    waited = next((c for c in world.commits if c.seq == seq), None)
    covered: dict[str, Commit] = {}  # per row: its latest commit at or below seq known before the wait
    for c in world.commits:
        before = c is waited or (known is not None and c.known is not None and c.known <= known)
        if c.seq is not None and c.seq <= seq and before and (c.row not in covered
                                                             or (covered[c.row].seq or 0) < c.seq):
            covered[c.row] = c
    for commit in sorted(covered.values(), key=lambda c: c.seq or 0):
        if not _shows(world, commit, seq):
            world.sched.stop()  # the schedule failed here: what comes after is not part of it
            return


def _shows(world: World, commit: Commit, waited: int) -> bool:
    """Whether B shows ``commit`` (or a later state of its row); else a violation is noted."""
    from .workload import DEST_TABLE, FAMILY, QUALIFIER, Violation, visible
    seq = commit.seq
    assert seq is not None
    shown = visible(world.peek("B"), DEST_TABLE, commit.row).get((commit.row.encode(), FAMILY, QUALIFIER))
    _no_tombstone(world, {commit.row: shown})
    if shown is not None and (shown[1] >= seq or shown[0] == (commit.value or "").encode()):
        return True  # a commit at or after it shows (or what it committed: a commit changing nothing writes nothing)
    same_row = [c for c in world.commits if c.row == commit.row and c is not commit]
    if shown is None and (commit.value is None
                          or any(c.value is None and (c.seq is None or c.seq > seq) for c in same_row)):
        return True  # it, or a later (or unknown) commit of the row, deleted the cell
    what = "nothing" if shown is None else f"{shown[0]!r} at ts {shown[1]}"
    from connector.transactions import queue_watermark

    from .workload import QUEUE
    now = queue_watermark(world.peek("A"), QUEUE)  # read as the wait returned: no other process ran since
    where = (f"it still waits ({now.describe()}): the wait missed it" if not now.reached(seq)
             else "and it waits nowhere (not in an outbox, the queue or the dead letters): the export is lost")
    which = f"seq {seq}" if seq == waited else f"seq {seq} (below it, known before the wait)"
    world.violations.append(Violation(
        "wait", f"wait_for_seq returned for seq {waited} but B shows {what} for {which} ({commit.row}="
                f"{commit.value}), {where}"))
    return False


def watch_repairs(world: World) -> None:
    """The **repair** invariant: no repair changed a correct cell.

    Precisely: whenever rows that a ``verify --repair`` process wrote through a writer of the destination table
    are applied (at its flush or close, or sent early by a tablet server), then for every cell (row, f, v) of
    those rows that was *settled* just before, what a scan shows for it just after is the same value (or the
    same absence). A cell is settled when a scan of B shows what A's row implies at that instant (the row's
    value, or nothing for a row without one; a visible tombstone is never right) and no export of the row waits
    anywhere: no outbox cell in the row on A, no queue entry and no dead letter with the row's key. Such a cell
    is right and stays right without the repair: nothing on its way can change it, so a repair that changes it
    made it wrong (a repair's put shown by a compaction that dropped a newer delete, say). A cell with an export
    on its way is not judged: the repair may race that export, and the exact check at the quiescent point
    judges what they leave. A repair's full compactions change no scan's result by themselves; the writes after
    them are what this watches.
    """
    gateway = world.gateway_b
    create, apply_some = gateway.createWriter, gateway.apply_some

    def create_writer(secret: str, table: str, options: object) -> str:
        wid: str = create(secret, table, options)
        me = world.sched.current()
        world.writer_owner[wid] = me.process.name if me is not None else ""
        return wid

    def applied(writer_id: str, rows: int | None = None) -> int:
        from .workload import DEST_TABLE, Violation
        w = gateway.writers.get(writer_id)
        owner = world.writer_owner.get(writer_id, "")
        if w is None or w.table != DEST_TABLE or not owner.startswith("verify") or not w.pending:
            return int(apply_some(writer_id, rows))
        n = len(w.pending) if rows is None else min(rows, len(w.pending))
        touched = sorted({row for row, _, _ in w.pending[:n]})
        before = {row: _settled(world, row) for row in touched}
        done = int(apply_some(writer_id, rows))
        for row, cells in before.items():
            if cells is None:
                continue
            after = _shown_values(world, row)
            for key in sorted(set(cells) | set(after)):
                if cells.get(key) != after.get(key):
                    world.violations.append(Violation(
                        "repair", f"{owner}'s repair changed the correct cell {key[0].decode()} "
                                  f"{key[1].decode()}:{key[2].decode()} from {cells.get(key)!r} to {after.get(key)!r} "
                                  f"(B showed what A's row implies and nothing of the row was on its way)"))
                    world.sched.stop()
        return done

    gateway.createWriter, gateway.apply_some = create_writer, applied


#: the processes whose tombstones are exports' (a drain's, a stream's, the final drains'), not a repair's
DRAINS = ("stream", "drain", "qdrain", "quiesce")


def watch_tombstones(world: World) -> None:
    """The **stale** invariant: a tombstone hides every older put of its cell for good (DESIGN.md), even after
    a purge turned it into a delete and a compaction dropped both. So once a drain wrote a tombstone at T for a
    cell of the destination table, a scan of that cell never shows a put at a timestamp at or below T; checked
    right after every write to the table (any process's: a late drain, a repair), on the rows written. It sees
    at once what the exact check at the quiescent point would miss when a later commit of the row covers it."""
    from .workload import DEST_TABLE, Violation
    cluster = world.b
    write = cluster.write
    hidden: dict[tuple[bytes, bytes, bytes], int] = {}  # cell -> the highest tombstone a drain wrote for it

    def written(name: str, rows: Any) -> None:
        items = list(rows.items() if isinstance(rows, dict) else rows)
        write(name, items)
        if name != DEST_TABLE:
            return
        me = world.sched.current()
        process = me.process.name if me is not None else ""
        if process.rstrip("0123456789") in DRAINS:
            for row, updates in items:
                for cf, cq, _cv, ts, value, delete in updates:
                    if value == TOMBSTONE and not delete and ts is not None:
                        hidden[(row, cf, cq)] = max(ts, hidden.get((row, cf, cq), ts))
        for row in sorted({row for row, _ in items}):
            for c in world.peek("B").scan(DEST_TABLE, Range.exact_row(row)):
                below = hidden.get((c.row, c.cf, c.cq))
                if below is not None and c.ts <= below and c.value != TOMBSTONE:
                    world.violations.append(Violation(
                        "stale", f"B's cell {c.row.decode()} shows {c.value!r} at ts {c.ts}, at or below the "
                                 f"tombstone a drain wrote at {below} (written by {process or 'the world'})"))
                    world.sched.stop()

    cluster.write = written


def _shown_values(world: World, row: bytes) -> dict[tuple[bytes, bytes, bytes], bytes]:
    from .workload import DEST_TABLE
    return {(c.row, c.cf, c.cq): c.value for c in world.peek("B").scan(DEST_TABLE, Range.exact_row(row))}


def _settled(world: World, row: bytes) -> dict[tuple[bytes, bytes, bytes], bytes] | None:
    """B's cells of ``row`` when they are settled (see :func:`watch_repairs`), else None."""
    from connector.queue.layout import DEAD_FAMILY
    from connector.transactions.layout import TxLayout

    from .workload import FAMILY, PRODUCER_TABLE, QUALIFIER, QUEUE
    a = world.peek("A")
    a_cells = list(a.scan(PRODUCER_TABLE, Range.exact_row(row)))
    if any(c.cf == TxLayout().outbox_family for c in a_cells):
        return None  # an export of the row waits in its outbox
    key = QUEUE.serializers()[0].dumps(row.decode())
    layout = QUEUE.layout
    for c in a.scan(QUEUE.table, layout.queue_range()):
        parsed = layout.parse_rows(_binary([c.row])).to_pylist()[0]
        if parsed["key"] == key:
            return None  # ... in the queue
    for c in a.scan(QUEUE.table, layout.dead_letter_range(), columns=[DEAD_FAMILY]):
        parsed = layout.parse_rows(_binary([layout.original_row(c.row)])).to_pylist()[0]
        if parsed["key"] == key:
            return None  # ... in the dead letters
    implied = {(c.row, c.cf, c.cq): c.value for c in a_cells if (c.cf, c.cq) == (FAMILY, QUALIFIER)}
    shown = _shown_values(world, row)
    return shown if shown == implied and TOMBSTONE not in shown.values() else None


def _binary(values: list[bytes]) -> object:
    import pyarrow as pa
    return pa.array(values, pa.binary())


def _no_tombstone(world: World, shown: dict[object, tuple[bytes, int] | None]) -> None:
    from .workload import Violation
    for key, cell in shown.items():
        if cell is not None and cell[0] == TOMBSTONE:
            world.violations.append(Violation("tombstone", f"a scan of B shows a tombstone at {key!r} ts {cell[1]}"))


def check_final(world: World) -> None:
    """At the quiescent point: each destination equals what A's rows imply; no tombstone shows; nothing
    unexpected raised."""
    from .workload import DEST_TABLE, FAMILY, PRODUCER_TABLE, QUALIFIER, SECOND_TABLE, STRAY_PREFIX, Violation, visible
    for process, error in world.unexpected:
        world.violations.append(Violation("error", f"{process} raised {error}"))
    a_rows = {row: value for (row, cf, cq), (value, _ts) in visible(world.peek("A"), PRODUCER_TABLE).items()
              if (cf, cq) == (FAMILY, QUALIFIER)}
    expected = {(row, FAMILY, QUALIFIER): value for row, value in a_rows.items()}
    b = world.peek("B")
    for table in (DEST_TABLE, SECOND_TABLE):
        if table == SECOND_TABLE and not (world.bootstrap_done and b.table_exists(table)):
            continue
        shown = visible(b, table)
        _no_tombstone(world, dict(shown.items()))
        actual = {key: value for key, (value, _ts) in shown.items()
                  if not key[0].startswith(STRAY_PREFIX.encode())}
        for key in sorted(set(expected) | set(actual)):
            if expected.get(key) != actual.get(key):
                ts = shown.get(key, (None, None))[1]
                world.violations.append(Violation(
                    "exact", f"{table}: B's cell {key[0].decode()} shows {actual.get(key)!r}"
                             f"{f' (ts {ts})' if ts is not None else ''} but A's row implies {expected.get(key)!r}"))
