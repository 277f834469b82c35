"""Deadlines and the two-person rule, on a real SQLite store: an expiring request is decided
``expired`` by its default (run store, audit log, receipt), a run past its deadline stops, and
an approval that needs two people is released only by two different ones."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ResumeRefused, UsageError
from proctor.runtime.engine.approvals import decide, shown_request
from proctor.runtime.engine.upkeep import settle
from proctor.runtime.records.outbox import Outbox
from tests.receipt_files import stored
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  ship:
    description: Ship once approved.
    steps:
      - id: confirm
        ask: {reason: Ship it?, expires_in: 60}
      - id: say
        tool: echo
        inputs: {text: shipped}
  yes:
    description: Ship unless someone says no in time.
    steps:
      - id: confirm
        ask: {reason: Ship it?, expires_in: 60, on_expiry: approve}
      - id: say
        tool: echo
        inputs: {text: shipped}
  two:
    description: Ship once two people approve.
    steps:
      - id: confirm
        ask: {reason: Ship it?, approvals: 2}
      - id: say
        tool: echo
        inputs: {text: shipped}
  plain:
    description: Ship once approved.
    steps:
      - id: confirm
        ask: {reason: Ship it?}
      - id: say
        tool: echo
        inputs: {text: shipped}
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "gate", RUN_YAML)
    return ws


def _audit(root: Path) -> list[dict[str, Any]]:
    text = (root / ".proctor" / "audit.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _receipt(root: Path, receipt_id: str) -> dict[str, Any]:
    return dict(json.loads(stored(root / ".proctor" / "receipts")[receipt_id])["body"])


def test_an_expired_request_is_declined_by_its_default_and_recorded(root: Path) -> None:
    s = session(root)
    env = s.run("gate#ship", authority=authority(effects="ask"), cwd=root)
    assert env.status == "needs_approval"
    assert env.requests[0]["expires_in"] == 60
    settle(s, now=time.time() + 30)  # not yet
    assert s.store.get_run(env.run_id).status == "needs_approval"  # type: ignore[union-attr]
    settle(s, now=time.time() + 61)
    run = s.store.get_run(env.run_id)
    assert run is not None and (run.status, run.outcome) == ("sealed", "declined")
    (request,) = s.store.requests(env.run_id)
    assert request.decision is not None
    assert request.decision["decided_by"] == "deadline"
    assert request.decision["reason"] == "expired" and request.decision["approved"] is False
    events = _audit(root)
    expired = [e for e in events if e["event"] == "request_expired"]
    assert len(expired) == 1 and expired[0]["on_expiry"] == "decline"
    assert any(e["event"] == "decision_recorded" and e["decided_by"] == "deadline" for e in events)
    assert run.receipt_id is not None
    receipt = _receipt(root, run.receipt_id)
    assert receipt["seal_reason"] == "approval_expired"
    tree = b"".join(stored(root / ".proctor" / "receipts").values())
    assert b"decided_by:deadline" in tree  # the step's receipt names who decided
    settle(s, now=time.time() + 120)  # settled once: nothing more happens
    assert len([e for e in _audit(root) if e["event"] == "request_expired"]) == 1


def test_on_expiry_approve_releases_the_step_when_the_step_says_so(root: Path) -> None:
    s = session(root)
    env = s.run("gate#yes", authority=authority(effects="ask"), cwd=root)
    settle(s, now=time.time() + 61)
    run = s.store.get_run(env.run_id)
    assert run is not None and (run.status, run.outcome) == ("sealed", "completed")
    (request, *_) = s.store.requests(env.run_id)
    assert request.decision is not None and request.decision["decided_by"] == "deadline"
    assert request.decision["approved"] is True


def test_a_person_deciding_first_wins_over_the_deadline(root: Path) -> None:
    s = session(root)
    env = s.run("gate#ship", authority=authority(effects="ask"), cwd=root)
    s.resume(env.run_id, approve(env), decided_by="os:alice")
    settle(s, now=time.time() + 61)
    run = s.store.get_run(env.run_id)
    assert run is not None and run.outcome == "completed"
    assert not [e for e in _audit(root) if e["event"] == "request_expired"]


def test_the_workspace_default_deadline_declines(root: Path) -> None:
    (root / "proctor.toml").write_text("[approvals]\nexpires_in = 5\n")
    s = session(root)
    env = s.run("gate#plain", authority=authority(effects="ask"), cwd=root)
    settle(s, now=time.time() + 6)
    run = s.store.get_run(env.run_id)
    assert run is not None and run.outcome == "declined"


def test_the_authority_expires_in_is_stated_in_the_request(root: Path) -> None:
    s = session(root)
    env = s.run("gate#plain", authority=authority(effects="ask", expires_in=7), cwd=root)
    assert (env.requests[0]["expires_in"], env.requests[0]["on_expiry"]) == (7, "decline")


def test_a_run_past_its_deadline_stops_before_its_next_step(root: Path) -> None:
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    s = session(root)
    env = s.run("gate#plain", authority=authority(effects="allow", deadline=past), cwd=root)
    assert (env.status, env.outcome) == ("sealed", "failed")
    assert env.refusal is not None and env.refusal.code == "run_deadline_passed"
    assert s.store.step_records(env.run_id) == {}  # no step ran


def test_a_paused_run_past_its_deadline_is_stopped_by_the_next_settle(root: Path) -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=30)).isoformat()
    s = session(root)
    env = s.run("gate#plain", authority=authority(effects="ask", deadline=soon), cwd=root)
    assert env.status == "needs_approval"
    settle(s, now=time.time() + 31)
    run = s.store.get_run(env.run_id)
    assert run is not None and (run.status, run.outcome) == ("sealed", "failed")
    receipt = _receipt(root, str(run.receipt_id))
    assert receipt["seal_reason"] == "deadline_passed"
    assert any(e["event"] == "run_deadline_passed" for e in _audit(root))


def test_an_authority_deadline_without_an_offset_is_refused() -> None:
    with pytest.raises(UsageError) as caught:
        authority(deadline="2026-01-01T00:00:00")
    assert caught.value.code == "authority_invalid"


def test_two_people_release_the_step_one_or_the_same_twice_does_not(root: Path) -> None:
    s = session(root)
    env = s.run("gate#two", authority=authority(effects="ask"), cwd=root)
    shown = shown_request(s, env.run_id)
    assert shown.view["approvals"] == 2
    digest = shown.request_digest

    def yes(who: str) -> Any:
        return decide(s, env.run_id, "confirm", request_digest=digest, approve=True, decided_by=who)

    waiting = yes("os:alice")
    assert waiting.status == "needs_approval"  # one person: still waiting
    # the way on is another person's approval, never a resume that would be refused
    assert waiting.resume_command == f"proctor approve {env.run_id} confirm"
    assert any("os:alice (1 of 2 distinct people)" in note for note in waiting.notes)
    assert yes("os:alice").status == "needs_approval"  # the same person again counts once
    assert s.store.step_records(env.run_id).get("say") is None
    done = yes("console:bob")  # a second, different person releases it
    assert (done.status, done.outcome) == ("sealed", "completed")
    (request, *_) = s.store.requests(env.run_id)
    assert request.decision is not None
    assert request.decision["decided_by"] == "os:alice+console:bob"
    counted = [e for e in _audit(root) if e["event"] == "approval_counted"]
    assert [(e["decided_by"], e["counted"], e["approvers"]) for e in counted] == [
        ("os:alice", True, 1), ("os:alice", False, 1), ("console:bob", True, 2),
    ]  # fmt: skip


def test_a_hand_written_resume_cannot_skip_the_second_person(root: Path) -> None:
    s = session(root)
    env = s.run("gate#two", authority=authority(effects="ask"), cwd=root)
    before = s.store.requests(env.run_id)
    with pytest.raises(ResumeRefused) as caught:
        s.resume(env.run_id, approve(env), decided_by="os:alice")
    assert caught.value.code == "approvals_needed"
    assert s.store.requests(env.run_id)[0].decision == before[0].decision is None
    with pytest.raises(ResumeRefused):
        s.resume(env.run_id, approve(env))  # no identity at all


def test_min_approvers_in_the_authority_makes_every_ask_need_two(root: Path) -> None:
    s = session(root)
    env = s.run("gate#plain", authority=authority(effects="ask", min_approvers=2), cwd=root)
    assert env.requests[0]["approvals"] == 2
    digest = env.requests[0]["request_digest"]
    waiting = decide(
        s, env.run_id, "confirm", request_digest=digest, approve=True, decided_by="os:a"
    )
    assert waiting.status == "needs_approval"


def test_a_decline_by_one_person_declines(root: Path) -> None:
    s = session(root)
    env = s.run("gate#two", authority=authority(effects="ask"), cwd=root)
    digest = env.requests[0]["request_digest"]
    done = decide(
        s, env.run_id, "confirm", request_digest=digest, approve=False, decided_by="os:carol"
    )
    assert done.outcome == "declined"


def test_deadline_timers_live_in_the_outbox(root: Path) -> None:
    s = session(root)
    env = s.run("gate#ship", authority=authority(effects="ask"), cwd=root)
    (timer,) = Outbox(s.store).entries()
    assert (timer.channel, timer.run_id, timer.address) == ("@deadline", env.run_id, "confirm")
    s.resume(env.run_id, {"schema": "proctor.resume.v1"})  # a resume that re-pauses
    (again,) = Outbox(s.store).entries()
    assert again.due_at == timer.due_at  # the deadline did not move


WRITE_YAML = """minimum_proctor: 0.1.0
methods:
  write:
    description: Write the notes once two people approve.
    steps:
      - id: put
        tool: fs.write
        reason: Start the notes.
        approvals: 2
        expires_in: 120
        inputs: {path: notes.md, content: "first\\n", create: true}
