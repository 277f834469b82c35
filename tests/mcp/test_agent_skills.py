"""An Agent Skills package (a folder with only SKILL.md) over ``proctor mcp`` on stdio: it is
offered as a tool taking ``task``, its call pauses on one agent turn whose allowance is its
mapped ``allowed-tools``, the host works the turn with the turn tools (a mapped tool runs, an
unmapped one is refused and changes nothing), and completing the turn seals the run.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, recorder_for, stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SKILL_MD = """---
name: notes-reader
description: Reads the notes in its references and answers a question about them.
allowed-tools: Read Grep WebSearch
---
Read references/notes.md and answer the task in one sentence.
"""


def test_a_skill_md_package_is_offered_and_runs_over_mcp(ws: Ws) -> None:
    from mcp import Client

    folder = ws.root / "skills" / "notes-reader"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (folder / "references" / "notes.md").write_text("The meeting is on Friday.\n")
    (ws.root / "keep.txt").write_text("unchanged\n", encoding="utf-8")
    seen: dict[str, Any] = {}

    async def go() -> None:
        recorder = recorder_for(stdio_params(ws, "notes-reader"))
        with anyio.fail_after(90):
            async with Client(recorder) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                seen["tools"] = tools
                paused = await client.call_tool(
                    "notes-reader__main", {"task": "When is the meeting?"}
                )
                seen["paused"] = paused.structured_content
                seen["status"] = (
                    await client.call_tool("turn_status", {"turn": "work"})
                ).structured_content
                read = {
                    "turn": "work",
                    "tool": "fs.read",
                    "args": {"path": "skills/notes-reader/references/notes.md"},
                    "call_id": "c1",
                }
                seen["read"] = (await client.call_tool("turn_call", read)).structured_content
                write = {
                    "turn": "work",
                    "tool": "fs.write",
                    "args": {"path": "keep.txt", "content": "overwritten"},
                    "call_id": "c2",
                }
                seen["write"] = (await client.call_tool("turn_call", write)).structured_content
                done = await client.call_tool(
                    "turn_complete", {"turn": "work", "output": {"answer": "On Friday."}}
                )
                seen["done"] = done.structured_content
                version = client.protocol_version
        recorder.validate(version)

    anyio.run(go)
    tool = seen["tools"]["notes-reader__main"]
    assert "Reads the notes" in (tool.description or "")
    assert tool.input_schema["required"] == ["task"]
    assert seen["paused"]["status"] == "needs_agent"
    assert seen["paused"]["requests"][0]["address"] == "work"  # the package's one agent step
    status = seen["status"]
    assert "Read references/notes.md" in status["instructions"]
    # allowed-tools mapped by the table: Read and Grep; WebSearch is unknown and offers nothing
    assert sorted(c["tool"] for c in status["calls"]) == ["fs.read", "fs.search"]
    assert seen["read"]["status"] == "completed"
    assert seen["read"]["result"]["content"] == "The meeting is on Friday.\n"
    assert seen["write"]["status"] == "refused"
    assert seen["write"]["error"]["code"] == "tool_not_allowed"
    assert (ws.root / "keep.txt").read_text(encoding="utf-8") == "unchanged\n"
    assert seen["done"]["status"] == "sealed" and seen["done"]["outcome"] == "completed"
    assert seen["done"]["result"] == {"answer": "On Friday."}
