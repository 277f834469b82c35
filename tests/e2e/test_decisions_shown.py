"""Decisions kept visible: who decided, approved or declined, the reason and the chosen option,
in ``proctor history`` (text and JSON), on the console's pages and in the receipt's
explanation (``proctor/receipt-audit``). Real CLI in a subprocess, real store."""

from __future__ import annotations

import json
import re
from html import unescape

from tests.e2e.conftest import Ws
from tests.e2e.test_approve_cli import _paused, _user
from tests.e2e.test_approve_cli import ws as ws  # the pages skill fixture

REASON = "wrong file: the page is frozen until Friday"


def _page(ws: Ws, run_id: str, address: str) -> str:
    """The console's request page for the run (the real template), as text."""
    from proctor.console.app import page_templates
    from proctor.console.pages import request_page
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    session = Session(Workspace.discover(ws.root), environ=ws.env)
    try:
        context = request_page(session, run_id, address)
    finally:
        session.close()
    markup = page_templates().get_template("request.html").render(person=None, **context)
    return unescape(re.sub(r"<[^>]+>", "", markup))


def test_a_declined_requests_reason_is_in_history_the_console_and_the_receipt(ws: Ws) -> None:
    env = _paused(ws)
    run_id, digest = env["run_id"], env["requests"][0]["request_digest"]
    out = ws.proctor("decline", run_id, "--yes", "--digest", digest, "--reason", REASON)
    assert out.code == 1, out.stderr
    who = f"os:{_user()}"

    text = ws.proctor("history", run_id)
    assert f"approval at put: decided by {who}; declined; reason: {REASON}" in text.stdout

    doc = json.loads(ws.proctor("history", run_id, "--json").stdout)
    (request,) = doc["requests"]
    decision = request["decision"]
    assert (decision["decided_by"], decision["approved"], decision["reason"]) == (
        who, False, REASON,
    )  # fmt: skip

    page = _page(ws, run_id, "put")
    assert f"decided by {who}; declined; reason: {REASON}" in page

    receipt = json.loads(ws.proctor("history", run_id, "--json").stdout)["receipt_id"]
    audit = ws.proctor("run", "proctor/receipt-audit", "-i", f"receipt={receipt}", "--json")
    explained = json.loads(audit.stdout)["result"]
    assert any(
        a.startswith("put decided by") and "declined" in a and REASON in a
        for a in explained["approvals"]
    ), explained["approvals"]
    assert REASON in explained["text"]


def test_an_approval_and_a_chosen_option_are_shown_with_who_chose(ws: Ws) -> None:
    env = _paused(ws)
    run_id, digest = env["run_id"], env["requests"][0]["request_digest"]
    done = ws.proctor("approve", run_id, "--yes", "--digest", digest, "--reason", "looks right")
    assert done.code == 0, done.stderr
    who = f"os:{_user()}"
    text = ws.proctor("history", run_id).stdout
    assert f"decided by {who}; approved; reason: looks right" in text

    asked = ws.proctor("run", "pages#pick", "--json")
    question = json.loads(asked.stdout)
    qid, qdigest = question["run_id"], question["requests"][0]["request_digest"]
    answered = ws.proctor("approve", qid, "--yes", "--digest", qdigest, "--answer", "colour=blue")
    assert answered.code == 0, answered.stderr
    shown = ws.proctor("history", qid).stdout
    assert f"question at colour: decided by {who}; answered colour=blue" in shown
    doc = json.loads(ws.proctor("history", qid, "--json").stdout)
    assert doc["requests"][0]["decision"]["answers"] == {"colour": {"option": "blue"}}
    assert "answered colour=blue" in _page(ws, qid, "colour")


def test_declined_questions_say_who_declined_and_why(ws: Ws) -> None:
    asked = ws.proctor("run", "pages#pick", "--json")
    question = json.loads(asked.stdout)
    run_id, digest = question["run_id"], question["requests"][0]["request_digest"]
    out = ws.proctor("decline", run_id, "--yes", "--digest", digest, "--reason", "not today")
    assert out.code == 1, out.stderr
    assert json.loads(ws.proctor("history", run_id, "--json").stdout)["outcome"] == "declined"
    text = ws.proctor("history", run_id).stdout
    assert f"question at colour: decided by os:{_user()}; declined; reason: not today" in text
    assert "declined; reason: not today" in _page(ws, run_id, "colour")
