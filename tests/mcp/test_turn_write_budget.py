"""Attack: a host working a turn over MCP spends one write budget per run. Each ``turn_call``
builds a new governor; the run's earlier writes still count, so with
``PROCTOR_WRITE_BUDGET=2`` the third of four separate ``fs.write`` calls is refused and writes
nothing, and so is the fourth.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

WRITER = """\
minimum_proctor: 0.1.0
methods:
  notes:
    description: Write notes.
    inputs: {type: object, properties: {}}
    steps:
      - id: draft
        agent:
          instructions: Write the notes.
          calls: {tools: [fs.write]}
          output:
            type: object
            properties: {summary: {type: string}}
            required: [summary]
"""


def test_four_mcp_turn_calls_spend_one_write_budget(ws: Ws) -> None:
    from mcp import Client

    ws.add_skill("writer", WRITER)
    outcomes: list[Any] = []
    allow = ws.allow()

    async def go() -> None:
        params = stdio_params(ws, "writer", *allow, env={"PROCTOR_WRITE_BUDGET": "2"})
        with anyio.fail_after(90):
            async with Client(params) as client:
                paused = await client.call_tool("writer__notes", {})
                assert paused.structured_content["status"] == "needs_agent", paused
                for name in "abcd":
                    args = {"path": f"{name}.md", "content": name, "create": True}
                    call = {"turn": "draft", "tool": "fs.write", "args": args,
                            "call_id": f"w-{name}", "reason": "a note"}  # fmt: skip
                    outcomes.append((await client.call_tool("turn_call", call)).structured_content)

    anyio.run(go)
    assert [o["status"] for o in outcomes] == ["completed", "completed", "refused", "refused"]
    assert [o.get("code") or (o.get("error") or {}).get("code") for o in outcomes[2:]] == [
        "write_budget_exceeded"
    ] * 2
    assert (ws.root / "a.md").exists() and (ws.root / "b.md").exists()
    assert not (ws.root / "c.md").exists() and not (ws.root / "d.md").exists()
