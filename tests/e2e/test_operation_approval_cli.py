"""A connector write waiting on a person, through the real CLI: ``proctor approve`` (in the
terminal's words) and ``proctor pending --json`` show its method, URL, body, idempotency key
and readback, the credential only by name; nothing reaches the provider before the decision."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Ws
from tests.runtime.connectors.support import CONNECTOR, LABEL, RUN_YAML
from tests.runtime.connectors.tracker import TrackerServer

SECRET = "canary-cli-operation-3c9e"


@pytest.fixture
def tracker() -> Iterator[TrackerServer]:
    running = TrackerServer()
    running.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
    try:
        yield running
    finally:
        running.stop()


def test_a_connector_write_shows_its_whole_request_in_the_terminal_and_pending_json(
    ws: Ws, tracker: TrackerServer
) -> None:
    (ws.root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    pkg = ws.root / "skills" / "triage"
    (pkg / "connectors" / "tracker").mkdir(parents=True)
    (pkg / "SKILL.md").write_text("---\nname: triage\ndescription: Label issues.\n---\n")
    (pkg / "run.yaml").write_text(RUN_YAML.format(steps=LABEL))
    (pkg / "connectors" / "tracker" / "connector.yaml").write_text(
        CONNECTOR.format(url=tracker.tracker.url)
    )
    env = {"TRACKER_TOKEN": SECRET}
    run = ws.proctor(
        "run", "skills/triage", "-i", "issue=7", "-i", "label=bug",
        "--run-authority", '{"effects": "ask"}', "--json", env=env,
    )  # fmt: skip
    assert run.code == 10, run.stderr
    run_id = run.json()["run_id"]
    url = tracker.tracker.url.rstrip("/") + "/api/issues/7/labels"

    pending = ws.proctor("pending", "--json")
    (request,) = pending.json()["requests"]
    op = request["payload"]["operation"]
    assert (op["method"], op["url"], op["json"], op["idempotency_key"]) == (
        "POST", url, {"label": "bug"}, "7",
    )  # fmt: skip
    assert op["readback"]["tool"] == "operation:tracker/issue.read"
    assert op["credential_name"] == "tracker"

    shown = ws.proctor("decline", run_id, "--yes", "--digest", request["request_digest"])
    for expected in (
        "connector: tracker",
        f"POST {url}",
        '"label": "bug"',
        "idempotency key: 7",
        "Idempotency-Key: op:sha256:",
        "Authorization: (credential tracker, added when sent; not shown)",
        "readback (how the write is checked):",
    ):
        assert expected in shown.stdout, (expected, shown.stdout)
    for text in (run.stdout, run.stderr, pending.stdout, shown.stdout, shown.stderr):
        assert SECRET not in text
    assert tracker.tracker.hits == {}  # declined: nothing was ever sent
