"""References in step inputs, and method inputs from the command line (never echoed)."""

from __future__ import annotations

import pytest

from proctor.errors import ParseError, ProctorError, UsageError
from proctor.parser.inputs import (
    MAX_INPUTS_BYTES,
    coerce_cli_inputs,
    parse_inputs_document,
    validate_inputs,
)
from proctor.parser.refs import Ref, collect_refs, resolve

SECRET = "sk-live-DO-NOT-ECHO-4242"
STEPS = {"load": {"content": "text", "items": [{"name": "a"}, {"name": "b"}], "n": 3}}


def test_whole_string_references_keep_types() -> None:
    template = {
        "a": "$input.export",
        "b": "$steps.load.content",
        "c": "$steps.load.items/1/name",
        "d": "$steps.load.items.0.name",
        "e": ["$steps.load.n", "$$literal", "plain $input.export"],
        "f": "$steps.load",
        "g": "$input.cfg.depth",
    }
    inputs = {"export": "x.md", "cfg": {"depth": 2}}
    assert resolve(template, inputs, STEPS) == {
        "a": "x.md",
        "b": "text",
        "c": "b",
        "d": "a",
        "e": [3, "$literal", "plain $input.export"],
        "f": STEPS["load"],
        "g": 2,
    }


def test_resolved_values_are_not_resolved_again() -> None:
    assert resolve("$input.v", {"v": "$steps.load.n"}, STEPS) == "$steps.load.n"


@pytest.mark.parametrize(
    "ref",
    [
        "$input.missing",
        "$steps.nope.x",
        "$steps.load.items/7",
        "$steps.load.n.x",
        "$steps.load.items/01",
    ],
)
def test_unresolved_reference_names_it(ref: str) -> None:
    with pytest.raises(ProctorError) as caught:
        resolve({"x": ref}, {"secret": SECRET}, STEPS)
    assert caught.value.code == "unresolved_reference"
    assert ref in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("bad", ["$inputs.x", "$input", "$env.HOME", "$steps.", "$input.a b"])
def test_malformed_dollar_strings_are_refused(bad: str) -> None:
    with pytest.raises(ProctorError) as caught:
        collect_refs({"k": [bad]})
    assert caught.value.code == "invalid_reference"


def test_collect_refs() -> None:
    refs = collect_refs({"a": ["$input.x", {"b": "$steps.s.f/0"}], "$input.key": "z"})
    assert refs == [
        Ref("input", "x", (), "$input.x"),
        Ref("steps", "s", ("f", "0"), "$steps.s.f/0"),
    ]


SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "name": {"type": "string"},
        "opts": {"type": "object"},
        "either": {"type": ["integer", "string"]},
        "token": {"type": "string", "pattern": "^ok$"},
    },
    "required": ["name"],
    "additionalProperties": False,
}


def test_cli_inputs_are_typed_by_the_schema() -> None:
    pairs = ["count=5", "name=5", 'opts={"a": [1]}', "either=abc", "token=a=b"]
    assert coerce_cli_inputs(pairs, SCHEMA) == {
        "count": 5,
        "name": "5",
        "opts": {"a": [1]},
        "either": "abc",
        "token": "a=b",
    }


@pytest.mark.parametrize(
    ("pairs", "code"),
    [
        ([SECRET], "input_malformed"),
        ([f"={SECRET}"], "input_malformed"),
        ([f"undeclared={SECRET}"], "input_undeclared"),
        ([f"count={SECRET}"], "input_not_json"),
        ([f'opts={{"a": 1, "a": "{SECRET}"}}'], "duplicate_key"),
        ([f"opts={'[' * 65}{']' * 65}"], "too_deep"),
        (["name=a", f"name={SECRET}"], "input_repeated"),
    ],
)
def test_cli_input_refusals_never_echo_the_value(pairs: list[str], code: str) -> None:
    with pytest.raises(UsageError) as caught:
        coerce_cli_inputs(pairs, SCHEMA)
    assert caught.value.code == code
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(caught.value.to_dict())


def test_inputs_document() -> None:
    assert parse_inputs_document(b'\xef\xbb\xbf{"a": [1, {"b": null}]}', source="-") == {
        "a": [1, {"b": None}]
    }


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (f'["{SECRET}"]'.encode(), "inputs_not_object"),
        (f'{{"k": "{SECRET}", "k": 1}}'.encode(), "duplicate_key"),
        (f'{{"k": {SECRET}}}'.encode(), "inputs_not_json"),
        (f'{{"k": "{SECRET}"}} {{}}'.encode(), "inputs_not_json"),
        (b'{"k": NaN}', "inputs_not_json"),
        (SECRET.encode() + b"\xff", "inputs_not_utf8"),
        (b"[" * 200_000, "too_deep"),
        (b'{"k": ' + b"[" * 65 + b"]" * 65 + b"}", "too_deep"),
        (b"", "inputs_not_json"),
    ],
)
def test_inputs_document_refusals_never_echo(data: bytes, code: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_inputs_document(data, source="inputs.json")
    assert caught.value.code == code
    assert SECRET not in str(caught.value)


def test_inputs_document_cap() -> None:
    data = b'{"k": "' + b"a" * (MAX_INPUTS_BYTES - 9) + b'"}'
    assert len(data) == MAX_INPUTS_BYTES
    assert len(parse_inputs_document(data, source="-")["k"]) == MAX_INPUTS_BYTES - 9
    with pytest.raises(UsageError) as caught:
        parse_inputs_document(data + b" ", source="-")
    assert caught.value.code == "inputs_too_large"


@pytest.mark.parametrize(
    ("inputs", "path"),
    [
        ({"name": "x", "count": SECRET}, "count"),
        ({"count": 1}, ""),
        ({"name": "x", "token": SECRET}, "token"),
        ({"name": "x", SECRET: 1}, ""),
    ],
)
def test_validate_inputs_names_the_path_not_the_value(inputs: dict[str, object], path: str) -> None:
    with pytest.raises(UsageError) as caught:
        validate_inputs(inputs, SCHEMA)
    assert caught.value.code == "inputs_invalid"
    assert caught.value.details["path"] == path
    assert SECRET not in str(caught.value)
    validate_inputs({"name": "x", "count": 2}, SCHEMA)


def test_invalid_schema_is_a_parse_error() -> None:
    with pytest.raises(ParseError) as caught:
        validate_inputs({}, {"type": "object", "properties": {"a": {"type": 7}}})
    assert caught.value.code == "schema_invalid"


def test_a_schema_kept_compiled_by_its_object_is_checked_again_once_changed() -> None:
    # the method's schema is one object while its package is unchanged: its validator is kept
    # by that object, and a change made to it in place is seen all the same
    schema: dict[str, object] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    validate_inputs({"n": 1}, schema)
    validate_inputs({"n": 2}, schema)
    schema["properties"] = {"n": {"type": "string"}}
    with pytest.raises(UsageError) as info:
        validate_inputs({"n": 1}, schema)
    assert info.value.code == "inputs_invalid"
    validate_inputs({"n": "one"}, schema)
    other = {"type": "object", "required": ["n"]}  # another object: its own validator
    with pytest.raises(UsageError):
        validate_inputs({}, other)
