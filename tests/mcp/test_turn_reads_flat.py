"""The turn tools read what they answer about, not the whole run: ``turn_read`` of one call and
``call_cancel`` of a settled one read that call by its key, so their cost is the same when the
turn holds 10 calls and when it holds 400, and ``turn_status`` lists the turn's calls from its
own step's rows, so the calls of the steps before the turn cost its listing nothing (SQLite's
virtual-machine steps counted on a real store, never timed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ProctorError
from proctor.mcp.catalog import Catalog
from proctor.mcp.shared import ServerConfig
from proctor.mcp.turns import TurnTools
from proctor.runtime.engine.session import Session
from tests.runtime.driver_support import close_sessions, make_skill, make_workspace, session

__all__ = ["close_sessions"]

AGENT = """\
      - id: turn
        agent:
          instructions: Echo many times.
          calls: {tools: [echo]}
          output: {type: object}
"""


def _skill(before: int) -> str:
    """``before`` echo steps (each call in its own step), then the agent turn a host works."""
    lines = ["minimum_proctor: 0.1.0", "methods:", "  main:", "    steps:"]
    for i in range(before):
        lines += [f"      - id: s{i}", "        tool: echo", f"        inputs: {{text: s{i}}}"]
    return "\n".join(lines) + "\n" + AGENT


def _vm_steps(s: Session, work: Callable[[], Any]) -> tuple[int, Any]:
    """SQLite virtual-machine steps ``work`` costs on the session's store (each row visited
    adds some; a statement's own overhead is constant), and what it returned."""
    store: Any = s.store
    seen = [0]

    def tick() -> int:
        seen[0] += 1
        return 0

    store.flush()  # call records waiting for a commit are written first, not counted
    store._conn.set_progress_handler(tick, 1)
    try:
        got = work()
    finally:
        store._conn.set_progress_handler(None, 0)
    return seen[0], got


def _paused(s: Session, before: int) -> tuple[TurnTools, str]:
    """A run of ``before`` echo steps paused on its turn, and turn tools scoped to it."""
    make_skill(s.workspace.root, f"turns{before}", _skill(before))
    env = s.run(f"turns{before}", cwd=s.workspace.root)
    assert env.status == "needs_agent", env.status
    run_id = env.run_id or ""
    config = ServerConfig(
        workspace=s.workspace, catalog=Catalog(), environ=s.environ, run_scope=run_id
    )
    return TurnTools(config), run_id


def _calls(s: Session, run_id: str, start: int, end: int) -> None:
    for i in range(start, end):
        outcome = s.turn_call(run_id, "turn", "echo", {"text": f"t{i}"}, f"c{i}")
        assert outcome.ok, outcome.error


def test_reading_one_call_costs_the_same_at_10_and_at_400_calls(tmp_path: Path) -> None:
    s = session(make_workspace(tmp_path))
    tools, run_id = _paused(s, 0)
    stop = threading.Event()
    read = {"turn": "turn", "locator": "call:c5"}
    cancel = {"call": "turn/c5"}
    _calls(s, run_id, 0, 10)
    few_read, page = _vm_steps(s, lambda: tools._turn_read(s, read, stop))
    few_cancel, cancelled = _vm_steps(s, lambda: tools._call_cancel(s, cancel, stop))
    assert "t5" in page["text"]
    assert cancelled["state"] == "settled"
    _calls(s, run_id, 10, 400)
    many_read, again = _vm_steps(s, lambda: tools._turn_read(s, read, stop))
    many_cancel, _ = _vm_steps(s, lambda: tools._call_cancel(s, cancel, stop))
    assert again == page
    assert many_read == few_read
    assert many_cancel == few_cancel
    for refused_args in ({"turn": "turn", "locator": "call:nope"}, {"call": "turn/nope"}):
        handler = tools._turn_read if "locator" in refused_args else tools._call_cancel
        with pytest.raises(ProctorError) as refused:
            handler(s, refused_args, stop)
        assert refused.value.code in ("locator_unknown", "call_unknown")


def test_turn_status_reads_the_calls_of_its_own_step_only(tmp_path: Path) -> None:
    s = session(make_workspace(tmp_path))
    short_tools, short = _paused(s, 2)
    long_tools, long = _paused(s, 300)
    stop = threading.Event()
    for run_id in (short, long):
        _calls(s, run_id, 0, 3)
    status = short_tools._turn_status(s, {"turn": "turn"}, stop)
    listed = [c["locator"] for c in status["context"] if c["locator"].startswith("call:")]
    assert listed == ["call:c0", "call:c1", "call:c2"]
    # the envelope (which the status reads for the turn) holds the run's trace, so it costs
    # more for the longer run; the rest of the status must not
    few, _ = _vm_steps(s, lambda: short_tools._turn_status(s, {"turn": "turn"}, stop))
    few_envelope, _ = _vm_steps(s, lambda: s.envelope(short))
    many, again = _vm_steps(s, lambda: long_tools._turn_status(s, {"turn": "turn"}, stop))
    many_envelope, _ = _vm_steps(s, lambda: s.envelope(long))
    assert again["context"] == status["context"]
    # the 300 calls of the steps before the turn are not read again for its calls
    assert abs((many - many_envelope) - (few - few_envelope)) <= 5, (many, few)
