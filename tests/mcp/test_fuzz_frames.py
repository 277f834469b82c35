"""Fuzz the strict reading of MCP frames (what both transports run before the SDK parses a
message): it never raises, and it refuses exactly the frames the strict reader refuses for a
repeated key or nesting past 64, with the request's id when the frame has one."""

from __future__ import annotations

import json
from typing import Any

import pytest
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


RESPONSE = {"jsonrpc": "2.0", "id": "a", "result": {"content": [{"type": "text", "text": "x"}]}}
ERROR = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "no", "data": [1.5]}}
NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"x": None}}


@FUZZ
@given(
    st.one_of(mutated(CALL), mutated(RESPONSE), mutated(ERROR), mutated(NOTIFICATION)).map(
        json.dumps
    )
)
def test_a_stdio_line_reads_as_the_sdks_own_transport_reads_it(raw: str) -> None:
    # the stdio server validates the document the strict reader read (one parse of the line):
    # what reaches the SDK is the message its own transport makes of the same line
    # (validate_json), or, where that refuses the line, the line is refused
    import mcp_types as types
    from pydantic import ValidationError

    from proctor.mcp.frames import read_line

    read = read_line(raw)
    try:
        own = types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
    except ValidationError:
        own = None
    if own is None or _expected(raw) is not None:
        assert isinstance(read, dict) and "error" in read
        return
    if isinstance(read, dict):  # refused before the SDK: an id that is no string or integer
        assert read["error"]["data"]["code"] == "invalid_request"
        doc = json.loads(raw)
        assert "method" in doc and type(doc.get("id", "")) not in (str, int)
        return
    assert read is not None and type(read.message) is type(own)
    assert read.message == own and read.message.model_fields_set == own.model_fields_set
    dump = {"by_alias": True, "exclude_unset": True}
    assert read.message.model_dump_json(**dump) == own.model_dump_json(**dump)


def test_a_stdio_line_the_strict_reader_took_is_not_parsed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mcp_types as types

    from proctor.mcp.frames import read_line

    parsed: list[str] = []
    adapter = types.jsonrpc_message_adapter
    validate_json = adapter.validate_json

    def counted(data: Any, **kwargs: Any) -> Any:
        parsed.append(data)
        return validate_json(data, **kwargs)

    monkeypatch.setattr(adapter, "validate_json", counted)
    read = read_line(json.dumps(CALL) + "\n")
    assert read is not None and not isinstance(read, dict)
    assert read.message.method == "tools/call" and parsed == []
    # a line that is no strict JSON is still the SDK's to parse (and refuse)
    assert isinstance(read_line('{"jsonrpc": "2.0", "id": NaN}\n'), dict)
