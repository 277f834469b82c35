"""The output schema ``tools/list`` publishes accepts exactly what the envelope's schema does."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from proctor.contracts.envelope import RunEnvelope, run_envelope_schema
from proctor.mcp.shared import compact_nullables

ENVELOPE = RunEnvelope(
    status="sealed", outcome="completed", run_id="r", skill="s", method="m", result={"a": 1}
).to_json()

DOCS: list[Any] = [
    ENVELOPE,
    {**ENVELOPE, "outcome": None},
    {**ENVELOPE, "outcome": "maybe"},
    {**ENVELOPE, "run_id": None},
    {**ENVELOPE, "run_id": 7},
    {**ENVELOPE, "refusal": None},
    {**ENVELOPE, "refusal": {"code": "c", "message": "m"}},
    {**ENVELOPE, "refusal": {"code": "c"}},
    {**ENVELOPE, "refusal": {"code": "c", "message": "m", "extra": 1}},
    {**ENVELOPE, "refusal": "refused"},
    {**ENVELOPE, "requests": None},
    {**ENVELOPE, "requests": [{"kind": "approval"}]},
    {**ENVELOPE, "requests": [1]},
    {**ENVELOPE, "spend_micro_usd": 3},
    {**ENVELOPE, "spend_micro_usd": 1.5},
    {**ENVELOPE, "trace": [{"step": "a", "tool": "echo", "call_id": "c", "outcome": "done"}]},
    {**ENVELOPE, "trace": [{"step": "a", "tool": "echo", "call_id": "c", "outcome": "completed"}]},
    {**ENVELOPE, "unknown": True},
    None,
    [],
]


@pytest.mark.parametrize("doc", DOCS)
def test_the_published_schema_accepts_exactly_what_the_envelope_schema_accepts(doc: Any) -> None:
    original = Draft202012Validator(run_envelope_schema())
    published = Draft202012Validator(compact_nullables(run_envelope_schema()))
    assert published.is_valid(doc) == original.is_valid(doc)


def test_only_a_typed_branch_is_folded() -> None:
    null = {"type": "null"}
    assert compact_nullables({"anyOf": [{"type": "string"}, null]}) == {"type": ["string", "null"]}
    assert compact_nullables({"anyOf": [null, {"enum": ["a"]}]}) == {"enum": ["a", None]}
    # enum, const and combinators hold for a null too: folding them would refuse null
    kept = [
        {"anyOf": [{"type": "string", "enum": ["a"]}, null]},
        {"anyOf": [{"type": "string", "const": "a"}, null]},
        {"anyOf": [{"type": "object", "allOf": [{"required": ["a"]}]}, null]},
        {"anyOf": [{"type": "string"}, null], "type": "string"},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    ]
    for schema in kept:
        assert compact_nullables(schema) == schema
