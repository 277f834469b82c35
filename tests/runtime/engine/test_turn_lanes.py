"""Host-driven turn calls under ``effects: ask``, the turn's failure lane, and cancelled calls.

- a change inside a host-driven turn pauses the run ``needs_approval`` at the call's address
  with exactly what executes; after a person approves it with ``proctor resume``, the same
  ``call_id`` executes once; a managed turn keeps refusing (``approval_required``);
- ``answers: {turn: {failure: {reason}}}`` fails the step with the scrubbed reason, sealed;
- a cancelled read stops (``call_cancelled``); a cancelled effect runs to its end and is
  recorded with ``cancel_requested`` beside it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ResumeRefused
from proctor.receipts.canonical import digest
from proctor.runtime.admission.governor import CallOutcome, CallSpec
from tests.receipt_files import all_bytes, stored
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
    store_bytes,
)

REPO = Path(__file__).resolve().parents[3]
SECRET = "ghp_" + "a1B2" * 9

WRITER = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: draft
        agent:
          instructions: Write the note, then summarise what you did.
          calls: {tools: [fs.write, fs.search, fs.list]}
          output:
            type: object
            properties: {summary: {type: string}}
            required: [summary]
      - id: say
        tool: echo
        inputs: {text: $steps.draft.summary}
"""

CALL = {"path": "out.md", "content": "hello\n", "create": True}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "writer", WRITER)
    return root


def _cli_resume(root: Path, run_id: str, document: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "resume", run_id, "-", "--json"],
        cwd=root,
        env={"PROCTOR_HOME": str(root / ".home"), "PYTHONPATH": str(REPO / "src")},
        input=json.dumps(document), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.stdout, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _turn_digest(s: Any, run_id: str) -> str:
    record = next(r for r in s.store.requests(run_id) if r.kind == "agent_turn")
    return str(record.request_digest)


# -- effects: ask inside a host-driven turn --------------------------------------------------


def test_a_turn_call_under_a_key_the_seal_would_refuse_sends_nothing(ws: Path) -> None:
    from proctor import Session, Workspace
    from proctor.errors import ConfigError

    home = ws / ".home"
    first = Session(Workspace(ws), environ={"PROCTOR_HOME": str(home)})
    try:
        env = first.run("writer", authority=authority(effects="allow"), cwd=ws)
    finally:
        first.close()
    assert env.status == "needs_agent"
    (home / "signing_key.pem").chmod(0o644)  # exposed while the run waits
    # the next process to work the turn (an MCP server, a host) refuses before any call
    s = Session(Workspace(ws), environ={"PROCTOR_HOME": str(home)})
    try:
        with pytest.raises(ConfigError) as refused:
            s.turn_call(env.run_id or "", "draft", "fs.write", CALL, "c1")
        assert refused.value.code == "signing_key_exposed"
        assert not (ws / "out.md").exists()  # nothing sent
        assert s.store.calls(env.run_id or "") == []
    finally:
        s.close()


def test_a_turn_change_pauses_then_the_approved_call_executes_once(ws: Path) -> None:
    s = session(ws)
    env = s.run("writer", authority=authority(effects="ask"), cwd=ws)
    run_id = env.run_id or ""
    assert env.status == "needs_agent"
    held = s.turn_call(run_id, "draft", "fs.write", CALL, "c1", reason="write the note")
    assert held.status == "refused" and held.code == "approval_pending"
    assert not (ws / "out.md").exists()  # nothing sent
    assert s.store.get_call(run_id, "draft/turn/c1") is None  # nothing recorded under c1
    paused = s.envelope(run_id)
    assert paused.status == "needs_approval"
    (request,) = paused.requests or []
    assert request["address"] == "draft/turn/c1" and request["kind"] == "approval"
    assert request["tool"] == "fs.write"
    (change,) = request["payload"]["files"]
    assert change["path"] == "out.md" and "+hello" in change["diff"]
    body = {k: v for k, v in request.items() if k != "request_digest"}
    assert (
        digest(body) == request["request_digest"] == (held.error or {})["details"]["request_digest"]
    )
    # The same call (same args and reason) asked again before a decision: still held, the
    # same request.
    again = s.turn_call(run_id, "draft", "fs.write", CALL, "c1", reason="write the note")
    assert again.code == "approval_pending" and not (ws / "out.md").exists()
    # A person approves with `proctor resume`; the run goes back to its turn.
    template = paused.answers_template or {}
    entry = template["approvals"]["draft/turn/c1"]
    decided = {"approvals": {"draft/turn/c1": {**entry, "approved": True, "reason": "ok"}}}
    resumed = _cli_resume(ws, run_id, decided)
    assert resumed["status"] == "needs_agent"
    assert resumed["requests"][0]["kind"] == "agent_turn"
    assert not (ws / "out.md").exists()  # approving does not execute: the host's repeat does
    fresh = session(ws)
    done = fresh.turn_call(run_id, "draft", "fs.write", CALL, "c1", reason="write the note")
    assert done.ok and (ws / "out.md").read_text() == "hello\n"
    repeat = fresh.turn_call(run_id, "draft", "fs.write", CALL, "c1")
    assert repeat.ok and repeat.result == done.result
    writes = [c for c in fresh.store.calls(run_id) if c.tool == "fs.write"]
    assert len(writes) == 1 and writes[0].result["approved_by"] == "person:draft/turn/c1"
    answer = {"request_digest": _turn_digest(fresh, run_id), "value": {"summary": "wrote it"}}
    sealed = fresh.resume(run_id, {"answers": {"draft": answer}})
    assert sealed.outcome == "completed"
    used = {r.address: r.state for r in fresh.store.requests(run_id)}
    assert used["draft/turn/c1"] == "used"


