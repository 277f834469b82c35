"""A paused run's row keeps what its request rows do not: each unredacted request view is a
reference to its row and the answers template a marker, and every reader (``envelope``,
``history``, ``pending``) sees the same envelope the pause returned. A redacted view is kept
whole (a later process has not the run's taint), and a reference whose row was asked again
shows the reference alone, never the new body."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from proctor.contracts.values import replace
from proctor.runtime.engine.stored_envelope import (
    answers_template,
    compact,
    compact_trace,
    expand,
    is_reference,
    plain_view,
)
from proctor.runtime.engine.trace_window import TraceWindow
from proctor.runtime.records.runs import CallRecord, RequestRecord
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)
from tests.runtime.engine.test_driver_pause import ASK, EDIT

SECRET = "ghp_" + "c3D4" * 9

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


def _row(root: Path, run_id: str) -> dict[str, object]:
    conn = sqlite3.connect(root / ".proctor" / "runs.sqlite")
    try:
        (data,) = conn.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    finally:
        conn.close()
    return dict(json.loads(data))


def test_a_paused_row_keeps_references_and_readers_see_the_whole_envelope(
    tmp_path: Path,
) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "edit", EDIT)
    (ws / "n.md").write_text("old text\n" * 40)
    s = session(ws)
    env = s.run("edit", inputs={"file": "n.md"}, authority=authority(effects="ask"), cwd=ws)
    assert env.status == "needs_approval"
    run_id = env.run_id or ""
    kept = _row(ws, run_id)["envelope"]
    assert isinstance(kept, dict)
    (ref,) = kept["requests"]
    assert is_reference(ref) and "payload" not in ref  # the diff lives in the request row
    assert kept["answers_template"] == {"stored": "requests"}
    assert kept["trace"] == {"stored": "calls", "count": 1}  # the read's call row
    again = session(ws)  # another process's reader
    assert again.envelope(run_id).to_json() == env.to_json()
    assert "old text" in json.dumps(env.to_json())  # what was left out is shown again
    assert [t.step for t in env.trace] == ["read"]
    done = again.resume(run_id, approve(again.envelope(run_id)))
    assert done.outcome == "completed" and (ws / "n.md").read_text() == "new text\n"
    sealed = _row(ws, run_id)["envelope"]
    assert sealed["trace"] == {"stored": "calls", "count": 2}  # type: ignore[index]
    assert session(ws).envelope(run_id).to_json() == done.to_json()
    assert [t.step for t in done.trace] == ["read", "write"]


def test_questions_rebuild_their_answers_template(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "ask", ASK)
    s = session(ws)
    env = s.run("ask", cwd=ws)
    answers = approve(env)
    env = s.resume(env.run_id or "", answers)
    assert env.status == "needs_approval"
    assert _row(ws, env.run_id or "")["envelope"]["answers_template"] == {  # type: ignore[index]
        "stored": "requests"
    }
    template = session(ws).envelope(env.run_id or "").answers_template or {}
    assert template == env.answers_template
    assert set(template["approvals"]["pick"]["value"]) == {"colour", "note"}


def test_a_redacted_view_is_kept_whole_and_the_secret_is_nowhere_in_the_row(
    tmp_path: Path,
) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "config", CONFIG)
    (ws / "cfg.txt").write_text(f"token = {SECRET}\n")
    s = session(ws)
    env = s.run("config", authority=authority(effects="ask"), cwd=ws)
    assert env.status == "needs_approval"
    kept = _row(ws, env.run_id or "")["envelope"]
    (view,) = kept["requests"]  # type: ignore[index]
    assert not is_reference(view) and view["redacted"]
    assert SECRET not in json.dumps(kept)
    shown = session(ws).envelope(env.run_id or "")
    assert shown.to_json() == env.to_json() and SECRET not in json.dumps(shown.to_json())


def _request(address: str, digest: str, **body: object) -> RequestRecord:
    return RequestRecord("r", address, "approval", digest, {"kind": "approval", **body})


def test_a_request_asked_again_shows_its_reference_never_the_new_body() -> None:
    first = _request("write", "sha256:1", payload={"diff": "a"})
    doc = {
        "requests": [plain_view(first)],
        "answers_template": answers_template([first]),
        "status": "needs_approval",
    }
    kept = compact(doc, [first])
    assert expand(kept, [first]) == doc
    asked_again = _request("write", "sha256:2", payload={"diff": "b"})
    shown = expand(kept, [asked_again])
    assert shown["requests"] == [
        {"address": "write", "kind": "approval", "request_digest": "sha256:1"}
    ]
    assert "b" not in json.dumps(shown) and shown["answers_template"] == {
        "schema": "proctor.resume.v1"
    }


def test_a_row_written_before_references_reads_as_it_is() -> None:
    first = _request("write", "sha256:1", payload={"diff": "a"})
    whole = {"requests": [plain_view(first)], "answers_template": answers_template([first])}
    assert expand(whole, []) is whole


def test_a_trace_is_kept_whole_when_a_call_is_unsettled_or_it_differs() -> None:
    settled = CallRecord("r", "a/1", "a", "echo", "settled", "d", result={"status": "completed"})
    claimed = CallRecord("r", "b/1", "b", "fs.write", "claimed", "d")
    entry = {
        "step": "a",
        "tool": "echo",
        "call_id": "a/1",
        "outcome": "completed",
        "code": None,
        "message": None,
        "warnings": [],
        "receipt_id": None,
    }
    doc = {"trace": [entry]}
    assert compact_trace(doc, [settled]) == {"trace": {"stored": "calls", "count": 1}}
    assert compact_trace(doc, [settled, claimed]) is doc  # a claim may settle later
    scrubbed = {"trace": [{**entry, "message": "[REDACTED]"}]}
    assert compact_trace(scrubbed, [settled]) is scrubbed  # the sanitizer changed it
    # the entries as the seal dumped them: the same answers, from them
    window = TraceWindow().extend([replace(settled, seq=1)])
    dumped = [e.model_dump() for e in window.entries()]
    assert dumped == [entry]
    assert compact_trace(doc, window, dumped=dumped) == {"trace": {"stored": "calls", "count": 1}}
    assert compact_trace(scrubbed, window, dumped=dumped) is scrubbed
