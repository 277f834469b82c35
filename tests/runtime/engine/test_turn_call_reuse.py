"""What a session keeps between the turn calls of one run, and what it checks again each call.

A host's turn calls (``Session.turn_call``, an MCP client session's every call) find the turn
by its address alone (one row, not the run's every request), and are held to the workspace as
it is at each call: a package, a policy file, a key changed between two calls of one session
is seen by the second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import ResumeRefused
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

TWO_TURNS = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: first
        agent:
          instructions: Echo.
          calls: {tools: [echo]}
      - id: gate
        ask: {reason: Go on?}
      - id: second
        agent:
          instructions: Echo.
          calls: {tools: [echo]}
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "turns", TWO_TURNS)
    return root


def _refused(s: object, run_id: str, address: str) -> str:
    with pytest.raises(ResumeRefused) as caught:
        s.turn_call(run_id, address, "echo", {"text": "x"}, "c")  # type: ignore[attr-defined]
    return caught.value.code


def test_a_turn_call_finds_only_an_open_agent_turn_of_its_own_run(ws: Path) -> None:
    s = session(ws)
    env = s.run("turns", cwd=ws)
    run_id, other = env.run_id or "", s.run("turns", cwd=ws).run_id or ""
    assert env.status == "needs_agent"
    assert s.turn_call(run_id, "first", "echo", {"text": "x"}, "c1").ok
    assert _refused(s, run_id, "nowhere") == "unknown_address"
    (turn,) = env.requests
    answer = {"request_digest": turn["request_digest"], "value": {}}
    done = s.resume(run_id, {"answers": {"first": answer}})
    assert done.status == "needs_approval"  # the run waits at the gate: an approval
    assert _refused(s, run_id, "gate") == "unknown_address"  # a request, not an agent turn
    assert _refused(s, run_id, "first") == "unknown_address"  # the turn was answered: used
    # another run's open turn at the same address is not this run's
    assert s.turn_call(other, "first", "echo", {"text": "y"}, "c1").ok
    assert _refused(s, run_id, "second") == "unknown_address"  # not asked yet
