"""Fuzz what a model provider answers, through each dialect: the strict reader of the body, the
dialect's decoding of text and tool calls (their arguments read strictly too), and the search
for the final JSON object in the text. Only a ProctorError may escape."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proctor.runtime.agents.loop import first_json_object, make_dialect
from proctor.runtime.agents.wire import decode_arguments, read_document
from tests.fuzzing import FUZZ, VALUES, mutated, only_proctor_errors, spliced

ARGS = '{"path": "notes.md", "reason": "read it"}'
ANSWERS: dict[str, Any] = {
    "chat_completions": {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": 'Done: {"summary": "ok"}',
                    "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "fs_read", "arguments": ARGS}},
                    ],
                }
            }
        ]
    },
    "openai_responses": {
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": '{"summary": "ok"}'}]},
            {"type": "function_call", "call_id": "c1", "name": "fs_read", "arguments": ARGS},
        ]
    },
    "anthropic_messages": {
        "type": "message",
        "content": [
            {"type": "text", "text": '{"summary": "ok"}'},
            {"type": "tool_use", "id": "c1", "name": "fs_read", "input": {"path": "notes.md"}},
        ],
    },
}  # fmt: skip
DIALECTS = sorted(ANSWERS)


def _read(dialect: str, body: bytes) -> None:
    reply = make_dialect(dialect, "m").read(read_document(body))
    first_json_object(reply.text)
    for request in reply.tool_requests:
        assert isinstance(request.name, str)
        assert (request.arguments is None) == (request.problem is not None)


def test_the_base_answers_read() -> None:
    for dialect in DIALECTS:
        _read(dialect, json.dumps(ANSWERS[dialect]).encode())


@FUZZ
@given(st.sampled_from(DIALECTS), st.data())
def test_an_answer_with_a_subtree_replaced(dialect: str, data: st.DataObject) -> None:
    doc = data.draw(mutated(ANSWERS[dialect]))
    only_proctor_errors(lambda: _read(dialect, json.dumps(doc).encode()))


@FUZZ
@given(st.sampled_from(DIALECTS), st.data())
def test_an_answer_spliced_or_arbitrary(dialect: str, data: st.DataObject) -> None:
    body = data.draw(
        st.one_of(spliced(json.dumps(ANSWERS[dialect])).map(str.encode), st.binary(max_size=80))
    )
    only_proctor_errors(lambda: _read(dialect, body))


@FUZZ
@given(st.one_of(spliced(ARGS), st.text(max_size=60), VALUES))
def test_arguments(raw: Any) -> None:
    arguments, problem = decode_arguments(raw)
    assert (arguments is None) == (problem is not None)
    assert problem in (None, "arguments_unparsable", "duplicate_key", "too_deep")


@FUZZ
@given(st.one_of(spliced('Here it is: {"summary": "ok", "n": [1, {"a": 2}]} done'), st.text()))
def test_final_answer_text(text: str) -> None:
    value = first_json_object(text)
    assert value is None or isinstance(value, dict)


def test_a_repeated_key_or_deep_nesting_is_refused_by_code() -> None:
    from proctor.errors import ParseError

    for dialect in DIALECTS:
        body = json.dumps(ANSWERS[dialect])
        twice = body[0] + '"x": 1, "x": 2, ' + body[1:]
        try:
            read_document(twice.encode())
        except ParseError as exc:
            assert exc.code == "duplicate_key"
        else:
            raise AssertionError("a repeated key was read")
    assert decode_arguments('{"path": "a", "path": "b"}') == (None, "duplicate_key")
    assert decode_arguments("[" * 100_000) == (None, "too_deep")
    assert first_json_object('ok {"a": 1, "a": 2}') is None
