"""Pausing and resuming in process: approvals, questions, agent turns, standing approvals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ResumeRefused
from proctor.receipts.canonical import digest
from proctor.runtime.admission.governor import CallOutcome, CallSpec
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

EDIT = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {file: {type: string}}
      required: [file]
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.file}
      - id: write
        tool: fs.write
        reason: Replace the note.
        inputs: {path: $input.file, content: "new text\\n",
                 expected_digest: $steps.read.content_digest}
"""

ASK = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: confirm
        ask: {reason: Go ahead?}
      - id: pick
        ask:
          questions:
            - {id: colour, prompt: Which colour?, choices: [red, blue]}
            - {id: note, prompt: Anything else?, required: false}
      - id: say
        tool: echo
        inputs: {text: $steps.pick.answers.colour.option}
"""

AGENT = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {file: {type: string}}
    steps:
      - id: draft
        agent:
          instructions: Read the file and summarise it.
          inputs: {file: $input.file}
          calls: {tools: [fs.read]}
          output:
            type: object
            properties: {summary: {type: string}}
            required: [summary]
      - id: say
        tool: echo
        inputs: {text: $steps.draft.summary}
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    (root / "n.md").write_text("old text\n")
    make_skill(root, "edit", EDIT)
    make_skill(root, "ask", ASK)
    make_skill(root, "agent", AGENT)
    return root


def test_ask_floor_pauses_with_diff_then_approval_applies(ws: Path) -> None:
    s = session(ws)
    env = s.run("edit", inputs={"file": "n.md"}, authority=authority(effects="ask"), cwd=ws)
    assert env.status == "needs_approval"
    assert (ws / "n.md").read_text() == "old text\n"  # nothing executed
    (request,) = env.requests or []
    assert request["address"] == "write" and request["kind"] == "approval"
    change = request["payload"]["files"][0]
    assert "-old text" in change["diff"] and "+new text" in change["diff"]
    body = {k: v for k, v in request.items() if k != "request_digest"}
    assert digest(body) == request["request_digest"]  # a host can recompute it
    assert env.resume_command == f"proctor resume {env.run_id} -"
    fresh = session(ws)  # another process, as far as the store is concerned
    done = fresh.resume(env.run_id or "", approve(env))
    assert done.status == "sealed" and done.outcome == "completed"
    assert (ws / "n.md").read_text() == "new text\n"
    assert [t.step for t in done.trace] == ["read", "write"]  # read reused, not run again
    reads = [c for c in fresh.store.calls(env.run_id or "") if c.tool == "fs.read"]
    assert len(reads) == 1


def test_declined_approval_seals_declined_and_changes_nothing(ws: Path) -> None:
    s = session(ws)
    env = s.run("edit", inputs={"file": "n.md"}, authority=authority(effects="ask"), cwd=ws)
    done = s.resume(env.run_id or "", approve(env, approved=False))
    assert done.outcome == "declined"
    assert done.refusal is not None and done.refusal.code == "approval_declined"
    assert (ws / "n.md").read_text() == "old text\n"


def test_a_file_changed_after_the_person_saw_it_is_refused_not_asked_again(ws: Path) -> None:
    s = session(ws)
    env = s.run("edit", inputs={"file": "n.md"}, authority=authority(effects="ask"), cwd=ws)
    decided = approve(env)
    # After the person saw the diff, the file changes under the run.
    (ws / "n.md").write_text("changed by someone\n")
    done = s.resume(env.run_id or "", decided)
    # The read step settled with the old digest, so the write can only be refused as stale:
    # it is refused at once (never shown to a person again) and nothing is written.
    assert done.outcome == "blocked"
    assert done.refusal is not None and done.refusal.code == "stale_digest"
    assert (ws / "n.md").read_text() == "changed by someone\n"
    replayed = s.resume(env.run_id or "", decided)  # the old decision, replayed: still sealed
    assert replayed.outcome == "blocked"
    assert (ws / "n.md").read_text() == "changed by someone\n"


BLIND = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: write
        tool: fs.write
        reason: Replace the note without reading it.
        inputs: {path: n.md, content: "new text\\n"}
"""


def test_a_write_that_would_be_refused_once_approved_is_refused_before_anyone_is_asked(
    ws: Path,
) -> None:
    make_skill(ws, "blind", BLIND)
    s = session(ws)
    env = s.run("blind", authority=authority(effects="ask"), cwd=ws)
    assert env.status != "needs_approval" and not env.requests
    assert env.refusal is not None and env.refusal.code == "blind_overwrite"
    assert (ws / "n.md").read_text() == "old text\n"


def test_standing_edits_approval_admits_without_pausing(ws: Path) -> None:
    s = session(ws)
    host = authority(effects="ask", standing_approvals=[{"edits": {"paths": [""]}}])
    env = s.run("edit", inputs={"file": "n.md"}, authority=host, cwd=ws)
    assert env.status == "sealed" and env.outcome == "completed"
    calls = {c.tool: c for c in s.store.calls(env.run_id or "")}
    assert calls["fs.write"].result["approved_by"] == "standing_approvals[0]"


