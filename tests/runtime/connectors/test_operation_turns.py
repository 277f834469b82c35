"""``calls.operations`` offers operations to an agent turn; each call is admitted like any."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.runtime.home.credentials import CredentialStore
from tests.runtime.connectors.support import CANARY, tracker_workspace
from tests.runtime.connectors.tracker import TrackerServer
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    session,
)

TURN = """      - id: draft
        agent:
          instructions: Label the issue.
          inputs: {{issue: $input.issue}}
          calls: {{operations: [{offered}]}}
"""


@pytest.fixture
def server() -> Iterator[TrackerServer]:
    running = TrackerServer()
    running.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
    try:
        yield running
    finally:
        running.stop()


def _paused(tmp_path: Path, server: TrackerServer, offered: str) -> tuple[Path, str]:
    ws = tracker_workspace(tmp_path / "ws", server.tracker.url, TURN.format(offered=offered))
    CredentialStore(ws / ".home").set("tracker", "work", CANARY)
    CredentialStore(ws / ".home").bind_package("work", "local:skills/triage")
    env = session(ws).run("triage", inputs={"issue": "7", "label": "bug"}, cwd=ws)
    assert env.status == "needs_agent", env.refusal
    return ws, env.run_id or ""


def test_a_glob_offers_every_operation_of_the_connector(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws, run_id = _paused(tmp_path, server, "tracker/*")
    s = session(ws)
    # the envelope as every reader rebuilds it (the run row keeps a request by reference)
    (turn,) = s.envelope(run_id).to_json()["requests"]
    assert {"operation:tracker/issue.read", "operation:tracker/issue.label"} <= set(
        turn["allowance"]["tools"]
    )
    read = s.turn_call(run_id, "draft", "operation:tracker/issue.read", {"issue": "7"}, "r1")
    assert read.ok, read.error
    assert read.result["result"]["title"] == "Crash"
    no_key = s.turn_call(
        run_id, "draft", "operation:tracker/issue.label", {"issue": "7", "label": "bug"}, "w1"
    )
    assert no_key.code == "idempotency_key_required"
    assert server.tracker.writes == 0
    args = {"issue": "7", "label": "bug", "idempotency_key": "triage-7"}
    wrote = s.turn_call(run_id, "draft", "operation:tracker/issue.label", args, "w2")
    assert wrote.ok, wrote.error
    again = s.turn_call(run_id, "draft", "operation:tracker/issue.label", args, "w3")
    assert again.ok and again.already_done is not None  # the same key: not sent again
    assert server.tracker.writes == 1
    assert server.tracker.authorizations == [f"Bearer {CANARY}"] * 2


def test_an_operation_not_offered_is_refused_and_not_sent(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws, run_id = _paused(tmp_path, server, "tracker/issue.read")
    args = {"issue": "7", "label": "bug", "idempotency_key": "k"}
    refused = session(ws).turn_call(run_id, "draft", "operation:tracker/issue.label", args, "w")
    assert refused.code == "tool_not_allowed"
    assert server.tracker.hits == {}
