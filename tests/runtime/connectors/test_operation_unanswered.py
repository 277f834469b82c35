"""A connector write whose answer never comes is reconciled by its declared readback before it
is settled (issue 31, item 4): the provider applied it, the readback confirms it, the step
completes, and a new run with the same key sends nothing. Where the readback does not confirm
it, a person is asked; a write that never left is not such a case."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from proctor.errors import ToolFailed
from proctor.runtime.boundary.egress import EgressLimits
from proctor.runtime.connectors.operations import _maybe_sent
from proctor.runtime.tools.http import send
from tests.runtime.connectors.support import CANARY, LABEL, READ, tracker_workspace
from tests.runtime.connectors.tracker import TrackerServer


def _proctor(ws: Path, *args: str, stdin: str | None = None) -> Any:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PROCTOR_HOME": str(ws / ".home"),
        "TRACKER_TOKEN": CANARY,
    }
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws, env=env, input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _triage(ws: Path, url: str | None = None, issue: str = "7") -> Any:
    """``proctor run triage`` (with ``url``: in a new tracker workspace at ``ws``, the
    envelope it printed)."""
    if url is None:
        return _proctor(ws, "run", "triage", "-i", "issue=7", "-i", "label=bug", "--json")
    tracker_workspace(ws, url, READ, LABEL)
    out = _proctor(ws, "run", "triage", "-i", f"issue={issue}", "-i", "label=bug", "--json")
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def _resume(ws: Path, run_id: str, answers: str) -> Any:
    out = _proctor(ws, "resume", run_id, "-", "--json", stdin=answers)
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def test_an_unanswered_write_the_provider_applied_is_confirmed_by_readback(
    tmp_path: Path,
) -> None:
    server = TrackerServer()
    try:
        tracker = server.tracker
        tracker.issues["7"] = {"id": "7", "title": "Lost", "labels": [], "comments": []}
        tracker.answer_writes = "drop"
        ws = tracker_workspace(tmp_path / "ws", tracker.url, READ, LABEL)
        out = _triage(ws)
        doc = json.loads(out.stdout)
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert doc["outcome"] == "completed", doc
        assert tracker.writes == 1
        assert tracker.hits["GET /api/issues/7"] == 2  # the read step, then the readback
        events = [json.loads(x) for x in (ws / ".proctor" / "audit.jsonl").read_text().splitlines()]
        assert any(e["event"] == "call_outcome_unknown" for e in events)

        tracker.answer_writes = "yes"
        again = json.loads(_triage(ws).stdout)
        assert again["outcome"] == "completed"
        assert tracker.writes == 1  # the same key: already done, never sent again
        assert _proctor(ws, "audit", "verify").returncode == 0
        assert _proctor(ws, "verify", doc["receipt_id"]).returncode == 0
        for text in (out.stdout, out.stderr):
            assert CANARY not in text
    finally:
        server.stop()


def test_an_unanswered_write_the_readback_cannot_confirm_asks_a_person(tmp_path: Path) -> None:
    server = TrackerServer()
    try:
        tracker = server.tracker
        tracker.issues["7"] = {"id": "7", "title": "Lost", "labels": [], "comments": []}
        tracker.answer_writes = "lose"  # the connection closes and nothing was applied
        ws = tracker_workspace(tmp_path / "ws", tracker.url, READ, LABEL)
        out = _triage(ws)
        assert out.returncode == 10, (out.stdout, out.stderr)
        doc = json.loads(out.stdout)
        assert [r["address"] for r in doc["requests"]] == ["label/retry"]
        assert tracker.writes == 1  # sent once, not again without a person
    finally:
        server.stop()


def test_a_timed_out_write_counts_as_sent_a_refused_connect_does_not(tmp_path: Path) -> None:
    server = TrackerServer()
    try:
        server.tracker.answer_writes = "hold"
        limits = EgressLimits(connect_s=2.0, read_s=0.3, total_s=5.0)
        with httpx.Client(timeout=httpx.Timeout(0.3, connect=2.0)) as client:
            request = client.build_request("POST", f"{server.tracker.url}/api/issues/7/labels",
                                           json={"label": "bug"})  # fmt: skip
            try:
                send(client, request, limits=limits, deadline=time.monotonic() + 5)
            except ToolFailed as exc:
                timed_out = exc
            else:
                raise AssertionError("the held answer should time out")
        assert timed_out.code == "http_timeout" and _maybe_sent(timed_out)
        assert server.tracker.writes == 1
    finally:
        server.tracker.release.set()
        server.stop()
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with httpx.Client(timeout=2.0) as client:
        request = client.build_request("POST", f"http://127.0.0.1:{port}/x", json={})
        try:
            send(client, request, limits=EgressLimits(), deadline=time.monotonic() + 5)
        except ToolFailed as exc:
            refused = exc
        else:
            raise AssertionError("nothing listens there")
    assert not _maybe_sent(refused)


def _answered(doc: dict[str, Any], retry: bool) -> str:
    answers = json.loads(json.dumps(doc["answers_template"]))
    for entry in answers["approvals"].values():
        entry["value"] = {"retry": retry}
    return json.dumps(answers)


def test_a_retry_question_answered_on_resume_is_not_asked_again(tmp_path: Path) -> None:
    # The question asked of a write whose answer never came tells that story; the resume that
    # carries the person's answer must ask it in the same words (the same digest), or the
    # answer names a question no longer asked and the run asks for ever.
    server = TrackerServer()
    try:
        tracker = server.tracker
        for issue in ("7", "8"):
            tracker.issues[issue] = {"id": issue, "title": "Lost", "labels": [], "comments": []}
        tracker.answer_writes = "lose"
        sent = _triage(tmp_path / "a", tracker.url)
        assert [r["address"] for r in sent["requests"]] == ["label/retry"]
        assert "answer" in sent["requests"][0]["question"]  # its own story, not a stop
        assert tracker.writes == 1
        tracker.answer_writes = "yes"
        # send again: it is sent once more, and the run completes without asking again
        again = _resume(tmp_path / "a", sent["run_id"], _answered(sent, retry=True))
        assert again.get("requests") in (None, []), again.get("requests")
        assert again["outcome"] == "completed", again
        assert tracker.writes == 2
        assert tracker.issues["7"]["labels"] == ["bug"]
        # do not send again: the run ends retry_declined, and nothing more was sent
        tracker.answer_writes = "lose"
        kept = _triage(tmp_path / "b", tracker.url, issue="8")
        assert tracker.writes == 3
        declined = _resume(tmp_path / "b", kept["run_id"], _answered(kept, retry=False))
        assert declined.get("requests") in (None, []), declined.get("requests")
        assert declined["refusal"]["code"] == "retry_declined", declined
        assert tracker.writes == 3
    finally:
        server.stop()
