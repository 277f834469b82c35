"""One live ``proctor mcp`` session (a real stdio subprocess) while the workspace's files change:
each call runs the package and enforces the policy files as they are at that call, and the
tool list follows the served packages."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, recorder_for, stdio_params
from tests.runtime.driver_support import BLOCK_ECHO

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  say:
    description: Say the word.
    inputs:
      type: object
      properties: {word: {type: string}}
      required: [word]
    steps:
      - id: say
        tool: echo
        inputs: {text: $input.word}
"""

ADDED = """  shout:
    description: Say it loudly.
    inputs: {type: object, properties: {}}
    steps:
      - id: shout
        tool: echo
        inputs: {text: LOUD}
"""


def test_edits_between_calls_over_one_session_take_effect(ws: Ws) -> None:
    folder = ws.add_skill("words", RUN_YAML)
    run_yaml = folder / "run.yaml"

    async def names(client: Any) -> list[str]:
        listed = await client.list_tools(cache_mode="refresh")
        return sorted(t.name for t in listed.tools if t.name.startswith("words__"))

    async def work(client: Any) -> dict[str, Any]:
        seen: dict[str, Any] = {"before": await names(client)}
        first = await client.call_tool("words__say", {"word": "one"})
        seen["first"] = first.structured_content
        # the step now echoes a fixed text, and a second method is added
        run_yaml.write_text(RUN_YAML.replace("$input.word", "edited") + ADDED)
        second = await client.call_tool("words__say", {"word": "two"})
        seen["second"] = second.structured_content
        shout = await client.call_tool("words__shout", {})  # not listed yet: looked up afresh
        seen["shout"] = shout.structured_content
        seen["after"] = await names(client)
        (ws.root / "policies").mkdir()
        (ws.root / "policies" / "team.yaml").write_text(BLOCK_ECHO)
        blocked = await client.call_tool("words__say", {"word": "three"})
        seen["blocked"] = (blocked.is_error, blocked.structured_content)
        (ws.root / "policies" / "team.yaml").unlink()
        # a package that no longer parses: the last good list stays, each call refuses
        run_yaml.write_text("methods: [")
        seen["broken_list"] = [await names(client), await names(client)]
        broken = await client.call_tool("words__say", {"word": "four"})
        seen["broken"] = (broken.is_error, broken.content[0].text)
        return seen

    recorder = recorder_for(stdio_params(ws, "words"))

    async def session() -> tuple[dict[str, Any], str]:
        from mcp import Client

        with anyio.fail_after(120):
            async with Client(recorder) as client:
                return await work(client), client.protocol_version

    seen, version = anyio.run(session)
    recorder.validate(version)
    assert seen["before"] == ["words__say"]
    assert seen["first"]["result"] == {"text": "one"}
    assert seen["second"]["outcome"] == "completed"
    assert seen["second"]["result"] == {"text": "edited"}
    assert seen["shout"]["result"] == {"text": "LOUD"}
    assert seen["after"] == ["words__say", "words__shout"]
    is_error, doc = seen["blocked"]
    assert is_error and doc["outcome"] == "blocked"
    assert doc["trace"][0]["code"] == "empty_reason"
    assert seen["broken_list"] == [["words__say", "words__shout"]] * 2
    is_error, text = seen["broken"]
    assert is_error and text.startswith("error[")
    events = ws.audit()
    changed = [e for e in events if e["event"] == "mcp_catalog_changed"]
    assert [e["tools"] for e in changed][-1:] == [["words__say", "words__shout"]]
    refused = [e for e in events if e["event"] == "mcp_catalog_refused"]
    assert len(refused) == 1  # audited once while the package stays broken
    # every run the calls made was started from the package as it was at that call
    started = [e for e in events if e["event"] == "run_started"]
    assert len(started) == 4
