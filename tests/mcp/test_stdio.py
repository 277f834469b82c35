"""``proctor mcp`` over stdio, driven by the official SDK client against a real subprocess.

Every message the server sends is validated against the negotiated version's schema.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from proctor.mcp.catalog import TURN_TOOL_NAMES
from tests.mcp.conftest import Ws, recorder_for, stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

CREDENTIALED = """\
minimum_proctor: 0.1.0
credentials:
  tracker:
    provider: tracker
    audience: https://tracker.example.com
    auth:
      api_key: {delivery: {env: TRACKER_TOKEN}}
methods:
  post:
    description: Post a comment to the tracker.
    inputs:
      type: object
      properties: {body: {type: string}}
      required: [body]
    steps:
      - id: post
        tool: http.request
        credential: tracker
        inputs: {method: POST, url: https://tracker.example.com/api, json: {body: $input.body}}
  hello:
    description: Say hello without any credential.
    inputs: {type: object, properties: {}}
    steps:
      - id: say
        tool: echo
        inputs: {text: hello}
"""


async def _session(ws: Ws, *args: str, mode: str = "auto", work: Any) -> tuple[Any, str]:
    from mcp import Client

    recorder = recorder_for(stdio_params(ws, *args))
    with anyio.fail_after(60):
        async with Client(recorder, mode=mode) as client:
            out = await work(client)
            version = client.protocol_version
    recorder.validate(version)
    return out, version


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_lists_tools_and_calls_a_skill(ws: Ws, mode: str) -> None:
    ws.add_example("hello-world")
    ws.add_example("notes-editor")

    async def work(client: Any) -> Any:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("hello-world__greet", {"message": "hi there"})
        return tools, result

    (tools, result), version = anyio.run(
        lambda: _session(ws, "hello-world", "notes-editor#show", mode=mode, work=work)
    )
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert sorted(t for t in tools if "__" in t) == ["hello-world__greet", "notes-editor__show"]
    assert set(tools) >= TURN_TOOL_NAMES
    greet = tools["hello-world__greet"]
    assert greet.description == "Echo the message back and record its digest."
    assert greet.input_schema["required"] == ["message"]
    assert result.is_error is False
    doc = result.structured_content
    assert doc["schema"] == "proctor.run.v1"
    assert doc["status"] == "sealed" and doc["outcome"] == "completed"
    assert doc["result"]["greet"] == {"text": "hi there"}
    assert doc["receipt_id"].startswith("sha256:")
    assert "completed" in result.content[0].text and doc["run_id"] in result.content[0].text
    requests = [e for e in ws.audit() if e["event"] == "mcp_request"]
    calls = [e for e in requests if e["method"] == "tools/call"]
    assert calls and calls[0]["tool"] == "hello-world__greet"
    assert calls[0]["caller"]["transport"] == "stdio"
    assert calls[0]["caller"]["client"]["name"]
    assert any(e["event"] == "run_sealed" and e["run_id"] == doc["run_id"] for e in ws.audit())


def test_unknown_tool_is_refused_audited_and_the_server_goes_on(ws: Ws) -> None:
    from mcp import MCPError

    ws.add_example("hello-world")

    async def work(client: Any) -> Any:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("notes-editor__publish", {"source": "a", "target": "b"})
        after = await client.call_tool("hello-world__greet", {"message": "still here"})
        return refused.value, after

    (refused, after), _ = anyio.run(lambda: _session(ws, "hello-world", work=work))
    assert "Unknown tool" in str(refused)
    assert after.structured_content["outcome"] == "completed"
    events = ws.audit()
    assert any(
        e["event"] == "mcp_tool_refused" and e["tool"] == "notes-editor__publish" for e in events
    )
    assert not any(e["event"] == "run_started" and e["skill"] == "notes-editor" for e in events)


def test_a_refused_call_seals_the_run_blocked_and_touches_nothing(ws: Ws) -> None:
    ws.add_example("notes-editor")
    (ws.root / "note.txt").write_text("original\n", encoding="utf-8")
    (ws.root / "copy.txt").write_text("already here\n", encoding="utf-8")

    async def work(client: Any) -> Any:
        return await client.call_tool(
            "notes-editor__publish", {"source": "note.txt", "target": "copy.txt"}
        )

    allow = ws.allow()  # under the managed default the write would wait for a person first
    result, _ = anyio.run(lambda: _session(ws, "notes-editor", *allow, work=work))
    doc = result.structured_content
    assert result.is_error is True
    assert doc["status"] == "sealed" and doc["outcome"] in ("blocked", "failed")
    assert doc["refusal"]["step"] == "write"
    assert (ws.root / "copy.txt").read_text(encoding="utf-8") == "already here\n"


def test_invalid_inputs_are_refused_without_echoing_them(ws: Ws) -> None:
    ws.add_example("hello-world")

    async def work(client: Any) -> Any:
        return await client.call_tool("hello-world__greet", {"message": "", "extra": "sekrit-x"})

    result, _ = anyio.run(lambda: _session(ws, "hello-world", work=work))
    doc = result.structured_content
    assert result.is_error is True
    assert doc["outcome"] == "blocked"
    assert doc["trace"] == []
    assert "sekrit-x" not in result.model_dump_json()


def test_missing_credential_is_reported_at_startup_and_answers_needs_credential(ws: Ws) -> None:
    ws.add_skill("tracker-post", CREDENTIALED)
    env_free = {k: v for k, v in ws.env.items() if k != "TRACKER_TOKEN"}
    ws.env = env_free

    async def work(client: Any) -> Any:
        needs = await client.call_tool("tracker-post__post", {"body": "hello"})
        fine = await client.call_tool("tracker-post__hello", {})
        return needs, fine

    (needs, fine), _ = anyio.run(lambda: _session(ws, "tracker-post", work=work))
    doc = needs.structured_content
    assert needs.is_error is True
    assert doc["status"] == "needs_credential" and doc["run_id"] is None
    (request,) = doc["requests"]
    assert request["credential"] == "tracker" and request["ready"] is False
    assert any("proctor credential set tracker" in c for c in request["setup"])
    assert "tracker" in needs.content[0].text
    assert fine.structured_content["outcome"] == "completed"
    events = ws.audit()
    ready = [e for e in events if e["event"] == "mcp_server_ready"]
    assert ready[0]["not_ready"] == [
        {"tool": "tracker-post__post", "requirement": "tracker", "problem": "credential_missing"}
    ]
    # The credential-less call ran; the one needing the credential opened no run.
    started = [e for e in events if e["event"] == "run_started"]
    assert [e["method"] for e in started] == ["hello"]


def test_startup_refuses_an_unknown_skill_and_a_bad_method(ws: Ws) -> None:
    ws.add_example("hello-world")
    for args, code in (
        (("no-such-skill",), "skill_not_found"),
        (("hello-world#nope",), "method_unknown"),
        ((), "mcp_no_skills"),
    ):
        proc = ws.proctor("mcp", *args)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        assert f"error[{code}]" in err
