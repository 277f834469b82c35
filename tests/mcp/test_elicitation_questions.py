"""Structured questions over MCP form elicitation, with the official client: the form offers
each option as a titled choice (its detail and the recommended one in the title) and a text
field; with the operator's opt-in the client's answers are recorded as client-relayed and the
run goes on; without it they change nothing."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.e2e.test_structured_questions import SURVEY
from tests.mcp.conftest import Ws, stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _call(ws: Ws, args: list[str], content: dict[str, Any], mode: str) -> tuple[Any, list[Any]]:
    from mcp.client.stdio import stdio_client
    from mcp_types import ElicitResult, Implementation

    from mcp import Client

    seen: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> Any:
        seen.append(params)
        return ElicitResult(action="accept", content=content)

    async def go() -> dict[str, Any]:
        with anyio.fail_after(90):
            async with Client(
                stdio_client(stdio_params(ws, "survey", *args)),
                elicitation_callback=on_elicit,
                mode=mode,  # type: ignore[arg-type]
                client_info=Implementation(name="test-client", version="1"),
            ) as client:
                result = await client.call_tool("survey__survey", {})
                assert result.structured_content is not None
                return dict(result.structured_content)

    return anyio.run(go), seen


@pytest.fixture
def survey(ws: Ws) -> Ws:
    ws.add_skill("survey", SURVEY)
    return ws


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_form_offers_titled_choices_and_relayed_answers_drive_the_run(
    survey: Ws, mode: str
) -> None:
    answers = {"region": "ap", "note": "after the freeze"}
    doc, seen = _call(survey, ["--trust-client-approvals"], answers, mode)
    [params] = seen
    assert params.mode == "form"
    schema = params.requested_schema
    schema = schema if isinstance(schema, dict) else schema.model_dump(by_alias=True)
    region = schema["properties"]["region"]
    assert [c["const"] for c in region["oneOf"]] == ["eu", "us", "ap"]
    assert region["oneOf"][0]["title"] == "eu — Frankfurt, closest to most users (recommended)"
    assert schema["properties"]["note"]["type"] == "string"
    assert schema["required"] == ["region"]
    assert doc["status"] == "sealed" and doc["outcome"] == "completed", doc
    decided = [e for e in survey.audit() if e["event"] == "decision_recorded"]
    assert [e["decided_by"] for e in decided] == ["client-relayed:test-client"]


def test_without_the_opt_in_the_answers_change_nothing(survey: Ws) -> None:
    doc, seen = _call(survey, [], {"region": "ap"}, "legacy")
    assert len(seen) == 1
    assert doc["status"] == "needs_approval"
    assert not [e for e in survey.audit() if e["event"] == "decision_recorded"]
