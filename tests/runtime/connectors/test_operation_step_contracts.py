"""An operation step's own ``approval: {reason, type}`` and ``result: {required}`` (the runx
reference's execution-profile fields), against the loopback tracker: the approval is asked
beside the floor (never weaker), a decline sends nothing, and a result lacking a required
field fails the step with a code naming the field, recorded in the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.cli.paint import inert
from proctor.runtime.engine.request_lines import request_lines
from tests.runtime.connectors.support import CANARY, tracker_workspace
from tests.runtime.connectors.tracker import TrackerServer
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    session,
)

INPUTS = {"issue": "7", "label": "bug"}
SECRETS = {"tracker": CANARY}
STANDING = [{"operations": {"names": ["tracker/*"]}}]


def _label(extra: str) -> str:
    return (
        "      - id: label\n"
        "        operation: tracker/issue.label\n"
        "        idempotency_key: $input.issue\n"
        "        inputs: {issue: $input.issue, label: $input.label}\n" + extra
    )


ASKS = _label(
    "        approval:\n"
    "          reason: Approve labelling this exact issue.\n"
    "          type: tracker_label\n"
)


@pytest.fixture
def server() -> Iterator[TrackerServer]:
    running = TrackerServer()
    running.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
    try:
        yield running
    finally:
        running.stop()


def _posts(server: TrackerServer) -> int:
    return sum(n for route, n in server.tracker.hits.items() if route.startswith("POST "))


def test_a_steps_approval_is_asked_even_where_the_floor_would_admit(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, ASKS)
    # effects: allow and a standing approval for the operation: the floor alone would send it
    granted = authority(effects="allow", standing_approvals=STANDING)
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, authority=granted, request_secrets=SECRETS
    )
    assert env.status == "needs_approval"
    (request,) = env.requests or []
    assert request["address"] == "label"
    assert request["reason"] == "Approve labelling this exact issue."
    assert request["approval_type"] == "tracker_label"
    assert request["payload"]["operation"]["json"] == {"label": "bug"}
    assert _posts(server) == 0
    done = session(ws).resume(env.run_id or "", approve(env), request_secrets=SECRETS)
    assert done.outcome == "completed", done.refusal
    assert server.tracker.writes == 1


def test_a_declined_step_approval_never_sends_the_operation(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, ASKS)
    granted = authority(effects="allow", standing_approvals=STANDING)
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, authority=granted, request_secrets=SECRETS
    )
    assert env.status == "needs_approval"
    done = session(ws).resume(
        env.run_id or "", approve(env, approved=False), request_secrets=SECRETS
    )
    assert done.outcome == "declined"
    assert done.refusal is not None and done.refusal.code == "approval_declined"
    assert _posts(server) == 0
    assert server.tracker.writes == 0
    assert server.tracker.issues["7"]["labels"] == []


def test_under_effects_ask_the_step_and_the_floor_ask_once(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, ASKS)
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, authority=authority(effects="ask"),
        request_secrets=SECRETS,
    )  # fmt: skip
    assert env.status == "needs_approval"
    (request,) = env.requests or []  # one request: one effect has one approval owner
    assert request["approval_type"] == "tracker_label"
    done = session(ws).resume(env.run_id or "", approve(env), request_secrets=SECRETS)
    assert done.outcome == "completed", done.refusal
    assert server.tracker.writes == 1


def test_without_a_step_approval_the_same_grant_sends_at_once(
    tmp_path: Path, server: TrackerServer
) -> None:
    # the control: the pause above is the step's approval, not the floor's
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, _label(""))
    granted = authority(effects="allow", standing_approvals=STANDING)
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, authority=granted, request_secrets=SECRETS
    )
    assert env.outcome == "completed", env.refusal
    assert server.tracker.writes == 1


def test_effects_none_refuses_a_step_asking_approval(tmp_path: Path, server: TrackerServer) -> None:
    # a person's approval never lifts effects: none
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, ASKS)
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, authority=authority(effects="none"),
        request_secrets=SECRETS,
    )  # fmt: skip
    assert env.status != "needs_approval"
    assert env.refusal is not None and env.refusal.code == "effects_none"
    assert _posts(server) == 0


def test_a_result_missing_a_required_field_fails_the_step_naming_it(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(
        tmp_path / "ws",
        server.tracker.url,
        _label("        result: {required: [id, receipt_url]}\n"),
    )
    s = session(ws)
    env = s.run(
        "triage", inputs=INPUTS, cwd=ws, authority=authority(effects="allow"),
        request_secrets=SECRETS,
    )  # fmt: skip
    assert env.outcome == "failed"
    assert env.refusal is not None
    assert env.refusal.code == "operation_result_incomplete"
    assert "'receipt_url'" in env.refusal.message
    assert env.refusal.step == "label"
    # the provider's act happened once and stays recorded as it settled
    assert server.tracker.writes == 1
    (call,) = s.store.step_calls(env.run_id or "", "label")
    assert call.state == "settled"
    record = s.store.step_records(env.run_id or "")["label"]
    assert "operation_result_incomplete" in repr(record)


def test_a_result_holding_every_required_field_completes(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(
        tmp_path / "ws", server.tracker.url, _label("        result: {required: [id, labels]}\n")
    )
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, authority=authority(effects="allow"),
        request_secrets=SECRETS,
    )  # fmt: skip
    assert env.outcome == "completed", env.refusal


def test_the_approval_reason_and_type_are_shown_inert() -> None:
    view = {
        "kind": "approval",
        "tool": "operation:tracker/issue.label",
        "reason": "Approve \x1b[2Jthis\u202e post",
        "approval_type": "tracker_label",
    }
    shown = "\n".join(inert(text) for _, text in request_lines("approval", view))
    assert "approval type: tracker_label" in shown
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "reason: Approve" in shown
