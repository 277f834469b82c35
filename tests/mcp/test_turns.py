"""Turn tools over stdio: a paused run's agent turn worked call by call, its approval decided by
a person with ``proctor resume``, a tool outside the allowance refused while the run goes on,
and a cancelled call stopping its run like SIGTERM.
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

DRAFTER = """\
minimum_proctor: 0.1.0
methods:
  reply:
    description: Draft a reply to a note, have a person approve it, then record it.
    inputs:
      type: object
      properties: {file: {type: string}}
      required: [file]
    steps:
      - id: write
        agent:
          instructions: Read the note and write a one-line reply.
          inputs: {file: $input.file}
          calls: {tools: [fs.read]}
          output:
            type: object
            properties: {reply: {type: string}}
            required: [reply]
      - id: confirm
        ask: {reason: Send this reply?}
      - id: record
        tool: echo
        inputs: {text: $steps.write.reply}
    result_from: [record]
"""

SLOW = """\
minimum_proctor: 0.1.0
methods:
  slow:
    description: Run a short command, then echo.
    inputs: {type: object, properties: {}}
    steps:
      - id: work
        tool: command.execute
        inputs:
          argv:
            - PYTHON
            - -c
            - "import pathlib, time; pathlib.Path('started').touch(); time.sleep(1.5)"
      - id: after
        tool: echo
        inputs: {text: after}
