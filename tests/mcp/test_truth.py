"""What an MCP result says is true, with the official Python SDK client over stdio: a held
turn call waits for a person (where and how), it is not "refused"; a paused run's text names
the next step by what it waits on and never a bare ``proctor resume RUN_ID`` (which would wait
silently on a terminal); ``run_ambiguous`` only when two or more runs wait; a client declaring
``elicitation: {}`` is asked in form mode. The TypeScript SDK's client checks the same points
in ``test_truth_typescript.py``."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

WRITER = """\
minimum_proctor: 0.1.0
methods:
  note:
    description: Write a note through an agent turn.
    inputs: {type: object, properties: {}}
    steps:
      - id: write
        agent:
          instructions: Write note.txt, then say done.
          calls: {tools: [fs.write]}
          output:
            type: object
            properties: {done: {type: boolean}}
            required: [done]
"""

KINDS = """\
minimum_proctor: 0.1.0
methods:
  put:
    description: Write the page once a person approves.
    inputs: {type: object, properties: {}}
    steps:
      - id: put
        tool: fs.write
        reason: Write the page.
        inputs: {path: page.txt, content: "new line\\n", create: true}
  pick:
    description: Ask which colour.
    inputs: {type: object, properties: {}}
    steps:
      - id: colour
        ask:
          questions:
            - {id: colour, prompt: Which colour?, choices: [red, blue]}
"""

CONSOLE = "http://127.0.0.1:8765"
# a `proctor resume RUN` with nothing after it reads a terminal and waits without a word
BARE_RESUME = re.compile(r"proctor resume [0-9a-f]{8,}(?![ \w-]*[-/\w.])")


def _client(ws: Ws, *args: str, capabilities: Any = None, **options: Any) -> Any:
    """The official client over stdio; ``capabilities`` replaces what it declares."""
    from mcp.client.stdio import stdio_client

    from mcp import Client

    client = Client(stdio_client(stdio_params(ws, *args)), **options)
    if capabilities is not None:
        build = client._build_session

        async def declaring(stack: Any) -> Any:
            session = await build(stack)
            session._build_capabilities = lambda _version: capabilities
            return session

        client._build_session = declaring  # type: ignore[method-assign]
    return client


def _text(result: Any) -> str:
    return str(result.content[0].text)


def test_a_held_turn_call_says_it_waits_for_a_person_and_where(ws: Ws) -> None:
    ws.add_skill("writer", WRITER)
    seen: dict[str, Any] = {}

    async def go() -> None:
        with anyio.fail_after(90):
            async with _client(ws, "writer", "--console-url", CONSOLE) as client:
                paused = await client.call_tool("writer__note", {})
                seen["paused"] = paused
                call = {
                    "turn": "write",
                    "tool": "fs.write",
                    "args": {"path": "note.txt", "content": "hello\n", "create": True},
                    "call_id": "c1",
                }
                seen["held"] = await client.call_tool("turn_call", call)

    anyio.run(go)
    paused = seen["paused"]
    run_id = paused.structured_content["run_id"]
    # the paused run: an agent turn, the client's to work with the turn tools
    assert "turn_status" in _text(paused) and "turn_complete" in _text(paused)
    assert BARE_RESUME.search(_text(paused)) is None, _text(paused)
    held = seen["held"]
    text = _text(held)
    assert held.is_error is False, text
    assert held.structured_content["status"] == "needs_approval"
    assert "refused" not in text and "approval_pending" not in text
    assert "waits for a person" in text
    assert f"proctor approve {run_id} write/turn/c1" in text
    assert f"{CONSOLE}/runs/{run_id}/requests/write/turn/c1" in text
    assert "same call_id" in text
    assert not (ws.root / "note.txt").exists()


def test_a_paused_runs_text_names_the_next_step_by_request_kind(ws: Ws) -> None:
    ws.add_skill("kinds", KINDS)
    seen: dict[str, Any] = {}

    async def go() -> None:
        with anyio.fail_after(90):
            async with _client(ws, "kinds") as client:
                seen["approval"] = await client.call_tool("kinds__put", {})
                seen["question"] = await client.call_tool("kinds__pick", {})

    anyio.run(go)
    approval, question = seen["approval"], seen["question"]
    for result in (approval, question):
        assert result.is_error is False
        assert BARE_RESUME.search(_text(result)) is None, _text(result)
        assert "turn_status" not in _text(result)  # nothing here is the client's to work
    run_id = approval.structured_content["run_id"]
    assert f"`proctor approve {run_id} put`" in _text(approval)
    assert "not refused, it waits" in _text(approval)
    run_id = question.structured_content["run_id"]
    digest = question.structured_content["requests"][0]["request_digest"]
    assert f"`proctor approve {run_id} colour`" in _text(question)
    assert f"--answer colour=VALUE --yes --digest {digest}" in _text(question)
    assert not (ws.root / "page.txt").exists()


def test_run_ambiguous_only_when_two_runs_wait(ws: Ws) -> None:
    ws.add_skill("writer", WRITER)
    seen: dict[str, Any] = {}
    done = {"turn": "write", "output": {"done": True}}

    async def go() -> None:
        with anyio.fail_after(120):
            async with _client(ws, "writer") as client:
                first = await client.call_tool("writer__note", {})
                second = await client.call_tool("writer__note", {})
                seen["runs"] = [r.structured_content["run_id"] for r in (first, second)]
                seen["two_wait"] = await client.call_tool("turn_status", {"turn": "write"})
                seen["finished"] = await client.call_tool(
                    "turn_complete", {**done, "run": seen["runs"][0]}
                )
                # one run finished, one waits: that one is meant
                seen["status"] = await client.call_tool("turn_status", {"turn": "write"})
                call = {"turn": "write", "tool": "fs.write", "call_id": "c1"}
                call["args"] = {"path": "note.txt", "content": "hello\n", "create": True}
                seen["held"] = await client.call_tool("turn_call", call)
                # it now waits on the held call's approval, still the only run that waits
                seen["again"] = await client.call_tool("turn_call", call)

    anyio.run(go)
    first, second = seen["runs"]
    two = seen["two_wait"]
    assert two.is_error is True and "run_ambiguous" in _text(two)
    assert first in _text(two) and second in _text(two)
    assert seen["finished"].structured_content["outcome"] == "completed"
    for key in ("status", "held", "again"):
        result = seen[key]
        assert "run_ambiguous" not in _text(result), (key, _text(result))
        assert result.structured_content["run"] == second, key
    assert seen["again"].structured_content["status"] == "needs_approval"
    assert not (ws.root / "note.txt").exists()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_empty_elicitation_capability_is_form_mode(ws: Ws, mode: str) -> None:
    from mcp_types import ClientCapabilities, ElicitationCapability, ElicitResult

    ws.add_skill("kinds", KINDS)
    asked: list[Any] = []

    async def on_elicit(_context: Any, params: Any) -> Any:
        asked.append(params)
        return ElicitResult(action="decline")

    async def go() -> dict[str, Any]:
        empty = ClientCapabilities(elicitation=ElicitationCapability())
        with anyio.fail_after(90):
            client = _client(
                ws, "kinds", capabilities=empty, elicitation_callback=on_elicit, mode=mode
            )
            async with client:
                result = await client.call_tool("kinds__put", {})
                return dict(result.structured_content or {})

    doc = anyio.run(go)
    [params] = asked
    assert params.mode == "form"
    assert "fs.write" in params.message and "new line" in params.message
    assert doc["status"] == "needs_approval"
    assert not (ws.root / "page.txt").exists()