def test_a_pending_turn_call_approval_stays_listed_beside_its_turn(ws: Path) -> None:
    s = session(ws)
    env = s.run("writer", authority=authority(effects="ask"), cwd=ws)
    run_id = env.run_id or ""
    s.turn_call(run_id, "draft", "fs.write", CALL, "c1")
    # Driven on without a decision ({}), the run waits on its turn and still shows the call.
    again = s.resume(run_id, {})
    assert again.status == "needs_agent"
    assert [(r["address"], r["kind"]) for r in again.requests or []] == [
        ("draft", "agent_turn"),
        ("draft/turn/c1", "approval"),
    ]
    assert "draft/turn/c1" in (again.answers_template or {})["approvals"]
    assert not (ws / "out.md").exists()


def test_a_declined_turn_change_is_refused_and_nothing_is_written(ws: Path) -> None:
    s = session(ws)
    env = s.run("writer", authority=authority(effects="ask"), cwd=ws)
    run_id = env.run_id or ""
    s.turn_call(run_id, "draft", "fs.write", CALL, "c1")
    template = s.envelope(run_id).answers_template or {}
    entry = template["approvals"]["draft/turn/c1"]
    s.resume(run_id, {"approvals": {"draft/turn/c1": {**entry, "approved": False}}})
    refused = s.turn_call(run_id, "draft", "fs.write", CALL, "c1")
    assert refused.status == "refused" and refused.code == "approval_declined"
    assert not (ws / "out.md").exists()
    # The turn goes on: the run still waits on it.
    assert s.envelope(run_id).status == "needs_agent"


class _ManagedWriter:
    def __init__(self) -> None:
        self.outcomes: list[CallOutcome] = []

    def drive_turn(self, turn: dict[str, Any], call: Any) -> dict[str, Any]:
        self.outcomes.append(call(CallSpec("fs.write", CALL, frozenset())))
        return {"summary": "could not write"}


def test_a_managed_turn_change_under_ask_is_refused_not_paused(ws: Path) -> None:
    agent = _ManagedWriter()
    s = session(ws, agent_driver=agent)
    env = s.run("writer", authority=authority(effects="ask"), cwd=ws)
    assert env.outcome == "completed"  # the turn went on with the refusal
    (outcome,) = agent.outcomes
    assert outcome.code == "approval_required"
    assert "standing approval" in str((outcome.error or {})["message"])
    assert not (ws / "out.md").exists()
    # The refusal is recorded like any other refused call, and asks a person nothing.
    (record,) = [c for c in s.store.calls(env.run_id or "") if c.tool == "fs.write"]
    assert record.outcome == "refused" and record.result["error"]["code"] == "approval_required"
    assert [r.kind for r in s.store.requests(env.run_id or "")] == []


# -- the failure lane -----------------------------------------------------------------------


def test_a_turn_answered_with_failure_fails_the_step_with_its_scrubbed_reason(ws: Path) -> None:
    s = session(ws)
    env = s.run("writer", cwd=ws)
    run_id = env.run_id or ""
    reason = f"the note's folder is read-only\n(token {SECRET})"
    answer = {"request_digest": _turn_digest(s, run_id), "failure": {"reason": reason}}
    done = s.resume(run_id, {"answers": {"draft": answer}})
    assert done.status == "sealed" and done.outcome == "failed"
    assert done.refusal is not None and done.refusal.code == "agent_failed"
    assert done.refusal.step == "draft"
    assert "the note's folder is read-only" in done.refusal.message
    assert SECRET not in json.dumps(done.to_json())
    assert done.receipt_id is not None
    assert stored(ws / ".proctor" / "receipts")
    assert SECRET.encode() not in all_bytes(ws / ".proctor" / "receipts")
    assert "say" not in s.store.step_records(run_id)  # no later step ran


