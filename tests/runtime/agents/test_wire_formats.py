"""Model wire formats as strict OpenAI-compatible servers read them.

The stub here behaves like llama.cpp's server: it answers 500 to an assistant message whose
``content`` is ``null`` and to a tool schema carrying ``maxLength`` (its grammar builder cannot
take one). Its own answers use the loose shapes such servers send: a tool call without ``id``,
``content`` as a list of parts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.agents import ManagedAgent
from proctor.runtime.agents.views import unbounded
from tests.runtime.agent_stub import Reply, Seen, StubModel, config, governed, tool_results

KEY = "stub-key-0123456789abcdef"
SCHEMA = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}


def _strict(seen: Seen) -> str | None:
    """What llama.cpp's server would refuse in this request, if anything."""
    for message in seen.body.get("messages", []):
        if message.get("role") == "assistant" and message.get("content") is None:
            return "content must be a string"
    if "maxLength" in json.dumps(seen.body.get("tools") or []):
        return "unsupported schema keyword maxLength"
    return None


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def _llama(replies: list[dict[str, Any]]) -> list[Any]:
    def entry(message: dict[str, Any]) -> Any:
        def answer(seen: Seen) -> Reply:
            problem = _strict(seen)
            if problem is not None:
                return Reply(status=500, body={"error": {"code": 500, "message": problem}})
            return Reply(body=_completion(message))

        return answer

    return [entry(m) for m in replies]


@pytest.fixture
def ws(tmp_path: Path) -> Any:
    (tmp_path / "notes.txt").write_text("alpha beta\n", encoding="utf-8")
    g = governed(tmp_path)
    yield g
    g.session.close()


def _turn() -> dict[str, Any]:
    return {
        "instructions": "Summarise notes.txt.",
        "inputs": {"file": "notes.txt"},
        "allowance": ["fs.read"],
        "output_schema": SCHEMA,
        "step_id": "draft",
        "max_steps": 4,
    }


def test_a_llama_cpp_like_server_accepts_every_request_and_loose_answers_work(ws: Any) -> None:
    call = {
        "type": "function",
        "function": {"name": "fs_read", "arguments": '{"path":"notes.txt"}'},
    }
    script = _llama(
        [
            # no id on the call, and content as a list of parts
            {"role": "assistant", "content": [{"type": "text", "text": ""}], "tool_calls": [call]},
            {"role": "assistant", "content": [{"type": "text", "text": '{"summary": "alpha"}'}]},
        ]
    )
    with StubModel(script) as stub:
        agent = ManagedAgent(config(stub, "chat_completions", max_retries=0), key=KEY)
        out = agent.drive_turn(_turn(), ws.call)
    assert out == {"summary": "alpha"}
    assert all(_strict(seen) is None for seen in stub.seen)
    [result] = tool_results("chat_completions", stub.seen[1])
    assert result["status"] == "completed"
    assistant = [m for m in stub.seen[1].body["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == ""
    tool_message = next(m for m in stub.seen[1].body["messages"] if m["role"] == "tool")
    assert tool_message["tool_call_id"] == assistant[0]["tool_calls"][0]["id"]
    [record] = ws.session.store.calls("run-agent")
    assert (record.tool, record.outcome) == ("fs.read", "completed")


def test_admission_still_enforces_the_bounds_the_model_was_not_shown(ws: Any) -> None:
    too_long = json.dumps({"path": "x" * 5000})
    call = {"id": "c1", "type": "function", "function": {"name": "fs_read", "arguments": too_long}}
    script = _llama(
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "assistant", "content": '{"summary": "none"}'},
        ]
    )
    with StubModel(script) as stub:
        agent = ManagedAgent(config(stub, "chat_completions", max_retries=0), key=KEY)
        agent.drive_turn(_turn(), ws.call)
    [result] = tool_results("chat_completions", stub.seen[1])
    assert result["error"]["code"] == "schema_invalid"


def test_unbounded_drops_length_bounds_only_from_schema_keywords() -> None:
    schema = {
        "type": "object",
        "properties": {
            "maxLength": {"type": "string", "maxLength": 3, "minLength": 1},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 9}},
        },
        "enum": [{"maxLength": 1}],
    }
    assert unbounded(schema) == {
        "type": "object",
        "properties": {
            "maxLength": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "enum": [{"maxLength": 1}],
    }


def test_ask_human_in_a_managed_turn_is_refused_with_a_reason_the_model_reads(ws: Any) -> None:
    call = {
        "id": "q1",
        "type": "function",
        "function": {"name": "ask_human", "arguments": '{"question": "Which file?"}'},
    }
    script = _llama(
        [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "assistant", "content": '{"summary": "decided alone"}'},
        ]
    )
    with StubModel(script) as stub:
        agent = ManagedAgent(config(stub, "chat_completions", max_retries=0), key=KEY)
        out = agent.drive_turn({**_turn(), "ask": True}, ws.call)
    assert out == {"summary": "decided alone"}
    [result] = tool_results("chat_completions", stub.seen[1])
    assert result["status"] == "refused"
    assert result["error"]["code"] == "ask_human_unavailable"
    assert "no person answers" in result["error"]["message"]
