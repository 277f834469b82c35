"""A model provider's hostile answers, against a real loopback stub and the managed loop.

- a body that repeats a key (or nests past 64) fails the turn with that code, nothing called;
- a call whose arguments repeat a key is refused to the model by code, nothing called;
- a final answer that repeats a key is not taken: the model is told and answers again;
- a call naming no tool, or a 500-character name, is refused ``tool_unknown`` and recorded.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from proctor.errors import AgentError
from tests.runtime.agent_stub import DIALECTS, Reply, StubModel, answer, tool_results
from tests.runtime.agents.test_agent_loop import agent, turn
from tests.runtime.agents.test_agent_loop import ws as ws  # fixture re-export


def _with_duplicate(reply: Reply) -> Reply:
    body = json.dumps(reply.body)
    return Reply(raw=('{"id": "a", "id": "b", ' + body[1:]).encode())


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("code", ["duplicate_key", "too_deep"])
def test_a_hostile_body_fails_the_turn_by_code(dialect: str, code: str, ws: Any) -> None:
    call = answer(dialect, calls=[("fs_read", {"path": "notes.txt"})])
    if code == "duplicate_key":
        reply = _with_duplicate(call)
    else:
        reply = Reply(raw=b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with StubModel([reply]) as stub, pytest.raises(AgentError) as caught:
        agent(stub, dialect).drive_turn(turn(), ws.call)
    assert caught.value.code == code
    assert ws.session.store.calls("run-agent") == []


@pytest.mark.parametrize("dialect", ["chat_completions", "openai_responses"])
def test_arguments_that_repeat_a_key_are_refused_and_nothing_runs(dialect: str, ws: Any) -> None:
    script = [
        answer(dialect, calls=[("fs_read", '{"path": "notes.txt", "path": "other.txt"}')]),
        answer(dialect, text='{"summary": "gave up"}'),
    ]
    with StubModel(script) as stub:
        out = agent(stub, dialect).drive_turn(turn(), ws.call)
    assert out == {"summary": "gave up"}
    [result] = tool_results(dialect, stub.seen[1])
    assert result["error"]["code"] == "duplicate_key"
    # nothing ran: the one record is the refusal, kept in the trace like any other
    [record] = ws.session.store.calls("run-agent")
    assert record.outcome == "refused" and record.result["error"]["code"] == "duplicate_key"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_final_answer_that_repeats_a_key_is_asked_again(dialect: str, ws: Any) -> None:
    script = [
        answer(dialect, text='{"summary": "first", "summary": "second"}'),
        answer(dialect, text='{"summary": "once"}'),
    ]
    with StubModel(script) as stub:
        out = agent(stub, dialect).drive_turn(turn(), ws.call)
    assert out == {"summary": "once"}
    assert "repeats a key" in json.dumps(stub.seen[1].body)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", ["", "x" * 500])
def test_a_nameless_or_overlong_tool_is_refused_and_recorded(
    dialect: str, name: str, ws: Any
) -> None:
    script = [
        answer(dialect, calls=[(name, {"path": "notes.txt"})]),
        answer(dialect, text='{"summary": "done"}'),
    ]
    with StubModel(script) as stub:
        agent(stub, dialect).drive_turn(turn(), ws.call)
    [result] = tool_results(dialect, stub.seen[1])
    assert result["error"]["code"] == "tool_unknown"
    [record] = ws.session.store.calls("run-agent")
    assert record.outcome == "refused" and record.tool and len(record.tool) < 128
