"""The destinations of the chaos run, all tables on B fed by the one queue on A:

- the **primary**: the one every drain names (``--dest-table``). The first exists before anything commits,
  so the stream alone keeps it exact. ``new-primary`` replaces it the documented way for a new destination
  (docs/bootstrap-and-cutover.md: The procedure):
  every drain into the old one is stopped, the streams start into the new table, then it is bootstrapped.
  The old one then receives nothing and is no longer checked.
- **registered** ones (``queue destinations add``): every drain exports to them too; each is bootstrapped
  after its registration. At most ``MAX_REGISTERED`` at once (the oldest is unregistered first).

Every destination is written in the default delete mode (tombstones), fully compacted now and then and purged
of its tombstones now and then (``purge-tombstones``). In delete mode a full compaction drops delete markers, and
an export older than a delete that arrives afterwards (a killed producer's outbox, relayed late) shows its cell
again: the compaction hazard (docs/design.md), found here by seed 202 and by a CI's seeded run, which made
tombstones the default.

A destination is checked at quiet points once it is ready: its bootstrap ended with exit status 0 (for the
first primary: from the start)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_REGISTERED = 2


@dataclass
class Dest:
    table: str
    registered: bool
    ready: bool = False        # checked at quiet points
    bootstrapped: bool = False  # a bootstrap of it ended with exit status 0
    method: str = "live"       # its bootstrap's --method
    attempts: int = 0          # bootstrap processes started for it
    retired: bool = False      # no longer fed (an old primary) or unregistered: not checked


class Destinations:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.count = 0
        self.all: list[Dest] = []
        self.primary = self._new(registered=False)
        self.primary.ready = True  # born before the first commit: the stream alone makes it

    def _new(self, registered: bool, method: str = "live") -> Dest:
        d = Dest(f"{self.prefix}_{'r' if registered else 'p'}{self.count}", registered, method=method)
        self.count += 1
        self.all.append(d)
        return d

    def new_primary(self, method: str) -> tuple[Dest, Dest]:
        """(old, new): the old primary is retired, the new one waits for its bootstrap."""
        old = self.primary
        old.retired = True
        self.primary = self._new(registered=False, method=method)
        return old, self.primary

    def new_registered(self, method: str) -> Dest:
        return self._new(registered=True, method=method)

    def registered(self) -> list[Dest]:
        return [d for d in self.all if d.registered and not d.retired]

    def checked(self) -> list[Dest]:
        return [d for d in self.all if d.ready and not d.retired]

    def unbootstrapped(self) -> list[Dest]:
        """Live destinations still waiting for a bootstrap that ends well."""
        return [d for d in self.all if not d.retired and not d.ready]