@pytest.mark.parametrize(
    "entry",
    [{"value": {"summary": "x"}, "failure": {"reason": "both"}}, {}, {"failure": {"reason": ""}}],
)
def test_an_answer_takes_value_or_failure_exactly_one(ws: Path, entry: dict[str, Any]) -> None:
    s = session(ws)
    env = s.run("writer", cwd=ws)
    run_id = env.run_id or ""
    before = store_bytes(ws)
    doc = {"answers": {"draft": {"request_digest": _turn_digest(s, run_id), **entry}}}
    with pytest.raises(ResumeRefused) as refused:
        s.resume(run_id, doc)
    assert refused.value.code == "resume_invalid"
    assert store_bytes(ws) == before


def test_failure_is_refused_for_a_persons_request(ws: Path) -> None:
    s = session(ws)
    env = s.run("writer", authority=authority(effects="ask"), cwd=ws)
    run_id = env.run_id or ""
    s.turn_call(run_id, "draft", "fs.write", CALL, "c1")
    request = (s.envelope(run_id).requests or [])[0]
    before = store_bytes(ws)
    doc = {
        "answers": {
            "draft/turn/c1": {
                "request_digest": request["request_digest"],
                "failure": {"reason": "no"},
            }
        }
    }
    with pytest.raises(ResumeRefused) as refused:
        s.resume(run_id, doc)
    assert refused.value.code == "wrong_lane"
    assert store_bytes(ws) == before


# -- cancelling a call ----------------------------------------------------------------------


class _TripAfter(threading.Event):
    """A cancel that is requested after ``n`` looks: the call is already in flight then."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.looks = 0
        self.n = n

    def is_set(self) -> bool:
        self.looks += 1
        return self.looks > self.n or super().is_set()


def test_a_cancelled_read_stops_in_flight(ws: Path) -> None:
    for i in range(50):
        (ws / "data").mkdir(exist_ok=True)
        (ws / "data" / f"f{i:03}.txt").write_text("needle\n")
    s = session(ws)
    env = s.run("writer", cwd=ws)
    run_id = env.run_id or ""
    cancel = _TripAfter(5)
    search = {"pattern": "needle", "path": "data"}
    stopped = s.turn_call(run_id, "draft", "fs.search", search, "c1", stop=cancel)
    assert stopped.status == "failed" and stopped.code == "call_cancelled"
    assert cancel.looks < 20  # it stopped early, not after all 50 files
    record = s.store.get_call(run_id, "draft/turn/c1")
    assert record is not None and record.result["cancel_requested"] is True
    # Not cancelled, the same search finds all 50.
    full = s.turn_call(run_id, "draft", "fs.search", search, "c2")
    assert full.ok and len(full.result["results"]) == 50


def test_a_cancelled_effect_runs_to_its_end_and_records_the_cancel(ws: Path) -> None:
    s = session(ws)
    env = s.run("writer", cwd=ws)
    run_id = env.run_id or ""
    cancel = _TripAfter(1)  # unset when the call is sent, set while it runs
    done = s.turn_call(run_id, "draft", "fs.write", CALL, "c1", stop=cancel)
    assert done.ok and (ws / "out.md").read_text() == "hello\n"
    record = s.store.get_call(run_id, "draft/turn/c1")
    assert record is not None and record.outcome == "completed"
    assert record.result["cancel_requested"] is True


def test_a_call_cancelled_before_it_is_sent_sends_nothing(ws: Path) -> None:
    s = session(ws)
    env = s.run("writer", cwd=ws)
    cancel = threading.Event()
    cancel.set()
    outcome = s.turn_call(env.run_id or "", "draft", "fs.write", CALL, "c1", stop=cancel)
    assert outcome.status == "refused" and outcome.code == "call_cancelled"
    assert not (ws / "out.md").exists()


# -- a request whose payload holds a secret -------------------------------------------------

CONFIG = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: read
        tool: fs.read
        inputs: {path: cfg.txt}
      - id: write
        tool: fs.write
        inputs: {path: cfg.txt, content: "token = (rotated)\\n",
                 expected_digest: $steps.read.content_digest}
"""


def test_a_request_shows_no_secret_names_what_it_hid_and_binds_the_exact_act(ws: Path) -> None:
    # The file holds a token the change removes: the diff's removed line holds it.
    make_skill(ws, "config", CONFIG)
    (ws / "cfg.txt").write_text(f"token = {SECRET}\n")
    s = session(ws)
    env = s.run("config", authority=authority(effects="ask"), cwd=ws)
    assert env.status == "needs_approval", env.refusal
    shown = json.dumps(env.to_json())
    assert SECRET not in shown
    (request,) = env.requests or []
    assert request["redacted"] and all(p.startswith("$.payload") for p in request["redacted"])
    # The digest is over the exact act (the secret included), not over the view.
    view = {k: v for k, v in request.items() if k not in ("request_digest", "redacted")}
    assert digest(view) != request["request_digest"]
    stored = next(r for r in s.store.requests(env.run_id or "") if r.address == "write")
    assert digest(stored.body) == request["request_digest"]
    done = s.resume(env.run_id or "", approve(env))
    assert done.outcome == "completed"
    assert (ws / "cfg.txt").read_text() == "token = (rotated)\n"