"""


def test_a_tool_step_held_by_the_floor_needs_two_people_too(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "floor")
    make_skill(root, "writer", WRITE_YAML)
    s = session(root)
    env = s.run("writer#write", authority=authority(effects="ask"), cwd=root)
    (request,) = env.requests
    assert (request["approvals"], request["expires_in"], request["on_expiry"]) == (
        2,
        120,
        "decline",
    )
    digest = request["request_digest"]

    def yes(who: str) -> Any:
        return decide(s, env.run_id, "put", request_digest=digest, approve=True, decided_by=who)

    assert yes("os:alice").status == "needs_approval"
    assert not (root / "notes.md").exists()  # one approver: nothing written
    assert yes("os:alice").status == "needs_approval"
    assert not (root / "notes.md").exists()  # the same person twice: still nothing
    assert yes("os:bob").outcome == "completed"
    assert (root / "notes.md").read_text() == "first\n"


def test_who_approved_so_far_is_shown_beside_the_request(root: Path) -> None:
    s = session(root)
    env = s.run("gate#two", authority=authority(effects="ask"), cwd=root)
    digest = env.requests[0]["request_digest"]
    assert shown_request(s, env.run_id).view["approved_so_far"] == []
    decide(s, env.run_id, "confirm", request_digest=digest, approve=True, decided_by="os:alice")
    shown = shown_request(s, env.run_id)
    assert shown.view["approved_so_far"] == ["os:alice"]
    assert shown.request_digest == digest  # what was approved is still exactly this request
    assert any("os:alice" in text for _, text in shown.lines())


def test_approvals_counted_for_one_digest_do_not_carry_to_another() -> None:
    from proctor.runtime.engine.decisions import approvers_of
    from proctor.runtime.records.runs import RunRecord

    counted = {"confirm": {"request_digest": "sha256:aa", "people": ["os:alice"]}}
    record = RunRecord(
        run_id="r", skill="s", method="m", status="needs_approval", data={"approvers": counted}
    )
    assert approvers_of(record, "confirm", "sha256:aa") == ["os:alice"]
    assert approvers_of(record, "confirm", "sha256:bb") == []  # the request changed: start over
    assert approvers_of(record, "other", "sha256:aa") == []


def test_a_deadline_never_approves_for_two_people(root: Path) -> None:
    from proctor.contracts.skill import AskSpec

    with pytest.raises(ValueError, match="never approves"):
        AskSpec.model_validate(
            {"reason": "Ship?", "approvals": 2, "expires_in": 5, "on_expiry": "approve"}
        )
    s = session(root)  # the authority asks two people of a step whose default is approve
    env = s.run("gate#yes", authority=authority(effects="ask", min_approvers=2), cwd=root)
    assert (env.requests[0]["approvals"], env.requests[0]["on_expiry"]) == (2, "decline")
