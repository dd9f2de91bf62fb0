"""The user's code in a combine: the combiner (current value + queued deltas -> new value) and the update
observer (a batch of changes -> exports). Both are found by name so that Spark executors can load them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from connector.plugins import callable_from_name

#: ``combiner(key, current, deltas) -> new value``; ``current`` is None for a new key; returning None
#: deletes the key
Combiner = Callable[[Any, Any, list[Any]], Any]


@dataclass(frozen=True, eq=False)
class Change:
    """One key's value changed by a combine: ``old`` and ``new`` are None when absent; ``seq`` is the
    change's sequence number (rising per key), which its exports carry."""

    key: Any
    old: Any
    new: Any
    seq: int


#: ``observer(changes) -> exports``: each export is ``(change, export_key, export_value)``, for a change of
#: this batch; it is recorded in that change's row (the outbox) and reaches the export queue with the change's seq.
#: It may see the same change again (a combine whose condition was lost is retried; a failing batch is observed
#: change by change to find the key to blame), so it should only compute exports from the changes.
Observer = Callable[[Sequence[Change]], Iterable[tuple[Change, Any, Any]]]


def sum_combiner(key: Any, current: Any, deltas: list[Any]) -> Any:
    """Adds the deltas to the current value (0 when absent); a total of 0 deletes the key (a word no longer
    counted disappears, as in the recipe's word count)."""
    total = 0 if current is None else current
    for delta in deltas:
        if isinstance(delta, bool) or not isinstance(delta, int | float):
            raise TypeError(f"sum combiner: delta {delta!r} is not a number")
        total += delta
    return None if total == 0 else total


def changes_observer(changes: Sequence[Change]) -> Iterable[tuple[Change, Any, Any]]:
    """Exports every change under its own key as ``{"old": old, "new": new}``."""
    return [(c, c.key, {"old": c.old, "new": c.new}) for c in changes]


COMBINERS: dict[str, Combiner] = {"sum": sum_combiner}
OBSERVERS: dict[str, Observer] = {"changes": changes_observer}


def combiner_from_name(name: str) -> Combiner:
    """``sum`` or the callable at ``package.module:attribute``."""
    return callable_from_name("combiner", name, COMBINERS)  # type: ignore[no-any-return]


def observer_from_name(name: str) -> Observer:
    """``changes`` or the callable at ``package.module:attribute``."""
    return callable_from_name("observer", name, OBSERVERS)  # type: ignore[no-any-return]