def test_effects_none_refuses_before_the_first_step(ws: Path) -> None:
    s = session(ws)
    env = s.run("edit", inputs={"file": "n.md"}, authority=authority(effects="none"), cwd=ws)
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "effects_none"
    assert "write (fs.write)" in env.refusal.message
    assert s.store.calls(env.run_id or "") == []


def test_ask_steps_approval_then_questions(ws: Path) -> None:
    s = session(ws)
    env = s.run("ask", cwd=ws)
    assert env.status == "needs_approval"
    assert [r["kind"] for r in env.requests or []] == ["approval"]
    env2 = s.resume(env.run_id or "", approve(env))
    assert env2.status == "needs_approval"
    (question,) = env2.requests or []
    assert question["kind"] == "question" and question["questions"][0]["options"] == ["red", "blue"]
    answers = env2.answers_template or {}
    entry = answers["approvals"]["pick"]
    bad = {"approvals": {"pick": {**entry, "value": {"colour": {"option": "green"}}}}}
    with pytest.raises(ResumeRefused) as refused:
        s.resume(env.run_id or "", bad)
    assert refused.value.code == "answer_invalid"
    good = {"approvals": {"pick": {**entry, "value": {"colour": {"option": "blue"}}}}}
    done = s.resume(env.run_id or "", good)
    assert done.outcome == "completed"
    assert done.result == {"text": "blue"}


def test_agent_turn_pauses_then_answer_validated(ws: Path) -> None:
    s = session(ws)
    env = s.run("agent", inputs={"file": "n.md"}, cwd=ws)
    assert env.status == "needs_agent"
    (turn,) = env.requests or []
    assert turn["kind"] == "agent_turn"
    assert turn["inputs"] == {"file": "n.md"}
    assert turn["allowance"]["tools"] == ["fs.read"]
    assert "Work carefully." in turn["instructions"] and "summarise" in turn["instructions"]
    # A host-side turn call, admitted with the turn's allowance and recorded by call_id.
    first = s.turn_call(env.run_id or "", "draft", "fs.read", {"path": "n.md"}, "c1")
    again = s.turn_call(env.run_id or "", "draft", "fs.read", {"path": "n.md"}, "c1")
    assert first.ok and again.result == first.result
    refused = s.turn_call(env.run_id or "", "draft", "fs.write", {"path": "x", "content": ""}, "c2")
    assert refused.status == "refused" and refused.code == "tool_not_allowed"
    assert not (ws / "x").exists()
    digest_ = turn["request_digest"]
    wrong = {"answers": {"draft": {"request_digest": digest_, "value": {"nope": 1}}}}
    failed = s.resume(env.run_id or "", wrong)
    assert failed.outcome == "failed"
    assert failed.refusal is not None and failed.refusal.code == "agent_output_invalid"


def test_agent_answer_completes_and_turn_calls_are_in_the_receipt(ws: Path) -> None:
    s = session(ws)
    env = s.run("agent", inputs={"file": "n.md"}, cwd=ws)
    s.turn_call(env.run_id or "", "draft", "fs.read", {"path": "n.md"}, "c1")
    digest_ = (env.requests or [])[0]["request_digest"]
    answer = {"answers": {"draft": {"request_digest": digest_, "value": {"summary": "old"}}}}
    done = s.resume(env.run_id or "", answer)
    assert done.outcome == "completed" and done.result == {"text": "old"}
    assert [t.call_id for t in done.trace] == ["draft/turn/c1", "say/1"]


class _Agent:
    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []

    def drive_turn(self, turn: dict[str, Any], call: Any) -> dict[str, Any]:
        self.turns.append(turn)
        read: CallOutcome = call(CallSpec("fs.read", {"path": "n.md"}, frozenset({"fs.write"})))
        sneaky: CallOutcome = call(
            CallSpec(
                "fs.write", {"path": "y", "content": "z", "create": True}, frozenset({"fs.write"})
            )
        )
        assert sneaky.code == "tool_not_allowed"  # the turn's allowance, not the spec's
        return {"summary": read.result["content"].strip()}


def test_managed_agent_driver_works_the_turn(ws: Path) -> None:
    agent = _Agent()
    s = session(ws, agent_driver=agent)
    env = s.run("agent", inputs={"file": "n.md"}, cwd=ws)
    assert env.outcome == "completed" and env.result == {"text": "old text"}
    assert not (ws / "y").exists()
    assert agent.turns[0]["output_schema"]["required"] == ["summary"]


def test_close_seals_a_paused_run_from_its_record(ws: Path) -> None:
    s = session(ws)
    env = s.run("edit", inputs={"file": "n.md"}, authority=authority(effects="ask"), cwd=ws)
    closed = s.resume(env.run_id or "", {"close": {"outcome": "superseded"}})
    assert closed.status == "sealed" and closed.outcome == "superseded"
    assert closed.receipt_id
    again = s.resume(env.run_id or "", {})
    assert again.receipt_id == closed.receipt_id  # sealed, nothing new: same envelope
    with pytest.raises(ResumeRefused) as refused:
        s.resume(env.run_id or "", approve(env))
    assert refused.value.code == "run_sealed"


