"""The write guards' tally carried across the governors of one run.

A host's turn call and a resume each build a new governor whose history starts empty; the
run's earlier calls still count toward ``PROCTOR_WRITE_BUDGET`` and the bulk-write check.
The run's data keeps what the shipped write guards add up under :data:`KEY`, updated in the
transaction that settles each counted call, and a new governor's history starts its tallies
from it: nothing reads the run's calls again.

What counts is what a governor's own history counts: a changing call (``CHANGING_TOOLS``)
that was not refused, and the paths a write tool's call that was not refused named. The
paths kept are the first :data:`PATHS_KEPT` distinct ones (so a write costs the same however
many came before); past them a path not kept counts as new (the bulk-write check then warns
where a full read might not, never the other way), and ``first``, the sorted first
``PRIOR_SHOWN`` a verdict lists, stays exact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from proctor.policy.guards import Distinct, RunHistory
from proctor.policy.shipped_guards import (
    CHANGING_CALLS,
    PRIOR_SHOWN,
    WRITTEN_PATHS,
    _changing,
    _counts,
    _written_paths,
)

__all__ = ["KEY", "PATHS_KEPT", "Once", "carried", "seed", "seed_from"]

KEY = "write_tally"
"""The run data key: ``{"changing", "paths", "unheld", "first"}`` (see :func:`carried`)."""

PATHS_KEPT = 100
"""Distinct paths the run's data keeps (twice the default write budget: under the shipped
budget every path written is kept, and decisions are exactly a full read's)."""


def carried(stored: Any, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The tally ``stored`` with the call ``entry`` (``tool``, ``args``, ``outcome``) added,
    or ``None`` when the call changes nothing of it (a read, a refusal, a path written
    before). ``changing``: the changing calls counted; ``paths``: the first distinct paths
    written, as they came; ``unheld``: distinct paths counted past those; ``first``: the
    first :data:`~proctor.policy.shipped_guards.PRIOR_SHOWN` of all in sorted order."""
    changing, paths, unheld, first = _read(stored)
    count = _changing(changing, entry)
    held = set(paths)
    args = entry.get("args")
    new: list[str] = []
    if _counts(entry) and isinstance(args, Mapping):
        named = _written_paths(str(entry.get("tool", "")), args)
        new = [p for p in dict.fromkeys(named) if p not in held]
    if count == changing and not new:
        return None
    kept = [*paths, *new[: max(PATHS_KEPT - len(paths), 0)]]
    shown = Distinct(PRIOR_SHOWN)
    shown.first, shown.values = list(first), set(first)
    shown.update(new)
    return {
        "changing": count,
        "paths": kept,
        "unheld": unheld + len(new) - (len(kept) - len(paths)),
        "first": shown.first,
    }


def seed(history: RunHistory, data: Mapping[str, Any]) -> None:
    """Start ``history``'s write tallies from what the run's data says its calls made."""
    if KEY not in data:
        return
    changing, paths, unheld, first = _read(data[KEY])
    history.seed(CHANGING_CALLS, lambda: changing)
    history.seed(WRITTEN_PATHS, lambda: _written(paths, unheld, first))


def seed_from(history: RunHistory, load: Callable[[], Mapping[str, Any] | None]) -> None:
    """As :func:`seed`, from the run's data ``load()`` answers (``None``: no run) when a
    tally is first asked for, not before (``load`` must answer the data as it was before the
    history's first entry counted: read once, before the governor stores its own)."""

    def stored() -> tuple[int, list[str], int, list[str]]:
        return _read((load() or {}).get(KEY))

    history.seed(CHANGING_CALLS, lambda: stored()[0])
    history.seed(WRITTEN_PATHS, lambda: _written(*stored()[1:]))


class Once:
    """``load()``, asked the first time it is called and kept (a later call answers the first
    answer). Holds nothing but ``load``: a history seeded from it (:func:`seed_from`) makes no
    reference cycle with the governor that owns the history, so each governor is freed as
    soon as it is dropped, without the cyclic collector."""

    __slots__ = ("_done", "_load", "_value")

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load, self._done, self._value = load, False, None

    def __call__(self) -> Any:
        if not self._done:
            value = self._load()
            if not self._done:  # the first answer stands
                self._value, self._done = value, True
        return self._value


def _written(paths: list[str], unheld: int, first: list[str]) -> Distinct:
    value = Distinct(PRIOR_SHOWN)
    value.values = {*paths, *first}
    value.first = sorted(first)[:PRIOR_SHOWN]
    value.unheld = max(len(paths) + unheld - len(value.values), 0)
    return value


def _read(stored: Any) -> tuple[int, list[str], int, list[str]]:
    if not isinstance(stored, Mapping):
        return 0, [], 0, []

    def number(name: str) -> int:
        value = stored.get(name)
        return value if isinstance(value, int) and value >= 0 else 0

    def names(name: str) -> list[str]:
        value = stored.get(name)
        return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []

    return number("changing"), names("paths"), number("unheld"), names("first")
