"""Every kind of request shows every field its digest covers: the request body in the store
(the document the request digest is computed over) is walked leaf by leaf, and each leaf must
be in what a person is shown, in the terminal (``proctor approve``'s renderer) and in the lines
the console paints. Real runs, real store; one request per kind."""

from __future__ import annotations

import html
import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.receipts.canonical import digest
from proctor.runtime.engine.approvals import shown_request
from tests.runtime.boundary.sandbox_support import needs_bwrap
from tests.runtime.connectors.support import COMMENT, LABEL, tracker_workspace
from tests.runtime.connectors.tracker import TrackerServer
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

pytestmark = needs_bwrap

STEPS = {
    "fs": """      - id: put
        tool: fs.write
        reason: Write the page.
        inputs: {path: page.txt, content: "new line\\n", create: true}
""",
    "command": """      - id: run
        tool: command.execute
        reason: List it.
        inputs: {argv: [ls, -la, "two words"], cwd: ., timeout_seconds: 30}
""",
    "http": """      - id: send
        tool: http.request
        reason: Post the note.
        inputs:
          method: POST
          url: http://127.0.0.1:9/notes
          headers: {X-Trace: abc-123}
          json: {note: hello, count: 3, tags: [a, b], nested: {ok: true, none: null}}
""",
    "store": """      - id: keep
        tool: store.key.put
        reason: Keep the count.
        idempotency_key: count-1
        inputs: {key: counter, value: {n: 41, label: forty-one}}
""",
    "process": """      - id: serve
        tool: process.start
        reason: Start the server.
        inputs: {command: PYTHON, args: ["-c", "print('up')"]}
""",
    "worker": """      - id: work
        worker: {module: scripts/work.py, function: main, write: true}
        inputs: {name: made.txt}
""",
}

WORKER = """
def main(inputs, ctx):
    open(inputs["name"], "w").write("x")
    return {"made": inputs["name"]}
"""


def _leaves(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, f"{path}/{index}")
    else:
        yield path, node


def _shows(text: str, leaf: Any) -> bool:
    if isinstance(leaf, str) and "\n" in leaf:  # a diff: the console shows it line by line
        return all(_shows(text, line) for line in leaf.splitlines())
    if isinstance(leaf, str):
        return leaf in text or json.dumps(leaf, ensure_ascii=False)[1:-1] in text
    return json.dumps(leaf) in text


def _terminal(shown: Any) -> str:
    from rich.console import Console

    from proctor.cli.approve import render_request

    buffer = io.StringIO()
    render_request(Console(file=buffer, highlight=False, emoji=False, width=400), shown)
    return buffer.getvalue()


def _page(s: Any, run_id: str, address: str) -> str:
    """The console's request page as its text (the real template, tags dropped)."""
    from proctor.console.app import page_templates
    from proctor.console.pages import request_page

    page = page_templates().get_template("request.html")
    markup = page.render(person=None, **request_page(s, run_id, address))
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def _check(ws: Path, run_id: str) -> dict[str, Any]:
    s = session(ws)
    (request,) = s.store.requests(run_id)
    assert digest(request.body) == request.request_digest  # the body is what the digest covers
    shown = shown_request(s, run_id, request.address)
    terminal = _terminal(shown)
    console = _page(s, run_id, request.address)
    missing = {
        medium: [
            p for p, leaf in _leaves(request.body) if leaf is not None and not _shows(text, leaf)
        ]
        for medium, text in (("terminal", terminal), ("console", console))
    }
    assert missing == {"terminal": [], "console": []}, terminal
    return dict(request.body)


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_each_request_kind_shows_every_field_its_digest_covers(tmp_path: Path, kind: str) -> None:
    ws = make_workspace(tmp_path / "ws")
    steps = STEPS[kind].replace("PYTHON", json.dumps(sys.executable))
    make_skill(ws, "k", f"minimum_proctor: 0.1.0\nmethods:\n  main:\n    steps:\n{steps}")
    if kind == "worker":
        (ws / "skills" / "k" / "scripts").mkdir()
        (ws / "skills" / "k" / "scripts" / "work.py").write_text(WORKER)
    env = session(ws).run("k", cwd=ws, authority=authority(effects="ask"))
    assert env.status == "needs_approval", env.refusal
    body = _check(ws, env.run_id or "")
    assert body["payload"], body


@pytest.fixture
def tracker() -> Iterator[TrackerServer]:
    running = TrackerServer()
    running.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("step", [LABEL, COMMENT], ids=["write_with_readback", "approval_required"])
def test_a_connector_operation_shows_its_whole_request(
    tmp_path: Path, tracker: TrackerServer, step: str
) -> None:
    ws = tracker_workspace(tmp_path / "ws", tracker.tracker.url, step)
    env = session(ws).run(
        "triage", inputs={"issue": "7", "label": "bug"}, cwd=ws,
        authority=authority(effects="ask"), request_secrets={"tracker": "canary-op-secret"},
    )  # fmt: skip
    assert env.status == "needs_approval", env.refusal
    body = _check(ws, env.run_id or "")
    op = body["payload"]["operation"]
    assert op["connector"] == "tracker" and op["origin"] == tracker.tracker.url.rstrip("/")
    assert op["method"] == "POST" and op["url"].startswith(tracker.tracker.url.rstrip("/"))
    assert op["idempotency_key"] == "7" and op["headers"]["Idempotency-Key"].startswith("op:")
    assert op["credential_name"] == "tracker" and "Authorization" not in op["headers"]
    assert "canary-op-secret" not in json.dumps(body)
    if step == LABEL:
        assert op["readback"] == {
            "tool": "operation:tracker/issue.read",
            "args": {"issue": "7"},
            "match": {"/label": "bug"},
        }
    assert tracker.tracker.hits == {}  # nothing was sent before the decision


def test_a_childs_request_shows_every_field_at_the_root(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "leaf", "minimum_proctor: 0.1.0\nmethods:\n  main:\n    steps:\n" + STEPS["fs"])
    make_skill(
        ws,
        "parent",
        "minimum_proctor: 0.1.0\nmethods:\n  main:\n    steps:\n"
        "      - id: child\n        skill: ../leaf\n",
    )
    env = session(ws).run(
        str(ws / "skills" / "parent"), cwd=ws,
        authority=authority(effects="ask", reach="workspace"),
    )  # fmt: skip
    assert env.status == "needs_approval", env.refusal
    assert [r["address"] for r in env.requests or []] == ["child/0#put"]
    body = _check(ws, env.run_id or "")
    assert body["payload"]["files"][0]["path"] == "page.txt"


def test_a_payload_kept_as_an_artifact_is_shown_whole_with_its_artifact(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(
        ws,
        "big",
        "minimum_proctor: 0.1.0\nmethods:\n  main:\n"
        "    inputs: {type: object, properties: {text: {type: string}}, required: [text]}\n"
        "    steps:\n      - id: put\n        tool: fs.write\n"
        "        inputs: {path: big.txt, content: $input.text, create: true}\n",
    )
    text = "".join(f"line {n:04d} " + "x" * 90 + "\n" for n in range(700))  # over 64 KiB
    env = session(ws).run("big", inputs={"text": text}, cwd=ws, authority=authority(effects="ask"))
    assert env.status == "needs_approval", env.refusal
    body = _check(ws, env.run_id or "")
    assert "payload" not in body and body["payload_artifact"]["path"].startswith(".proctor/")
