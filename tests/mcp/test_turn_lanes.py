"""Turn tools over stdio: a change under ``effects: ask`` pauses the run for a person and then
runs once, ``turn_complete`` with ``failure`` fails the step, and ``call_cancel`` stops a slow
read in flight.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, recorder_for, stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

WRITER = """\
minimum_proctor: 0.1.0
methods:
  main:
    description: Write a note with an agent.
    inputs: {type: object, properties: {}}
    steps:
      - id: draft
        agent:
          instructions: Write the note.
          calls: {tools: [fs.write, fs.search]}
          output:
            type: object
            properties: {summary: {type: string}}
            required: [summary]
"""

WRITE = {"path": "out.md", "content": "hello\n", "create": True}


def _cli(ws: Ws, args: list[str], document: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws.root, env=ws.env, input=json.dumps(document),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_turn_change_waits_on_a_person_then_runs_once_and_failure_ends_the_turn(
    ws: Ws,
) -> None:
    from mcp import Client

    ws.add_skill("writer", WRITER)
    saved = _cli(ws, ["authority", "save", "careful", "-"], {"effects": "ask"})
    assert saved.returncode == 0, saved.stderr
    seen: dict[str, Any] = {}

    async def go() -> None:
        recorder = recorder_for(stdio_params(ws, "writer", "--authority", "careful"))
        with anyio.fail_after(90):
            async with Client(recorder) as client:
                paused = await client.call_tool("writer__main", {})
                run_id = paused.structured_content["run_id"]
                call = {"turn": "draft", "tool": "fs.write", "args": WRITE, "call_id": "c1"}
                seen["held"] = await client.call_tool("turn_call", call)
                seen["list"] = (await client.call_tool("turn_list", {})).structured_content
                request = seen["list"]["runs"][0]["requests"][0]
                decision = {"request_digest": request["request_digest"], "approved": True}
                document = {"approvals": {request["address"]: decision}}
                proc = await anyio.to_thread.run_sync(
                    lambda: _cli(ws, ["resume", run_id, "-", "--json"], document)
                )
                seen["resumed"] = json.loads(proc.stdout)
                seen["ran"] = await client.call_tool("turn_call", call)
                seen["again"] = await client.call_tool("turn_call", call)
                seen["failed"] = await client.call_tool(
                    "turn_complete", {"turn": "draft", "failure": {"reason": "gave up"}}
                )
                version = client.protocol_version
        recorder.validate(version)

    anyio.run(go)
    held = seen["held"].structured_content
    assert seen["held"].is_error is False and held["status"] == "needs_approval"
    assert held["error"]["details"]["address"] == "draft/turn/c1"
    (run,) = seen["list"]["runs"]
    assert run["status"] == "needs_approval"
    assert run["requests"][0]["kind"] == "approval" and run["requests"][0]["tool"] == "fs.write"
    assert seen["resumed"]["status"] == "needs_agent"
    ran = seen["ran"].structured_content
    assert ran["status"] == "completed"
    assert seen["again"].structured_content["result"] == ran["result"]
    assert (ws.root / "out.md").read_text(encoding="utf-8") == "hello\n"
    writes = [e for e in ws.audit() if e["event"] == "tool_call" and e["tool"] == "fs.write"]
    assert len(writes) == 1
    failed = seen["failed"].structured_content
    assert seen["failed"].is_error is True
    assert failed["outcome"] == "failed" and failed["refusal"]["code"] == "agent_failed"
    assert "gave up" in failed["refusal"]["message"] and failed["receipt_id"]


def test_call_cancel_stops_a_slow_read_in_flight(ws: Ws) -> None:
    from mcp import Client

    ws.add_skill("writer", WRITER)
    data = ws.root / "data"
    data.mkdir()
    blob = ("some line of text with words\n" * 3000).encode()
    for i in range(400):  # a search that takes seconds uncancelled (about 25 ms a file)
        (data / f"f{i:04}.txt").write_bytes(blob)
    seen: dict[str, Any] = {}

    async def go() -> None:
        recorder = recorder_for(stdio_params(ws, "writer"))
        with anyio.fail_after(90):
            async with Client(recorder) as client:
                await client.call_tool("writer__main", {})
                search = {"pattern": r"\w*\w*\w*q", "regex": True, "path": "data"}
                call = {"turn": "draft", "tool": "fs.search", "args": search, "call_id": "c1"}
                async with anyio.create_task_group() as group:

                    async def slow() -> None:
                        seen["call"] = await client.call_tool("turn_call", call)

                    group.start_soon(slow)
                    while True:  # until the server holds the call in flight
                        got = await client.call_tool("call_cancel", {"call": "draft/c1"})
                        if not got.is_error:
                            seen["cancel"] = got.structured_content
                            break
                        await anyio.sleep(0.02)
                seen["status"] = (
                    await client.call_tool("turn_status", {"turn": "draft"})
                ).structured_content
                version = client.protocol_version
        recorder.validate(version)

    anyio.run(go)
    assert seen["cancel"]["state"] == "executing"
    call = seen["call"].structured_content
    # Stopped while it read ("failed"), or before it was sent when the cancel came first
    # ("refused"); either way it returned no result and is recorded so (the in-flight case is
    # pinned in tests/runtime/engine/test_turn_lanes.py).
    assert call["error"]["code"] == "call_cancelled" and call["result"] is None
    assert call["status"] in ("failed", "refused") and call["cancel_requested"] is True
    (entry,) = [c for c in seen["status"]["context"] if c["locator"] == "call:c1"]
    assert entry["outcome"] == call["status"]
    events = [e["event"] for e in ws.audit()]
    assert "call_cancel_requested" in events
