"""A directive run's write confinement is a property of the run, not of the session class.

A directive run started with a ``DirectiveSession`` pauses on its host-driven turn; a plain
``Session`` (what ``proctor resume`` and ``proctor mcp --run`` use) then works the turn: a write
outside ``output/`` and ``drafts/`` is refused and the file system is unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from proctor.receipts.signing import signer_from_seed
from proctor.runtime.admission.governor import CallOutcome, CallSpec
from proctor.runtime.agents.sessions import DirectiveSession
from proctor.runtime.boundary.workspace import Workspace
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_workspace,
    session,
)

REPO = Path(__file__).resolve().parents[3]

WRITER = """---
id: writer
description: Write a short note
tools: [write_file, read_file]
category: task
---
# Writer
Write the note the request asks for.
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    (root / "directives").mkdir()
    (root / "directives" / "writer.md").write_text(WRITER)
    (root / "notes.md").write_text("mine\n")
    return root


def _paused_directive_run(root: Path) -> str:
    # started before the test sessions' clock, so every receipt ends after it starts
    starter = DirectiveSession(
        Workspace(root),
        environ={"PROCTOR_HOME": str(root / ".home")},
        clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        signer=signer_from_seed(bytes(range(32))),
    )
    try:
        env = starter.run_directive("writer", "write a note")
    finally:
        starter.close()
    assert env.status == "needs_agent"
    return env.run_id or ""


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".proctor" not in p.parts and ".home" not in p.parts
    }


def test_the_run_records_its_confinement(ws: Path) -> None:
    run_id = _paused_directive_run(ws)
    record = session(ws).store.get_run(run_id)
    assert record is not None and record.data["writable_dirs"] == ["output", "drafts"]


def test_a_plain_session_turn_call_cannot_write_outside_output_and_drafts(ws: Path) -> None:
    run_id = _paused_directive_run(ws)
    before = _tree(ws)
    plain = session(ws)  # a plain Session, as `proctor mcp --run` uses
    outside = plain.turn_call(
        run_id, "work", "fs.write", {"path": "other.md", "content": "x", "create": True}, "c1"
    )
    assert outside.status == "refused" and outside.code == "outside_writable_dirs"
    replace = plain.turn_call(
        run_id, "work", "fs.write", {"path": "notes.md", "content": "x"}, "c2"
    )
    assert replace.status == "refused" and replace.code == "outside_writable_dirs"
    assert _tree(ws) == before  # nothing written
    inside = plain.turn_call(
        run_id, "work", "fs.write", {"path": "output/n.md", "content": "ok", "create": True}, "c3"
    )
    assert inside.ok
    assert (ws / "output" / "n.md").read_text() == "ok"


def test_a_record_without_the_field_is_still_confined_by_its_package(ws: Path) -> None:
    run_id = _paused_directive_run(ws)
    plain = session(ws)
    record = plain.store.get_run(run_id)
    assert record is not None
    # A run recorded before confinement was a recorded property: its package says it.
    plain.store.update_run(run_id, data={"writable_dirs": None})
    outside = plain.turn_call(
        run_id, "work", "fs.write", {"path": "other.md", "content": "x", "create": True}, "c1"
    )
    assert outside.code == "outside_writable_dirs"
    assert not (ws / "other.md").exists()


class _Writer:
    """A managed agent that tries to write outside the writable folders, then inside."""

    def __init__(self) -> None:
        self.outcomes: list[CallOutcome] = []

    def drive_turn(self, turn: dict[str, Any], call: Any) -> dict[str, Any]:
        for path in ("other.md", "drafts/d.md"):
            spec = CallSpec("fs.write", {"path": path, "content": "x", "create": True}, frozenset())
            self.outcomes.append(call(spec))
        return {"done": True, "summary": "wrote"}


def test_a_plain_session_resume_confines_the_managed_turn(ws: Path) -> None:
    run_id = _paused_directive_run(ws)
    agent = _Writer()
    plain = session(ws, agent_driver=agent)  # not a DirectiveSession
    done = plain.resume(run_id, {})
    assert done.outcome == "completed"
    outside, inside = agent.outcomes
    assert outside.code == "outside_writable_dirs" and inside.ok
    assert not (ws / "other.md").exists()
    assert (ws / "drafts" / "d.md").read_text() == "x"


def test_plain_proctor_resume_keeps_the_confinement(ws: Path) -> None:
    run_id = _paused_directive_run(ws)
    before = _tree(ws)
    env = {"PROCTOR_HOME": str(ws / ".home"), "PYTHONPATH": str(REPO / "src")}
    # A host's turn call through a plain Session, then the turn's output through the CLI.
    outside = session(ws).turn_call(
        run_id, "work", "fs.write", {"path": "other.md", "content": "x", "create": True}, "c1"
    )
    assert outside.code == "outside_writable_dirs"
    turn = (session(ws).envelope(run_id).requests or [])[0]
    answer = {"answers": {"work": {"request_digest": turn["request_digest"],
                                   "value": {"done": True, "summary": "nothing"}}}}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "resume", run_id, "-", "--json"],
        cwd=ws, env=env, input=json.dumps(answer), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert json.loads(proc.stdout)["outcome"] == "completed", proc.stderr
    assert _tree(ws) == before
