"""The write guards' tally carried across the governors of one run.

A host's turn call and a resume each build a new governor whose history starts empty; the
run's earlier calls still count toward ``PROCTOR_WRITE_BUDGET`` and the bulk-write check.
The run's data keeps what the shipped write guards add up (changing calls, distinct paths
written) under :data:`KEY`, updated in the transaction that records each counted call, and a
new governor's history starts its tallies from it: nothing reads the run's calls again.
"""

from __future__ import annotations

from collections.abc import Mapping
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

__all__ = ["KEY", "carried", "seed"]

KEY = "write_tally"
"""The run data key: ``{"changing": <count>, "paths": [<distinct path>, ...]}``."""


def carried(stored: Any, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The tally ``stored`` with the call ``entry`` (``tool``, ``args``, ``outcome``) added,
    as the shipped write guards add it, or ``None`` when the call changes neither count (a
    read, a refusal)."""
    changing, paths = _read(stored)
    count = _changing(changing, entry)
    held = set(paths)
    args = entry.get("args")
    new: list[str] = []
    if _counts(entry) and isinstance(args, Mapping):
        new = [p for p in dict.fromkeys(_written_paths(str(entry.get("tool", "")), args))
               if p not in held]  # fmt: skip
    if count == changing and not new:
        return None
    return {"changing": count, "paths": [*paths, *new]}


def seed(history: RunHistory, data: Mapping[str, Any]) -> None:
    """Start ``history``'s write tallies from what the run's data says its calls made."""
    if KEY not in data:
        return
    changing, paths = _read(data[KEY])

    def written() -> Distinct:
        value = Distinct(PRIOR_SHOWN)
        value.update(paths)
        return value

    history.seed(CHANGING_CALLS, lambda: changing)
    history.seed(WRITTEN_PATHS, written)


def _read(stored: Any) -> tuple[int, list[str]]:
    if not isinstance(stored, Mapping):
        return 0, []
    changing = stored.get("changing")
    paths = stored.get("paths")
    return (
        changing if isinstance(changing, int) else 0,
        [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else [],
    )