"""


def _resume(ws: Ws, run_id: str, document: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "resume", run_id, "-", "--json"],
        cwd=ws.root,
        env=ws.env,
        input=json.dumps(document),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_a_turn_worked_call_by_call_then_approved_by_a_person(ws: Ws) -> None:
    from mcp import Client

    ws.add_skill("drafter", DRAFTER)
    (ws.root / "note.txt").write_text("Can we meet on Friday?\n" * 2000, encoding="utf-8")
    (ws.root / "keep.txt").write_text("unchanged\n", encoding="utf-8")
    seen: dict[str, Any] = {}

    async def go() -> str:
        recorder = recorder_for(stdio_params(ws, "drafter"))
        with anyio.fail_after(90):
            async with Client(recorder) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                seen["names"] = names
                paused = await client.call_tool("drafter__reply", {"file": "note.txt"})
                seen["paused"] = paused.structured_content
                run_id = paused.structured_content["run_id"]
                seen["list"] = (await client.call_tool("turn_list", {})).structured_content
                seen["status"] = (
                    await client.call_tool("turn_status", {"turn": "write"})
                ).structured_content
                args = {"path": "note.txt"}
                call = {"turn": "write", "tool": "fs.read", "args": args, "call_id": "c1"}
                seen["call"] = await client.call_tool("turn_call", call)
                seen["again"] = await client.call_tool("turn_call", call)
                seen["outside"] = await client.call_tool(
                    "turn_call",
                    {
                        "turn": "write",
                        "tool": "fs.write",
                        "args": {"path": "keep.txt", "content": "overwritten"},
                        "call_id": "c2",
                    },
                )
                seen["page1"] = (
                    await client.call_tool("turn_read", {"turn": "write", "locator": "call:c1"})
                ).structured_content
                offset = seen["page1"]["next_offset"]
                seen["page2"] = (
                    await client.call_tool(
                        "turn_read",
                        {"turn": "write", "locator": "call:c1", "offset": offset, "limit": 10},
                    )
                ).structured_content
                seen["bad_locator"] = await client.call_tool(
                    "turn_read", {"turn": "write", "locator": "input:nope"}
                )
                done = await client.call_tool(
                    "turn_complete", {"turn": "write", "output": {"reply": "Friday works."}}
                )
                seen["approval"] = done.structured_content
                # A person decides the approval outside MCP.
                approval = seen["approval"]["requests"][0]
                seen["resumed"] = await anyio.to_thread.run_sync(
                    lambda: _resume(
                        ws,
                        run_id,
                        {
                            "approvals": {
                                approval["address"]: {
                                    "request_digest": approval["request_digest"],
                                    "approved": True,
                                }
                            }
                        },
                    )
                )
                seen["final"] = (await client.call_tool("turn_list", {})).structured_content
                version = client.protocol_version
        recorder.validate(version)
        return run_id

    run_id = anyio.run(go)
    assert {"turn_list", "turn_status", "turn_read", "turn_call", "turn_complete",
            "call_cancel", "drafter__reply"} <= seen["names"]  # fmt: skip
    assert seen["paused"]["status"] == "needs_agent"
    assert seen["paused"]["requests"][0]["kind"] == "agent_turn"
    (listed,) = seen["list"]["runs"]
    assert listed["run"] == run_id and listed["requests"][0]["address"] == "write"
    status = seen["status"]
    assert status["instructions"].endswith("Read the note and write a one-line reply.")
    assert status["inputs"] == {"file": "note.txt"}
    assert [c["tool"] for c in status["calls"]] == ["fs.read"]
    assert status["calls"][0]["input_schema"]["type"] == "object"
    assert {"locator": "input:file", "type": "string", "size": 8} in status["context"]
    # The call ran once; its repeat returned the recorded call.
    assert seen["call"].is_error is False
    first = seen["call"].structured_content
    assert first["status"] == "completed" and first["result"]["content"].startswith("Can we")
    assert seen["again"].structured_content["result"] == first["result"]
    reads = [e for e in ws.audit() if e["event"] == "tool_call" and e["tool"] == "fs.read"]
    assert len(reads) == 1
    # Outside the allowance: refused, nothing written, and the turn went on.
    outside = seen["outside"].structured_content
    assert seen["outside"].is_error is True and outside["status"] == "refused"
    assert (ws.root / "keep.txt").read_text(encoding="utf-8") == "unchanged\n"
    # Pages of at most 32,000 characters with next_offset.
    assert len(seen["page1"]["text"]) == 32_000 and seen["page1"]["next_offset"] == 32_000
    assert seen["page2"]["offset"] == 32_000 and len(seen["page2"]["text"]) == 10
    assert seen["bad_locator"].is_error is True
    assert "locator_unknown" in seen["bad_locator"].content[0].text
    # The turn's output moved the run to its approval; a person's decision sealed it.
    assert seen["approval"]["status"] == "needs_approval"
    assert seen["approval"]["requests"][0]["kind"] == "approval"
    assert seen["resumed"]["outcome"] == "completed"
    (final,) = seen["final"]["runs"]
    assert final["status"] == "sealed" and final["outcome"] == "completed"
    assert final["result"] == {"text": "Friday works."}


def test_run_scope_serves_one_run_and_refuses_others(ws: Ws) -> None:
    from mcp import Client

    ws.add_skill("drafter", DRAFTER)
    (ws.root / "note.txt").write_text("hello\n", encoding="utf-8")
    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "proctor", "run", "drafter", "-i", "file=note.txt", "--json"],
            cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        runs.append(json.loads(proc.stdout)["run_id"])
    seen: dict[str, Any] = {}

    async def go() -> None:
        recorder = recorder_for(stdio_params(ws, "--run", runs[0]))
        with anyio.fail_after(60):
            async with Client(recorder) as client:
                seen["names"] = sorted(t.name for t in (await client.list_tools()).tools)
                seen["list"] = (await client.call_tool("turn_list", {})).structured_content
                seen["other"] = await client.call_tool(
                    "turn_status", {"run": runs[1], "turn": "write"}
                )
                seen["mine"] = await client.call_tool("turn_status", {"turn": "write"})
                version = client.protocol_version
        recorder.validate(version)

    anyio.run(go)
    assert seen["names"] == sorted(
        ["turn_list", "turn_status", "turn_read", "turn_call", "turn_complete", "call_cancel"]
    )
    assert [r["run"] for r in seen["list"]["runs"]] == [runs[0]]
    assert seen["other"].is_error is True and "run_not_served" in seen["other"].content[0].text
    assert seen["mine"].structured_content["run"] == runs[0]
    proc = ws.proctor("mcp", "--run", "0" * 32)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "run_not_found" in err


def test_a_cancelled_call_stops_its_run_gracefully(ws: Ws) -> None:
    from mcp import Client

    ws.add_skill("slow", SLOW.replace("PYTHON", json.dumps(sys.executable)))
    marker = ws.root / "started"
    seen: dict[str, Any] = {}

    allow = ws.allow()  # the command runs at once rather than waiting for a person

    async def go() -> None:
        recorder = recorder_for(stdio_params(ws, "slow", *allow))
        with anyio.fail_after(60):
            async with Client(recorder) as client:
                async with anyio.create_task_group() as group:

                    async def call() -> None:
                        seen["result"] = await client.call_tool("slow__slow", {})

                    group.start_soon(call)
                    while not marker.exists():
                        await anyio.sleep(0.02)  # polls a file the command writes; no fixed wait
                    group.cancel_scope.cancel()
                # The server is still there and serves the next call.
                seen["next"] = (await client.call_tool("turn_list", {})).structured_content
                version = client.protocol_version
        recorder.validate(version)

    anyio.run(go)
    assert "result" not in seen
    events = ws.audit()
    (started,) = [e for e in events if e["event"] == "run_started"]
    run_events = [e for e in events if e.get("run_id") == started["run_id"]]
    tools = [(e["tool"], e["outcome"]) for e in run_events if e["event"] == "tool_call"]
    # The command in flight was killed and its call settled cancelled; no later step started.
    assert tools == [("command.execute", "cancelled")]
    assert any(e["event"] == "run_stopped" for e in run_events)
    assert not any(e["event"] == "run_sealed" for e in run_events)
