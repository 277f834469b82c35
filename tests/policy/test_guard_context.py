"""What a guard sees of the run's history: the same tuple, however the governor keeps it.

The governor appends each call to a :class:`RunHistory` and hands the context the history
itself; a guard reading ``run_history`` gets a tuple of exactly the calls made before its
call (never one appended after), equal to the tuple a caller could have passed.
"""

from __future__ import annotations

import pytest

from proctor.policy import GuardContext
from proctor.policy.guards import RunHistory
from proctor.policy.shipped_guards import check_no_bulk_writes, check_write_budget


def _entry(n: int, tool: str = "fs.write") -> dict[str, object]:
    return {"tool": tool, "args": {"path": f"f{n}.txt"}, "outcome": "ok"}


def test_a_context_shows_the_calls_made_before_it_as_a_tuple() -> None:
    history = RunHistory()
    history.append(_entry(0))
    history.append(_entry(1))
    ctx = GuardContext("fs.write", {}, {"path": "x"}, "r", None, history)
    history.append(_entry(2))  # the call being admitted, appended once it ran
    seen = ctx.run_history
    assert isinstance(seen, tuple)
    assert seen == (_entry(0), _entry(1))
    assert ctx.run_history is seen  # built once
    plain = GuardContext("fs.write", {}, {"path": "x"}, "r", None, (_entry(0), _entry(1)))
    assert ctx == plain and repr(ctx) == repr(plain)
    later = GuardContext("fs.write", {}, {"path": "x"}, "r", None, history)
    assert later.run_history == (_entry(0), _entry(1), _entry(2))
    assert ctx.run_history == (_entry(0), _entry(1))  # an earlier context is unchanged


def test_shipped_history_guards_decide_the_same_from_either_form() -> None:
    history = RunHistory()
    for n in range(3):
        history.append(_entry(n))
    entries = tuple(_entry(n) for n in range(3))
    for guard in (check_no_bulk_writes, check_write_budget):
        lazy = GuardContext("fs.write", {}, {"path": "new.txt"}, "r", None, history, (), 3)
        plain = GuardContext("fs.write", {}, {"path": "new.txt"}, "r", None, entries, (), 3)
        assert guard(lazy) == guard(plain) is not None


def test_a_context_is_immutable() -> None:
    ctx = GuardContext("echo", {}, {}, "", None, ())
    with pytest.raises(AttributeError):
        ctx.tool_name = "fs.write"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del ctx.reason
    with pytest.raises(TypeError):
        hash(ctx)
