"""Approvals over MCP elicitation with the official client and an elicitation callback: a
form-mode accept without the operator's opt-in changes nothing (the file is unchanged, the
request still pending); with ``--trust-client-approvals`` the write runs once and its receipt
says client-relayed; URL mode names the console page of exactly that request, and the call
continues once a person decided there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, stdio_params
from tests.receipt_files import stored

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

PAGES = """\
minimum_proctor: 0.1.0
methods:
  write:
    description: Write the page once a person approves.
    inputs:
      type: object
      properties: {text: {type: string}}
      required: [text]
    steps:
      - id: read
        tool: fs.read
        inputs: {path: page.txt}
      - id: put
        tool: fs.write
        reason: Write the page.
        inputs: {path: page.txt, content: $input.text, expected_digest: $steps.read.content_digest}
"""


@pytest.fixture
def pages(ws: Ws) -> Ws:
    ws.add_skill("pages", PAGES)
    (ws.root / "page.txt").write_text("old line\n", encoding="utf-8")
    return ws


def _call(
    ws: Ws, args: list[str], callback: Any, mode: str = "auto"
) -> tuple[dict[str, Any], list[Any]]:
    """One call of pages__write by the official client. ``auto`` negotiates the newest
    revision (no server-to-client requests: the return-based input_required flow);
    ``legacy`` the initialize handshake (the server sends elicitation/create itself)."""
    from mcp.client.stdio import stdio_client
    from mcp_types import Implementation

    from mcp import Client

    seen: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> Any:
        seen.append(params)
        return await callback(params)

    async def go() -> dict[str, Any]:
        with anyio.fail_after(90):
            async with Client(
                stdio_client(stdio_params(ws, "pages", *args)),
                elicitation_callback=on_elicit,
                mode=mode,  # type: ignore[arg-type]
                client_info=Implementation(name="test-client", version="1"),
            ) as client:
                result = await client.call_tool("pages__write", {"text": "new line\n"})
                assert result.structured_content is not None
                return dict(result.structured_content)

    return anyio.run(go), seen


def _accept(content: dict[str, Any] | None) -> Any:
    from mcp_types import ElicitResult

    async def answer(_params: Any) -> Any:
        return ElicitResult(action="accept", content=content)

    return answer


def _pending(ws: Ws) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "proctor", "pending", "--json"],
        cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout)["requests"])


def _verdicts(ws: Ws) -> list[dict[str, Any]]:
    out = []
    for data in stored(ws.root / ".proctor" / "receipts").values():
        out += (json.loads(data).get("body") or {}).get("verdicts") or []
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_form_accept_without_the_opt_in_leaves_the_write_pending(pages: Ws, mode: str) -> None:
    doc, seen = _call(pages, [], _accept({"approve": True}), mode)
    [params] = seen
    assert params.mode == "form"
    assert "-old line" in params.message and "+new line" in params.message
    assert "information only" in params.message
    assert doc["status"] == "needs_approval"
    assert any("changed nothing" in n for n in doc["notes"])
    assert (pages.root / "page.txt").read_text() == "old line\n"
    [waiting] = _pending(pages)
    assert waiting["run_id"] == doc["run_id"] and waiting["address"] == "put"
    ignored = [e for e in pages.audit() if e["event"] == "mcp_client_answer_ignored"]
    assert ignored and ignored[0]["client"] == "test-client" and ignored[0]["approve"] is True
    assert not [e for e in pages.audit() if e["event"] == "decision_recorded"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_with_the_opt_in_a_form_accept_runs_once_and_the_receipt_says_client_relayed(
    pages: Ws, mode: str
) -> None:
    doc, seen = _call(pages, ["--trust-client-approvals"], _accept({"approve": True}), mode)
    assert len(seen) == 1
    assert doc["status"] == "sealed" and doc["outcome"] == "completed", doc
    assert (pages.root / "page.txt").read_text() == "new line\n"
    codes = {v["code"] for v in _verdicts(pages) if v["rule_id"] == "decision:put"}
    assert codes == {"decided_by:client-relayed:test-client"}
    calls = [
        json.loads(data)["body"] for data in stored(pages.root / ".proctor" / "receipts").values()
    ]
    assert [b["subject"].get("tool") for b in calls if b["kind"] == "call"].count("fs.write") == 1
    events = pages.audit()
    assert [e["decided_by"] for e in events if e["event"] == "decision_recorded"] == [
        "client-relayed:test-client"
    ]
    assert [e for e in events if e["event"] == "mcp_client_approval_trusted"]
    ready = [e for e in events if e["event"] == "mcp_server_ready"]
    assert ready[0]["trust_client_approvals"] is True
    assert _pending(pages) == []


def test_with_the_opt_in_a_form_decline_seals_declined(pages: Ws) -> None:
    doc, _ = _call(pages, ["--trust-client-approvals"], _accept({"approve": False}))
    assert doc["outcome"] == "declined", doc
    assert (pages.root / "page.txt").read_text() == "old line\n"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_url_mode_names_the_console_page_and_the_call_continues_once_decided(
    pages: Ws, tmp_path: Path, mode: str
) -> None:
    from mcp_types import ElicitResult

    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.approvals import decide, shown_request
    from proctor.runtime.engine.session import Session

    console = "http://127.0.0.1:8765"

    def person_decides(run_id: str) -> None:
        session = Session(Workspace.discover(pages.root), environ=pages.env)
        try:
            shown = shown_request(session, run_id, "put")
            decide(session, run_id, "put", request_digest=shown.request_digest, approve=True,
                   decided_by="console:alice")  # fmt: skip
        finally:
            session.close()

    async def in_the_console(params: Any) -> Any:
        run_id = params.url.split("/runs/")[1].split("/")[0]
        await anyio.to_thread.run_sync(person_decides, run_id)
        return ElicitResult(action="accept")

    doc, seen = _call(pages, ["--console-url", console], in_the_console, mode)
    [params] = seen
    assert params.mode == "url"
    assert params.url == f"{console}/runs/{doc['run_id']}/requests/put"
    assert doc["status"] == "sealed" and doc["outcome"] == "completed", doc
    assert (pages.root / "page.txt").read_text() == "new line\n"
    codes = {v["code"] for v in _verdicts(pages) if v["rule_id"] == "decision:put"}
    assert codes == {"decided_by:console:alice"}