def test_idempotency_key_returns_already_done(ws: Path) -> None:
    make_skill(
        ws,
        "once",
        """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: write
        tool: fs.write
        idempotency_key: note-once
        inputs: {path: once.md, content: "hi\\n", create: true}
""",
    )
    s = session(ws)
    first = s.run("once", cwd=ws)
    assert first.outcome == "completed"
    second = s.run("once", cwd=ws)
    assert second.outcome == "completed"  # not refused as file_exists: it was not sent
    calls = [c for c in s.store.calls(second.run_id or "")]
    assert calls == []  # nothing sent, nothing claimed
    assert any(f"receipt {first.receipt_id}" in note for note in second.notes)
    third = s.run("once", authority=authority(effects="ask"), cwd=ws)
    assert third.status == "sealed" and third.outcome == "completed"  # not asked: not sent


def test_stop_event_stops_before_the_next_step_and_resume_continues(ws: Path) -> None:
    import threading

    s = session(ws)
    stop = threading.Event()
    stop.set()
    from proctor.runtime.engine.host import RunInterrupted

    with pytest.raises(RunInterrupted):
        s.run("edit", inputs={"file": "n.md"}, cwd=ws, stop=stop)
    (run,) = s.store.list_runs()
    assert run.status == "stopped" and s.store.calls(run.run_id) == []
    done = s.resume(run.run_id, {})
    assert done.outcome == "completed"


def test_a_second_driver_is_refused_while_one_holds_the_lease(ws: Path) -> None:
    s = session(ws)
    env = s.run("edit", inputs={"file": "n.md"}, authority=authority(effects="ask"), cwd=ws)
    assert s.store.acquire_lease(env.run_id or "", "someone-else|1|0|x", 60) is None
    with pytest.raises(ResumeRefused) as refused:
        s.resume(env.run_id or "", approve(env))
    assert refused.value.code == "run_busy"
    assert (ws / "n.md").read_text() == "old text\n"


def test_a_payload_over_64_kib_is_stored_as_an_artifact_by_digest(ws: Path) -> None:
    import json

    make_skill(
        ws,
        "big",
        """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {text: {type: string}}
    steps:
      - id: write
        tool: fs.write
        inputs: {path: big.md, content: $input.text, create: true}
""",
    )
    s = session(ws)
    ask = authority(effects="ask")
    env = s.run("big", inputs={"text": "line\n" * 20000}, authority=ask, cwd=ws)
    (request,) = env.requests or []
    assert "payload" not in request
    artifact = request["payload_artifact"]
    stored = json.loads((ws / artifact["path"]).read_bytes())
    assert digest(stored) == artifact["digest"] == request["payload_digest"]
    assert stored["files"][0]["path"] == "big.md"
    done = s.resume(env.run_id or "", approve(env))
    assert done.outcome == "completed" and (ws / "big.md").stat().st_size == 100000


ASKING = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: draft
        agent:
          instructions: Ask which colour, then answer with it.
          ask: true
          output: {type: object}
"""


def test_ask_human_in_a_host_worked_turn_waits_for_a_person_then_answers(ws: Path) -> None:
    make_skill(ws, "asking", ASKING)
    s = session(ws)
    env = s.run("asking", cwd=ws)
    assert env.status == "needs_agent"
    run_id = env.run_id or ""
    asked = s.turn_call(run_id, "draft", "ask_human", {"question": "Which colour?"}, "q1")
    assert asked.status == "refused" and (asked.error or {})["code"] == "answer_pending"
    waiting = s.envelope(run_id)
    assert waiting.status == "needs_approval"
    (question,) = [r for r in waiting.requests or [] if r["kind"] == "question"]
    assert question["address"] == "draft/turn/q1"
    assert question["questions"][0]["prompt"] == "Which colour?"
    # asking again before anyone answered: still pending, nothing decided for it
    again = s.turn_call(run_id, "draft", "ask_human", {"question": "Which colour?"}, "q1")
    assert (again.error or {})["code"] == "answer_pending"
    doc = {
        "approvals": {
            "draft/turn/q1": {
                "request_digest": question["request_digest"],
                "value": {"answer": {"text": "blue"}},
            }
        }
    }
    resumed = s.resume(run_id, doc)
    assert resumed.status == "needs_agent"  # the turn goes on; the host asks again for it
    answered = s.turn_call(run_id, "draft", "ask_human", {"question": "Which colour?"}, "q1")
    assert answered.status == "completed"
    assert answered.result == {"answers": {"answer": {"text": "blue"}}}
    # another question under the same call_id is a new request: the old answer does not fit
    other = s.turn_call(run_id, "draft", "ask_human", {"question": "Which size?"}, "q1")
    assert (other.error or {})["code"] == "answer_pending"


def test_ask_human_is_refused_in_a_turn_without_ask(ws: Path) -> None:
    s = session(ws)
    env = s.run("agent", inputs={"file": "n.md"}, cwd=ws)
    out = s.turn_call(env.run_id or "", "draft", "ask_human", {"question": "Hm?"}, "q1")
    assert out.status == "refused" and (out.error or {})["code"] == "tool_not_allowed"
    assert s.envelope(env.run_id or "").status == "needs_agent"
