"""Fuzz the strict reading of MCP frames (what both transports run before the SDK parses a
message): it never raises, and it refuses exactly the frames the strict reader refuses for a
repeated key or nesting past 64, with the request's id when the frame has one."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proctor.contracts.json_strict import loads
from proctor.errors import ParseError, UsageError
from proctor.mcp.frames import frame_refusal
from proctor.mcp.turns import check_arguments
from tests.fuzzing import FUZZ, VALUES, mutated, spliced

CALL = {
    "jsonrpc": "2.0",
    "id": 5,
    "method": "tools/call",
    "params": {"name": "hello-world__greet", "arguments": {"message": "hi", "n": [1, {"a": 2}]}},
}


def _expected(raw: str | bytes) -> str | None:
    try:
        loads(raw)
    except ParseError as exc:
        return exc.code if exc.code in ("duplicate_key", "too_deep") else None
    return None


def _check(raw: str | bytes) -> dict[str, Any] | None:
    error = frame_refusal(raw)
    expected = _expected(raw)
    if expected is None:
        assert error is None
    else:
        assert error is not None and error["error"]["data"] == {"code": expected}
        assert error["id"] is None or isinstance(error["id"], str | int)
    return error


@FUZZ
@given(st.one_of(mutated(CALL).map(json.dumps), spliced(json.dumps(CALL)), st.text(max_size=80)))
def test_any_frame(raw: str) -> None:
    _check(raw)
    _check(raw.encode())


@FUZZ
@given(mutated(CALL["params"]), st.sampled_from(['"message"', '"name"', '"jsonrpc"']))
def test_a_repeated_key_is_refused_with_the_id(params: Any, key: str) -> None:
    raw = json.dumps({**CALL, "params": params})
    raw = raw[:-1] + f", {key}: 1, {key}: 2}}"
    error = _check(raw)
    assert error is not None and error["id"] == 5


@FUZZ
@given(st.integers(min_value=65, max_value=5_000), VALUES)
def test_deep_arguments_are_refused_with_the_id(depth: int, leaf: Any) -> None:
    arguments = "[" * depth + json.dumps(leaf) + "]" * depth
    raw = json.dumps(CALL)[:-2] + f', "extra": {arguments}}}}}'
    error = _check(raw)
    assert error is not None and error["id"] == 5


TURN_ARGUMENTS = {
    "turn_list": {},
    "turn_status": {"run": "r", "turn": "draft"},
    "turn_read": {"turn": "draft", "locator": "input:x", "offset": 0, "limit": 10},
    "turn_call": {"turn": "draft", "tool": "fs.read", "args": {"path": "a"}, "call_id": "c1"},
    "turn_complete": {"turn": "draft", "failure": {"reason": "no"}},
    "call_cancel": {"call": "draft/c1"},
}


@FUZZ
@given(st.sampled_from(sorted(TURN_ARGUMENTS)), st.data())
def test_turn_tool_arguments_fit_or_are_refused_by_code(name: str, data: st.DataObject) -> None:
    arguments = data.draw(mutated(TURN_ARGUMENTS[name]))
    try:
        check_arguments(name, arguments)
    except UsageError as exc:
        assert exc.code == "arguments_invalid"
