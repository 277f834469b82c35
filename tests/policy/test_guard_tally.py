"""The write guards read a run's history as a tally the history carries on, so a write costs
the same late in a long run as early: the entries a guard reads at the 500th call are as many
as at the 10th (counted, not timed), and what it decides is what a walk of the whole tuple
decides, whatever order contexts are asked in.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

from proctor.policy import GuardContext
from proctor.policy.guards import RunHistory
from proctor.policy.shipped_guards import PRIOR_SHOWN, check_no_bulk_writes, check_write_budget


class _Counted(Mapping[str, Any]):
    """A history entry that counts how often a guard looks into it."""

    reads = 0

    def __init__(self, **fields: Any) -> None:
        self._fields = fields

    def __getitem__(self, key: str) -> Any:
        _Counted.reads += 1
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


def _write(n: int, outcome: str = "ok") -> _Counted:
    return _Counted(tool="fs.write", args={"path": f"f{n:05}.txt"}, outcome=outcome)


def _reads_per_call(calls: int) -> list[int]:
    """The entries the two write guards read at each of ``calls`` writes of one run."""
    history = RunHistory()
    reads = []
    for n in range(calls):
        ctx = GuardContext("fs.write", {}, {"path": f"f{n:05}.txt"}, "r", None, history, (), 10**6)
        _Counted.reads = 0
        assert check_write_budget(ctx) is None
        verdict = check_no_bulk_writes(ctx)
        reads.append(_Counted.reads)
        assert (verdict is None) is (n == 0)
        history.append(_write(n))
    return reads


def test_a_write_reads_as_many_history_entries_at_the_500th_call_as_at_the_10th() -> None:
    reads = _reads_per_call(501)
    assert reads[500] == reads[10] == reads[11]
    assert reads[10] > 0  # the guards did read the entry made since the last call


def _plain(history: list[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(dict(e) for e in history)


def _entry(rng: random.Random) -> dict[str, Any]:
    tool = rng.choice(["fs.write", "fs.edit", "fs.delete", "fs.read", "fs.apply_bundle"])
    args: dict[str, Any] = {"path": f"p{rng.randrange(40):02}"}
    if tool == "fs.apply_bundle":
        args = {"changes": [{"op": "create", "path": f"p{rng.randrange(40):02}"}]}
    return {"tool": tool, "args": args, "outcome": rng.choice(["ok", "failed", "refused"])}


def test_the_tally_decides_as_the_whole_tuple_does_in_any_order_of_asking() -> None:
    rng = random.Random(32)
    history = RunHistory()
    entries: list[Mapping[str, Any]] = []
    contexts = []
    for _ in range(120):
        entry = _entry(rng)
        args = dict(entry["args"])
        contexts.append(
            (
                GuardContext(entry["tool"], {}, args, "r", None, history, (), 30),
                GuardContext(entry["tool"], {}, args, "r", None, _plain(entries), (), 30),
            )
        )
        history.append(entry)
        entries.append(entry)
    # asked in order, then shuffled (a shorter tally asked after a longer one starts again)
    order = list(range(len(contexts)))
    for pass_order in (order, rng.sample(order, len(order))):
        for i in pass_order:
            lazy, plain = contexts[i]
            for guard in (check_write_budget, check_no_bulk_writes):
                assert guard(lazy) == guard(plain), (i, guard.__name__)


def test_a_bulk_write_verdict_lists_the_first_prior_paths_in_order_and_counts_them_all() -> None:
    history = RunHistory()
    paths = [f"d{n:03}.txt" for n in range(3 * PRIOR_SHOWN)]
    for path in random.Random(7).sample(paths, len(paths)):
        history.append({"tool": "fs.write", "args": {"path": path}, "outcome": "ok"})
    history.append({"tool": "fs.write", "args": {"path": "a.txt"}, "outcome": "refused"})
    ctx = GuardContext("fs.write", {}, {"path": "new.txt"}, "r", None, history)
    verdict = check_no_bulk_writes(ctx)
    assert verdict is not None and verdict.metadata is not None
    assert verdict.metadata["prior_paths"] == sorted(paths)[:PRIOR_SHOWN]
    assert verdict.metadata["prior_count"] == len(paths)
    assert verdict.metadata["new_paths"] == ["new.txt"]
    assert "61 distinct paths" in verdict.message
    few = GuardContext("fs.write", {}, {"path": "z.txt"}, "r", None, (history.snapshot()[0],))
    shown = check_no_bulk_writes(few)
    assert shown is not None and shown.metadata is not None
    assert shown.metadata["prior_paths"] == [history.snapshot()[0]["args"]["path"]]


def test_clearing_the_history_forgets_its_tallies() -> None:
    history = RunHistory()
    for n in range(5):
        history.append({"tool": "fs.write", "args": {"path": f"f{n}"}, "outcome": "ok"})
    ctx = GuardContext("fs.edit", {}, {"path": "f0"}, "r", None, history, (), 5)
    assert check_write_budget(ctx) is not None
    history.clear()
    again = GuardContext("fs.edit", {}, {"path": "f0"}, "r", None, history, (), 5)
    assert check_write_budget(again) is None
    assert check_no_bulk_writes(again) is None
