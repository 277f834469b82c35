"""The write guards count a run's earlier calls made by other governors (attack tests).

A host's turn call (``Session.turn_call``, the MCP turn tools) and a resume each build a new
governor; ``PROCTOR_WRITE_BUDGET`` and the bulk-write warning must still count the writes the
run's earlier calls made. With a budget of 2, four separate host turn calls to ``fs.write``:
the third is refused and writes nothing, whether the calls come from one session, two
sessions, two processes, or after a resume.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proctor.policy import write_tally
from proctor.policy.shipped_guards import CHANGING_TOOLS
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

REPO = Path(__file__).resolve().parents[3]

TWO_TURNS = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: draft
        agent:
          instructions: Write the notes.
          calls: {tools: [fs.write]}
          output:
            type: object
            properties: {summary: {type: string}}
            required: [summary]
      - id: again
        agent:
          instructions: Write more notes.
          calls: {tools: [fs.write]}
          output:
            type: object
            properties: {summary: {type: string}}
            required: [summary]
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "writer", TWO_TURNS)
    return root


def _env(root: Path) -> dict[str, str]:
    return {"PROCTOR_HOME": str(root / ".home"), "PROCTOR_WRITE_BUDGET": "2"}


def _write(s: Any, run_id: str, name: str, address: str = "draft") -> Any:
    args = {"path": f"{name}.md", "content": f"{name}\n", "create": True}
    return s.turn_call(run_id, address, "fs.write", args, f"w-{name}", reason="a note")


def _codes(outcome: Any) -> set[str]:
    return {str(v.get("code")) for v in outcome.verdicts or []}


def _start(root: Path) -> tuple[Any, str]:
    s = session(root, environ=_env(root))
    env = s.run("writer", authority=authority(effects="allow"), cwd=root)
    assert env.status == "needs_agent"
    return s, env.run_id or ""


def _counted(s: Any, run_id: str) -> int:
    """The changing calls the store holds for the run that count (not refused): what a full
    read of the run's calls says (the store keeps no arguments, so no paths)."""
    return sum(
        1
        for call in s.store.calls(run_id)
        if call.tool in CHANGING_TOOLS and call.outcome not in (None, "refused")
    )


def _assert_refused_third(root: Path, outcomes: list[Any]) -> None:
    first, second, third, fourth = outcomes
    assert first.ok and second.ok
    assert "bulk_write" in _codes(second)  # the warning counts the first call's path
    for refused, name in ((third, "c"), (fourth, "d")):
        assert refused.status == "refused" and refused.code == "write_budget_exceeded"
        assert not (root / f"{name}.md").exists()  # nothing written by a refused call
    assert (root / "a.md").exists() and (root / "b.md").exists()


def test_four_host_turn_calls_from_one_session_spend_one_budget(ws: Path) -> None:
    s, run_id = _start(ws)
    outcomes = [_write(s, run_id, name) for name in "abcd"]
    _assert_refused_third(ws, outcomes)
    data = s.store.get_run(run_id).data
    assert data[write_tally.KEY] == {
        "changing": 2, "paths": ["a.md", "b.md"], "unheld": 0, "first": ["a.md", "b.md"]
    }  # fmt: skip
    assert _counted(s, run_id) == 2


def test_four_host_turn_calls_from_two_sessions_spend_one_budget(ws: Path) -> None:
    s, run_id = _start(ws)
    other = session(ws, environ=_env(ws))
    callers = (s, other, s, other)
    outcomes = [_write(x, run_id, name) for x, name in zip(callers, "abcd", strict=True)]
    _assert_refused_third(ws, outcomes)


