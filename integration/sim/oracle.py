"""The simulation's oracle: what must hold, checked as the run goes and at its quiescent point.

- **wait**: when ``wait_for_seq`` returned for S, the commit at S is readable on the destination at that
  moment (checked in the waiting thread, before any other process runs): the destination cell of S's row
  shows what S committed or the state of a later commit.
- **tombstone**: a tombstone value is never visible in a scan of the destination.
- **exact**: once every process has finished (or died) and a final relay, requeue and drain found nothing
  left, the destination equals what A's rows imply (each row's value cell is its destination cell; the stray
  rows written into B by the workload are left out: only a repair removes them).
- **no unexpected errors**: the code under test raised nothing but its own errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector.export.tombstones import TOMBSTONE

if TYPE_CHECKING:
    from .workload import World


def check_wait(world: World, seq: int) -> None:
    """Called right after ``wait_for_seq(..., seq)`` returned, in the same turn."""
    from .workload import DEST_TABLE, FAMILY, QUALIFIER, Violation, visible
    commit = next((c for c in world.commits if c.seq == seq), None)
    if commit is None:
        return
    shown = visible(world.peek("B"), DEST_TABLE, commit.row).get((commit.row.encode(), FAMILY, QUALIFIER))
    _no_tombstone(world, {commit.row: shown})
    if shown is not None and (shown[1] >= seq or shown[0] == (commit.value or "").encode()):
        return  # a commit at or after S shows (or what S committed: a commit that changed nothing writes nothing)
    same_row = [c for c in world.commits if c.row == commit.row and c is not commit]
    if shown is None and (commit.value is None
                          or any(c.value is None and (c.seq is None or c.seq > seq) for c in same_row)):
        return  # S, or a later (or unknown) commit of the row, deleted the cell
    what = "nothing" if shown is None else f"{shown[0]!r} at ts {shown[1]}"
    from connector.transactions import queue_watermark

    from .workload import QUEUE
    now = queue_watermark(world.peek("A"), QUEUE)  # read as the wait returned: no other process ran since
    where = (f"it still waits ({now.describe()}): the wait missed it" if not now.reached(seq)
             else "and it waits nowhere (not in an outbox, the queue or the dead letters): the export is lost")
    world.violations.append(Violation(
        "wait", f"wait_for_seq returned for seq {seq} ({commit.row}={commit.value}) but B shows {what}, {where}"))
    world.sched.stop()  # the schedule failed here: what comes after is not part of it


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
