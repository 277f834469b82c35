"""A decision on a call whose world changed while the run waited: a decline is applied as the
person's decision (never re-checked against the world, never attempted), an approval is not
(the stale call is refused as it would fail, and nothing is written)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proctor.receipts.canonical import digest
from proctor.runtime.tools.fsutil import digest_of
from tests.receipt_files import stored
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

CHANGES = f"""minimum_proctor: 0.1.0
methods:
  edit:
    description: Rename beta.
    steps:
      - id: change
        tool: fs.edit
        reason: Rename beta.
        inputs: {{path: notes.md, edits: [{{old: beta, new: gamma}}]}}
  create:
    description: Start the log.
    steps:
      - id: change
        tool: fs.write
        reason: Start the log.
        inputs: {{path: log.md, content: "first\\n", create: true}}
  delete:
    description: Drop the notes.
    inputs:
      type: object
      properties: {{digest: {{type: string}}}}
      required: [digest]
    steps:
      - id: change
        tool: fs.delete
        reason: Drop the notes.
        inputs: {{path: notes.md, expected_digest: $input.digest}}
  bundle:
    description: Rewrite the notes.
    steps:
      - id: change
        tool: fs.apply_bundle
        reason: Rewrite the notes.
        inputs: {{changes: [{{op: replace, path: notes.md, content: "rewritten\\n"}}]}}
  turn:
    description: Work a turn.
    steps:
      - id: draft
        agent:
          instructions: Start the log.
          calls: {{tools: [fs.write]}}
          output: {{type: object, properties: {{summary: {{type: string}}}}}}
  command:
    description: Mark the folder.
    steps:
      - id: change
        tool: command.execute
        reason: Mark the folder.
        inputs: {{argv: ["{sys.executable}", "-c", "open('mark', 'w').close()"], cwd: sub}}
