"""Fuzz resume documents from bytes to a plan: the strict reader, the ``proctor.resume.v1``
model and admission against a run's requests. Only a ProctorError may escape; a document
repeating a key is always ``duplicate_key``, one nested past 64 always ``too_deep``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.contracts.resume import parse_resume_document
from proctor.core.resume import RequestView, admit_resume
from proctor.errors import ResumeRefused
from tests.fuzzing import FUZZ, VALUES, mutated, only_proctor_errors, spliced

D1, D2, D3 = ("sha256:" + c * 64 for c in "abc")
REQUESTS = [
    RequestView("edit", "approval", D1, "open"),
    RequestView("draft", "agent_turn", D2, "decided", decision={"lane": "answers"}),
    RequestView(
        "pick", "question", D3, "open",
        body={"questions": [{"id": "c", "options": ["r"], "free_text": True, "required": True}]},
    ),
    RequestView("step/retry", "retry", D1, "used", decision={"retry": True}),
]  # fmt: skip
BASE: dict[str, Any] = {
    "schema": "proctor.resume.v1",
    "answers": {"draft": {"request_digest": D2, "value": {"reply": "hi"}}},
    "approvals": {
        "edit": {"request_digest": D1, "approved": True, "reason": "ok"},
        "pick": {"request_digest": D3, "value": {"c": {"option": "r", "text": "t"}}},
        "step/retry": {"request_digest": D1, "value": {"retry": False}},
    },
    "standing_approvals": [{"kind": "edits", "paths": ["docs/**"]}],
}


def _admit(data: bytes | str | dict[str, Any], sealed: bool) -> None:
    doc = parse_resume_document(data)
    admit_resume(doc, sealed=sealed, requests=REQUESTS)


@FUZZ
@given(mutated(BASE), st.booleans())
def test_a_subtree_replaced(doc: Any, sealed: bool) -> None:
    only_proctor_errors(lambda: _admit(json.dumps(doc).encode(), sealed))
    if isinstance(doc, dict):
        only_proctor_errors(lambda: _admit(doc, sealed))


@FUZZ
@given(st.one_of(spliced(json.dumps(BASE)), st.text(max_size=100)), st.booleans())
def test_text_spliced_or_arbitrary(text: str, sealed: bool) -> None:
    only_proctor_errors(lambda: _admit(text, sealed))
    only_proctor_errors(lambda: _admit(text.encode("utf-8", "surrogatepass"), sealed))


@FUZZ
@given(mutated(BASE), st.sampled_from(['"answers"', '"request_digest"', '"approved"', '"x"']))
def test_a_repeated_key_anywhere_is_duplicate_key(doc: Any, key: str) -> None:
    text = json.dumps(doc)
    if not text.startswith("{"):
        return
    # the same key twice in the top-level object, whatever else the document holds
    text = "{" + f"{key}: 1, {key}: 2" + ("," if text != "{}" else "") + text[1:]
    with pytest.raises(ResumeRefused) as refused:
        _admit(text, False)
    assert refused.value.code == "duplicate_key"


@pytest.mark.parametrize("depth", [65, 1_000, 100_000])
def test_deep_documents_are_too_deep(depth: int) -> None:
    value = "[" * depth + "]" * depth
    text = f'{{"answers": {{"draft": {{"request_digest": "{D2}", "value": {value}}}}}}}'
    with pytest.raises(ResumeRefused) as refused:
        _admit(text, False)
    assert refused.value.code == "too_deep"
    with pytest.raises(ResumeRefused) as unclosed:
        _admit("[" * depth, False)
    assert unclosed.value.code == "too_deep"


@FUZZ
@given(VALUES)
def test_any_value_as_a_mapping_host_sends(value: Any) -> None:
    only_proctor_errors(
        lambda: _admit({"answers": {"draft": {"request_digest": D2, "value": value}}}, False)
    )


def test_an_unpaired_surrogate_is_refused_not_a_crash() -> None:
    entry = '"request_digest": "' + D2 + '", "value": '
    text = '{"answers": {"draft": {' + entry + '{"a": "\\ud800"}}}}'
    with pytest.raises(ResumeRefused) as refused:
        _admit(text, False)
    assert refused.value.code == "resume_invalid"
    paired = '{"answers": {"draft": {' + entry + '"\\ud83d\\ude00"}}}'
    _admit(paired, False)  # a pair is one character (an emoji): fine
    with pytest.raises(ResumeRefused):
        _admit({"answers": {"draft": {"request_digest": D2, "value": "\ud800"}}}, False)
