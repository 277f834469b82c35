"""The model stand-in: proctor's own managed agent, its model answered from a script through
the model client's transport; every call it asks for is still admitted by the run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.testing.support import checks, package, run_one, workspace

TURN = """
minimum_proctor: 0.1.0
methods:
  think:
    description: One managed turn.
    steps:
      - id: think
        agent:
          instructions: Answer.
          calls: {tools: [echo]}
          output:
            type: object
            properties: {answer: {type: string}}
            required: [answer]
"""


def _call(tool: str, args: dict) -> dict:  # type: ignore[type-arg]
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": tool, "arguments": json.dumps(args)}}]}}]}  # fmt: skip


def _answer(value: dict) -> dict:  # type: ignore[type-arg]
    return {"choices": [{"message": {"role": "assistant", "content": json.dumps(value)}}]}


def _test(responses: list[dict], expect: str) -> str:  # type: ignore[type-arg]
    script = json.dumps({"dialect": "chat_completions", "responses": responses})
    return f"method: think\nproviders:\n  model: {script}\nexpect:\n{expect}\n"


def _run(tmp_path: Path, responses: list[dict], expect: str):  # type: ignore[no-untyped-def,type-arg]
    folder = package(workspace(tmp_path / "ws"), "thinker", TURN, {"t": _test(responses, expect)})
    return run_one(folder, "t", keep=True)


def test_a_scripted_model_works_the_turn_through_admission(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        [_call("echo", {"text": "hi", "reason": "say it"}),
         _call("fs_read", {"path": "x", "reason": "look"}), _answer({"answer": "hi"})],
        "  status: sealed\n  outcome: completed\n  output: {exact: {answer: hi}}\n"
        "  audit: [{event: call_refused, tool: fs.read}]",
    )  # fmt: skip
    assert result.status == "passed", [f.to_json() for f in result.failures]


def test_unused_scripted_responses_fail_the_test(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        [_answer({"answer": "hi"}), _answer({"answer": "never asked"})],
        "  status: sealed\n  outcome: completed",
    )
    assert checks(result) == ["model"]
    assert "1 scripted model responses were never asked for" in result.failures[0].message


def test_a_model_asked_past_its_script_fails_the_turn(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        [_call("echo", {"text": "hi", "reason": "say it"})],
        "  status: sealed\n  outcome: failed\n"
        "  steps: {think: {outcome: failed, code: model_fixture_exhausted}}",
    )
    assert result.status == "passed", [f.to_json() for f in result.failures]