"""

NOTES = "alpha beta\n"
LOG = {"path": "log.md", "content": "first\n", "create": True}
WHO = "os:tester"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    (root / "notes.md").write_text(NOTES)
    (root / "sub").mkdir()
    make_skill(root, "changes", CHANGES)
    return root


def _no_match(root: Path) -> None:
    (root / "notes.md").write_text("alpha delta\n")  # the edit's old text is gone


def _still_applies(root: Path) -> None:
    (root / "notes.md").write_text("the beta line\n")  # another diff than the one shown


def _created(root: Path) -> None:
    (root / "log.md").write_text("someone else's log\n")


def _changed(root: Path) -> None:
    (root / "notes.md").write_text("changed by someone\n")


def _folder_leaves(root: Path) -> None:
    (root / "sub").rmdir()
    (root / "sub").symlink_to(root.parent)  # the command's folder now leads outside


# method, how the world changes while the run waits
STALE: list[tuple[str, Callable[[Path], None]]] = [
    ("edit", _no_match),
    ("edit", _still_applies),
    ("create", _created),
    ("delete", _changed),
    ("bundle", _changed),
    ("command", _folder_leaves),
]


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".proctor" not in p.parts and ".home" not in p.parts
    }


def _audit(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".proctor" / "audit.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _all_receipts(root: Path) -> list[dict[str, Any]]:
    return [json.loads(data)["body"] for data in stored(root / ".proctor" / "receipts").values()]


def _receipts(root: Path) -> dict[str, dict[str, Any]]:
    """Each receipt body of the store by kind (a run here has one step and one call)."""
    return {body["kind"]: body for body in _all_receipts(root)}


def _paused(root: Path, method: str) -> Any:
    inputs = {"digest": digest_of(NOTES.encode())} if method == "delete" else None
    env = session(root).run(
        f"changes#{method}", inputs=inputs, authority=authority(effects="ask"), cwd=root
    )
    assert env.status == "needs_approval", env
    return env


def _who_declined(root: Path) -> None:
    """The receipts and the audit log name the person who declined."""
    verdict = {"rule_id": "decision:change", "code": f"decided_by:{WHO}", "enforcement": "warn"}
    receipts = _receipts(root)
    for kind in ("run", "step", "call"):
        assert receipts[kind]["outcome"] == "declined"
        assert receipts[kind]["seal_reason"] == "approval_declined"
    assert verdict in receipts["step"]["verdicts"]
    assert verdict in receipts["call"]["verdicts"]
    [refused] = [e for e in _audit(root) if e["event"] == "call_refused"]
    assert refused["code"] == "approval_declined"
    assert refused["decided_by"] == WHO


def test_a_decline_names_who_declined_in_the_envelope_receipts_and_audit_log(ws: Path) -> None:
    env = _paused(ws, "edit")
    done = session(ws).resume(env.run_id, approve(env, approved=False), decided_by=WHO)
    assert done.outcome == "declined"
    assert done.refusal is not None and done.refusal.code == "approval_declined"
    assert WHO in done.refusal.message
    assert (ws / "notes.md").read_text() == NOTES
    _who_declined(ws)


@pytest.mark.parametrize(("method", "change"), STALE)
def test_a_decline_of_a_call_gone_stale_is_the_persons_decision(
    ws: Path, method: str, change: Callable[[Path], None]
) -> None:
    env = _paused(ws, method)
    change(ws)  # another run, or a person, changes what the call would act on
    before = _tree(ws)
    s = session(ws)
    done = s.resume(env.run_id, approve(env, approved=False), decided_by=WHO)
    assert done.status == "sealed" and done.outcome == "declined"
    assert done.refusal is not None and done.refusal.code == "approval_declined"
    assert [t.code for t in done.trace] == ["approval_declined"]
    assert _tree(ws) == before  # never attempted
    _who_declined(ws)
    [request] = s.store.requests(env.run_id)
    assert request.state == "used"  # the decline is what the step settled on
    assert request.request_digest == env.requests[0]["request_digest"]  # never asked again


def _turn_declined(root: Path) -> tuple[Any, str]:
    """A host-worked turn whose call c1 (create log.md) a person declined, after someone else
    created log.md."""
    s = session(root)
    env = s.run("changes#turn", authority=authority(effects="ask"), cwd=root)
    run_id = env.run_id
    held = s.turn_call(run_id, "draft", "fs.write", LOG, "c1")
    assert held.code == "approval_pending"
    _created(root)
    entry = (s.envelope(run_id).answers_template or {})["approvals"]["draft/turn/c1"]
    decline = {"approvals": {"draft/turn/c1": {**entry, "approved": False}}}
    assert s.resume(run_id, decline, decided_by=WHO).status == "needs_agent"
    return s, run_id


def test_a_declined_turn_call_gone_stale_is_refused_as_declined(ws: Path) -> None:
    s, run_id = _turn_declined(ws)
    before = _tree(ws)
    refused = s.turn_call(run_id, "draft", "fs.write", LOG, "c1")
    assert refused.code == "approval_declined"  # not file_exists: the world is not consulted
    assert WHO in str((refused.error or {}).get("message"))
    assert _tree(ws) == before
    answer = {
        "request_digest": next(
            r.request_digest for r in s.store.requests(run_id) if r.kind == "agent_turn"
        ),
        "value": {"summary": "declined"},
    }
    assert s.resume(run_id, {"answers": {"draft": answer}}).outcome == "completed"
    states = {r.address: r.state for r in s.store.requests(run_id)}
    assert states["draft/turn/c1"] == "used"  # the decline the turn's call settled on
    verdict = {"rule_id": "decision:draft/turn/c1", "code": f"decided_by:{WHO}",
               "enforcement": "warn"}  # fmt: skip
    calls = [b for b in _all_receipts(ws) if b["kind"] == "call"]
    assert [b["outcome"] for b in calls] == ["declined"]
    assert verdict in calls[0]["verdicts"]


def test_a_decline_binds_to_the_arguments_it_was_asked_for(ws: Path) -> None:
    """Other arguments under the declined call's id are another call: asked again, never
    refused in the name of a person who did not see them."""
    s, run_id = _turn_declined(ws)
    other = {"path": "log2.md", "content": "first\n", "create": True}
    held = s.turn_call(run_id, "draft", "fs.write", other, "c1")
    assert held.code == "approval_pending"
    [request] = [r for r in s.store.requests(run_id) if r.address == "draft/turn/c1"]
    assert request.state == "open" and request.body["args_digest"] == digest(other)
    assert not (ws / "log2.md").exists()


@pytest.mark.parametrize(("method", "change"), [("edit", _no_match), ("delete", _changed)])
def test_an_approval_of_a_call_gone_stale_is_refused_and_writes_nothing(
    ws: Path, method: str, change: Callable[[Path], None]
) -> None:
    env = _paused(ws, method)
    change(ws)
    before = _tree(ws)
    done = session(ws).resume(env.run_id, approve(env), decided_by=WHO)
    assert done.outcome == "blocked"
    assert done.refusal is not None
    assert done.refusal.code == ("edit_no_match" if method == "edit" else "stale_digest")
    assert _tree(ws) == before
    assert not [e for e in _audit(ws) if e["event"] in ("tool_call", "approval_used")]
