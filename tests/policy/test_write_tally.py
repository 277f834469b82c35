"""The write tally a run's data carries (``proctor.policy.write_tally``) decides as a full
read does: a governor whose history starts from the tally of a run's earlier calls (made by
another governor: a host's turn call, a resume) gets from ``check_write_budget`` and
``check_no_bulk_writes`` the verdict a walk of every call the run made gives, metadata and all.
"""

from __future__ import annotations

import json
import random
from typing import Any

from proctor.policy import GuardContext
from proctor.policy.guards import RunHistory
from proctor.policy.shipped_guards import PRIOR_SHOWN, check_no_bulk_writes, check_write_budget
from proctor.policy.write_tally import PATHS_KEPT, carried, seed

TOOLS = ("fs.write", "fs.edit", "fs.apply_bundle", "fs.delete", "fs.restore", "fs.read")
OUTCOMES = ("ok", "failed", "refused", "cancelled")


def _entry(rng: random.Random, paths: int) -> dict[str, Any]:
    tool = rng.choice(TOOLS)
    if tool == "fs.apply_bundle":
        members = [{"path": f"p{rng.randrange(paths)}.md"} for _ in range(rng.randint(1, 3))]
        args: dict[str, Any] = {"changes": members}
    else:
        args = {"path": f"p{rng.randrange(paths)}.md"}
    return {"tool": tool, "args": args, "outcome": rng.choice(OUTCOMES)}


def _verdicts(history: Any, proposed: dict[str, Any], budget: int) -> list[Any]:
    ctx = GuardContext(
        tool_name=proposed["tool"],
        raw_args=proposed["args"],
        args=proposed["args"],
        reason="",
        directive_id=None,
        run_history=history,
        workspace_relpaths=(),
        write_budget=budget,
    )
    return [check_write_budget(ctx), check_no_bulk_writes(ctx)]


def _carried_through_json(entries: list[dict[str, Any]]) -> Any:
    stored: Any = None
    for entry in entries:
        stored = carried(stored, entry) or stored
        stored = json.loads(json.dumps(stored))  # as the run's data keeps it
    return stored


def test_a_seeded_history_decides_as_a_walk_of_every_call() -> None:
    rng = random.Random(32)
    decided = 0
    for _ in range(300):
        paths = rng.choice((2, 5, 40))
        run = [_entry(rng, paths) for _ in range(rng.randint(0, 60))]
        split = rng.randint(0, len(run))  # the calls an earlier governor made
        history = RunHistory()
        seed(history, {"write_tally": _carried_through_json(run[:split])})
        for entry in run[split:]:
            history.append(entry)
        budget = rng.randint(0, 30)
        for _ in range(5):
            proposed = _entry(rng, paths)
            assert _verdicts(history, proposed, budget) == _verdicts(tuple(run), proposed, budget)
            decided += 1
    assert decided == 1500


def test_a_bulk_write_verdict_after_a_seed_lists_the_first_prior_paths_in_order() -> None:
    earlier = [
        {"tool": "fs.write", "args": {"path": f"f{n:03}.md"}, "outcome": "ok"}
        for n in reversed(range(PRIOR_SHOWN + 5))
    ]
    history = RunHistory()
    seed(history, {"write_tally": _carried_through_json(earlier)})
    budget, bulk = _verdicts(history, {"tool": "fs.write", "args": {"path": "new.md"}}, 10)
    assert budget is not None and budget.metadata == {"count": PRIOR_SHOWN + 5, "budget": 10}
    assert bulk is not None and bulk.metadata["prior_count"] == PRIOR_SHOWN + 5
    assert bulk.metadata["prior_paths"] == [f"f{n:03}.md" for n in range(PRIOR_SHOWN)]


def test_reads_and_refusals_leave_the_tally_unchanged() -> None:
    stored = carried(None, {"tool": "fs.write", "args": {"path": "a.md"}, "outcome": "ok"})
    assert stored == {"changing": 1, "paths": ["a.md"], "unheld": 0, "first": ["a.md"]}
    for entry in (
        {"tool": "fs.read", "args": {"path": "b.md"}, "outcome": "ok"},
        {"tool": "fs.write", "args": {"path": "b.md"}, "outcome": "refused"},
    ):
        assert carried(stored, entry) is None
    again = carried(stored, {"tool": "fs.write", "args": {"path": "a.md"}, "outcome": "failed"})
    assert again == {"changing": 2, "paths": ["a.md"], "unheld": 0, "first": ["a.md"]}


def test_no_tally_in_the_data_starts_from_nothing() -> None:
    history = RunHistory()
    seed(history, {})
    write = {"tool": "fs.write", "args": {"path": "a.md"}}
    assert _verdicts(history, write, 1) == [None, None]


def test_past_the_paths_kept_the_tally_stays_bounded_and_never_allows_more() -> None:
    """Past :data:`PATHS_KEPT` distinct paths the stored tally stops growing; the budget's
    verdict and the sorted first paths stay a full read's, and the bulk-write check warns
    wherever a full read warns (it may warn where a full read would not: a path not kept)."""
    rng = random.Random(7)
    for _ in range(20):
        run = [
            {"tool": "fs.write", "args": {"path": f"p{rng.randrange(400)}.md"}, "outcome": "ok"}
            for _ in range(rng.randint(PATHS_KEPT, 3 * PATHS_KEPT))
        ]
        stored = _carried_through_json(run)
        assert len(stored["paths"]) <= PATHS_KEPT
        assert len(stored["paths"]) + stored["unheld"] >= len({e["args"]["path"] for e in run})
        history = RunHistory()
        seed(history, {"write_tally": stored})
        for _ in range(20):
            proposed = {"tool": "fs.write", "args": {"path": f"p{rng.randrange(400)}.md"}}
            budget, bulk = _verdicts(history, proposed, 10_000)
            full_budget, full_bulk = _verdicts(tuple(run), proposed, 10_000)
            assert budget == full_budget
            if full_bulk is not None:
                assert bulk is not None
                assert bulk.metadata["prior_paths"] == full_bulk.metadata["prior_paths"]
                assert bulk.metadata["prior_count"] >= full_bulk.metadata["prior_count"]
