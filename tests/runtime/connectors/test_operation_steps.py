"""Operation steps through admission: credential at the adapter, pinned egress, approvals,
idempotency keys and readback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.connectors.support import (
    CANARY,
    COMMENT,
    HOP,
    LABEL,
    LABEL_NO_KEY,
    READ,
    tracker_workspace,
)
from tests.runtime.connectors.tracker import TrackerServer
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    session,
)

INPUTS = {"issue": "7", "label": "bug"}
SECRETS = {"tracker": CANARY}


@pytest.fixture
def server() -> Iterator[TrackerServer]:
    running = TrackerServer()
    running.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
    try:
        yield running
    finally:
        running.stop()


def _everything(ws: Path) -> str:
    """Every byte proctor wrote under .proctor/ (run store, audit log, receipts)."""
    out = []
    for path in sorted((ws / ".proctor").rglob("*")):
        if path.is_file():
            out.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


def test_read_and_write_deliver_the_credential_only_at_the_adapter(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, READ, LABEL)
    env = session(ws).run("triage", inputs=INPUTS, cwd=ws, request_secrets=SECRETS)
    assert env.outcome == "completed", env.refusal
    assert server.tracker.writes == 1
    assert server.tracker.authorizations == [f"Bearer {CANARY}"] * 2
    # the provider key: a digest of connector, operation and key, never the bare key
    (key,) = server.tracker.idempotency_keys
    assert key.startswith("op:sha256:") and key != "7"
    text = json.dumps(env.to_json()) + _everything(ws)
    assert CANARY not in text
    assert '"usd_micro": 250' in text or '"usd_micro":250' in text  # the quote is recorded


def test_a_write_without_an_idempotency_key_is_refused_before_sending(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, LABEL_NO_KEY)
    env = session(ws).run("triage", inputs=INPUTS, cwd=ws, request_secrets=SECRETS)
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "idempotency_key_required"
    assert server.tracker.hits == {}


def test_approval_required_pauses_even_under_effects_allow(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, COMMENT)
    s = session(ws)
    env = s.run(
        "triage", inputs=INPUTS, cwd=ws, authority=authority(effects="allow"),
        request_secrets=SECRETS,
    )  # fmt: skip
    assert env.status == "needs_approval"
    (request,) = env.requests or []
    assert request["payload"]["operation"]["url"].endswith("/api/issues/7/comments")
    assert request["payload"]["operation"]["json"] == {"body": "bug"}
    assert server.tracker.hits == {}
    # a standing approval for the operation does not stand in for approval: required
    done = session(ws).resume(env.run_id or "", approve(env), request_secrets=SECRETS)
    assert done.outcome == "completed", done.refusal
    assert server.tracker.writes == 1


def test_standing_operations_approval_admits_under_effects_ask(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, LABEL)
    standing = [{"operations": {"names": ["tracker/*"]}}]
    granted = authority(effects="ask", standing_approvals=standing)
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, authority=granted, request_secrets=SECRETS
    )
    assert env.outcome == "completed", env.refusal
    other = authority(effects="ask", standing_approvals=[{"operations": {"names": ["other/*"]}}])
    ws2 = tracker_workspace(tmp_path / "ws2", server.tracker.url, LABEL)
    paused = session(ws2).run(
        "triage", inputs=INPUTS, cwd=ws2, authority=other, request_secrets=SECRETS
    )
    assert paused.status == "needs_approval"
    assert server.tracker.writes == 1


def test_a_hop_off_the_connectors_origin_is_refused_by_the_egress_guard(
    tmp_path: Path, server: TrackerServer
) -> None:
    elsewhere = TrackerServer()
    try:
        server.tracker.redirect_to = elsewhere.tracker.url + "/api/issues/7"
        # the other server is on loopback too, and the workspace allows loopback: only the
        # pin to the connector's origin (its port) stops the hop
        ws = tracker_workspace(tmp_path / "ws", server.tracker.url, HOP)
        env = session(ws).run("triage", inputs=INPUTS, cwd=ws, request_secrets=SECRETS)
        assert env.outcome == "failed" or env.outcome == "blocked"
        assert env.refusal is not None and env.refusal.code == "egress_refused"
        assert elsewhere.tracker.hits == {}
        assert server.tracker.hits == {"GET /redirect": 1}
    finally:
        elsewhere.stop()


def test_a_policy_rule_can_name_an_operation(tmp_path: Path, server: TrackerServer) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, LABEL)
    (ws / "proctor.toml").write_text(
        '[egress]\nallow = ["127.0.0.1"]\n[policy]\nguards = "guards.py"\n'
    )
    (ws / "guards.py").write_text(
        "from proctor.policy import GuardVerdict, register_guard\n\n"
        "@register_guard('deny_all')\n"
        "def deny_all(ctx):\n"
        "    return GuardVerdict(allowed=False, code='labels_by_people', message='no')\n"
    )
    (ws / "policies").mkdir()
    (ws / "policies" / "ops.yaml").write_text(
        "rules:\n"
        "  - id: no-labels\n"
        "    description: labels are set by people\n"
        "    guard: deny_all\n"
        "    enforcement: block\n"
        "    on_error: fail_closed\n"
        "    tools: [operation:tracker/issue.label]\n"
    )
    s = session(ws, trust_guards=True)
    env = s.run("triage", inputs=INPUTS, cwd=ws, request_secrets=SECRETS)
    assert env.outcome == "blocked", env
    assert env.refusal is not None and env.refusal.code == "labels_by_people"
    assert server.tracker.hits == {}


def test_effects_none_refuses_a_run_whose_steps_write_before_any_step(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, READ, LABEL)
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, authority=authority(effects="none"),
        request_secrets=SECRETS,
    )  # fmt: skip
    assert env.refusal is not None and env.refusal.code == "effects_none"
    assert "label (operation:tracker/issue.label)" in env.refusal.message
    assert server.tracker.hits == {}  # not even the read ran


def test_a_step_cannot_send_another_credential_with_an_operation(
    tmp_path: Path, server: TrackerServer
) -> None:
    other = LABEL.replace("idempotency_key:", "credential: other\n        idempotency_key:")
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, other)
    run_yaml = ws / "skills" / "triage" / "run.yaml"
    run_yaml.write_text(
        run_yaml.read_text().replace(
            "methods:",
            "  other:\n    provider: other\n    auth:\n"
            "      api_key: {delivery: {env: OTHER_TOKEN}}\nmethods:",
        )
    )
    env = session(ws).run(
        "triage", inputs=INPUTS, cwd=ws, request_secrets={**SECRETS, "other": "other-secret"}
    )
    assert env.refusal is not None and env.refusal.code == "credential_mismatch", env
    assert server.tracker.hits == {}


def test_an_operations_cost_is_reserved_against_the_spend_limit_before_sending(
    tmp_path: Path, server: TrackerServer
) -> None:
    # issue.label declares 250 micro-USD a call: under a 200 limit it is refused before
    # anything is sent; under 300 it runs and its spend is in the envelope.
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, LABEL)
    tight = authority(max_spend_micro_usd=200)
    env = session(ws).run("triage", inputs=INPUTS, cwd=ws, request_secrets=SECRETS, authority=tight)
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "cost_limit_exceeded"
    assert server.tracker.writes == 0
    roomy = authority(max_spend_micro_usd=300)
    ws2 = tracker_workspace(tmp_path / "ws2", server.tracker.url, LABEL)
    env = session(ws2).run(
        "triage", inputs=INPUTS, cwd=ws2, request_secrets=SECRETS, authority=roomy
    )
    assert env.outcome == "completed", env.refusal
    assert server.tracker.writes == 1
    assert env.spend_micro_usd == 250


def test_an_operation_without_a_price_is_refused_under_a_spend_limit(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, READ)
    limit = authority(max_spend_micro_usd=1000)
    env = session(ws).run("triage", inputs=INPUTS, cwd=ws, request_secrets=SECRETS, authority=limit)
    assert env.refusal is not None and env.refusal.code == "price_unknown"
    assert server.tracker.authorizations == []  # nothing was sent