def test_a_turn_call_in_another_process_counts_the_earlier_writes(ws: Path) -> None:
    s, run_id = _start(ws)
    outcomes = [_write(s, run_id, "a"), _write(s, run_id, "b")]
    code = (
        "import json, sys\n"
        "from proctor import Session, Workspace\n"
        "s = Session(Workspace(sys.argv[1]), environ=json.loads(sys.argv[2]))\n"
        "out = []\n"
        "for name in 'cd':\n"
        "    args = {'path': name + '.md', 'content': name, 'create': True}\n"
        "    o = s.turn_call(sys.argv[3], 'draft', 'fs.write', args, 'w-' + name, reason='n')\n"
        "    out.append([o.status, o.code])\n"
        "s.close()\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(ws), json.dumps(_env(ws)), run_id],
        env={"PYTHONPATH": str(REPO / "src"), **_env(ws)},
        capture_output=True, text=True, timeout=120, cwd=ws,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [["refused", "write_budget_exceeded"]] * 2
    assert outcomes[0].ok and outcomes[1].ok
    assert not (ws / "c.md").exists() and not (ws / "d.md").exists()


def test_the_budget_holds_across_a_resume_to_the_next_turn(ws: Path) -> None:
    s, run_id = _start(ws)
    assert _write(s, run_id, "a").ok and _write(s, run_id, "b").ok
    turn = next(r for r in s.store.requests(run_id) if r.kind == "agent_turn")
    answer = {"request_digest": turn.request_digest, "value": {"summary": "two notes"}}
    resumed = session(ws, environ=_env(ws)).resume(run_id, {"answers": {"draft": answer}})
    assert resumed.status == "needs_agent"
    fresh = session(ws, environ=_env(ws))
    third = _write(fresh, run_id, "c", address="again")
    assert third.status == "refused" and third.code == "write_budget_exceeded"
    assert not (ws / "c.md").exists()


def test_refused_and_read_calls_leave_the_tally_as_it_was(ws: Path) -> None:
    s, run_id = _start(ws)
    assert _write(s, run_id, "a").ok
    before = s.store.get_run(run_id).data[write_tally.KEY]
    bad = s.turn_call(run_id, "draft", "fs.write", {"path": "../x.md", "content": "x"}, "w-x")
    assert bad.status == "refused"
    assert s.store.get_run(run_id).data[write_tally.KEY] == before
    assert before["changing"] == 1 and before["paths"] == ["a.md"] and _counted(s, run_id) == 1


def test_one_governor_reads_the_runs_tally_once_and_stores_every_write(ws: Path) -> None:
    """A governor making many writes reads the run's row for the tally once (while it holds
    the run no other driver writes it) and still stores each write's count with it."""
    from proctor.runtime.admission.governor import CallSpec, Governor
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.records.runs import RunRecord

    s = session(ws, environ={"PROCTOR_HOME": str(ws / ".home")})
    s.store.create_run(RunRecord(run_id="r", skill="writer", method="main"))
    policies, guards, _ = s.policy()
    governor = Governor(
        run_id="r", workspace=s.workspace, store=s.store, tools=s.tools, policies=policies,
        guards=guards, audit=s.audit, sanitizer=Sanitizer(),
    )  # fmt: skip
    reads: list[str] = []  # the governor's own reads of the run (not the store's merge)
    real, update = s.store.get_run, s.store.update_run
    inside = [False]

    def get_run(run_id: str) -> Any:
        if not inside[0]:
            reads.append(run_id)
        return real(run_id)

    def update_run(run_id: str, **kw: Any) -> Any:
        inside[0] = True
        try:
            return update(run_id, **kw)
        finally:
            inside[0] = False

    s.store.get_run, s.store.update_run = get_run, update_run  # counted, the real store's
    for n in range(5):
        args = {"path": f"n{n}.md", "content": "x\n", "create": True}
        outcome = governor.call(CallSpec("fs.write", args, frozenset({"fs.write"}), step_id="a"))
        assert outcome.ok, outcome.code
        tally = real("r").data[write_tally.KEY]  # type: ignore[union-attr]
        assert tally["changing"] == n + 1 and len(tally["paths"]) == n + 1
    assert reads == ["r"]


def test_a_governor_reads_the_tally_when_a_write_guard_asks_and_counts_it(ws: Path) -> None:
    """A governor reads the run's row for the tally only when a write guard first asks (a
    read call reads none), and then reads the tally as the run holds it: with two
    writes already counted for the run, its first write is refused by a budget of 2, even
    after reads made first."""
    from proctor.runtime.admission.governor import CallSpec, Governor
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.records.runs import RunRecord

    (ws / "r.md").write_text("r\n")
    s = session(ws, environ=_env(ws))
    s.store.create_run(RunRecord(run_id="r", skill="writer", method="main"))
    tally = {"changing": 2, "paths": ["a.md", "b.md"], "unheld": 0, "first": ["a.md", "b.md"]}
    policies, guards, _ = s.policy()
    governor = Governor(
        run_id="r", workspace=s.workspace, store=s.store, tools=s.tools, policies=policies,
        guards=guards, audit=s.audit, sanitizer=Sanitizer(), write_budget=2,
    )  # fmt: skip
    reads: list[str] = []
    real = s.store.get_run

    def get_run(run_id: str) -> Any:
        reads.append(run_id)
        return real(run_id)

    s.store.get_run = get_run  # type: ignore[method-assign]
    for _ in range(2):
        read = governor.call(CallSpec("fs.read", {"path": "r.md"}, frozenset({"fs.read"})))
        assert read.ok, read.code
    assert reads == []  # no write guard asked: the row is not read
    s.store.update_run("r", data={write_tally.KEY: tally})  # another driver's two writes
    reads.clear()  # the store's own read to merge them
    args = {"path": "c.md", "content": "x\n", "create": True}
    refused = governor.call(CallSpec("fs.write", args, frozenset({"fs.write"}), step_id="a"))
    assert refused.status == "refused" and refused.code == "write_budget_exceeded"
    assert not (ws / "c.md").exists() and reads == ["r"]
