"""``ask_human {questions}`` in a host-worked turn: structured options reach the request whole,
an answer naming one of them returns through the same call, and a malformed ask is refused
without opening any request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from proctor.errors import ResumeRefused
from tests.fuzzing import FUZZ, mutated
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

ASKING = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: draft
        agent:
          instructions: Ask where to ship, then answer with it.
          ask: true
          output: {type: object}
"""

QUESTIONS: dict[str, Any] = {
    "questions": [
        {
            "id": "region",
            "prompt": "Which region first?",
            "options": [
                {"label": "eu", "detail": "Frankfurt", "recommended": True},
                {"label": "us"},
            ],
            "free_text": True,
        },
        {"id": "why", "prompt": "Why?", "required": False},
    ]
}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "asking", ASKING)
    return root


def test_structured_questions_pause_then_answer_the_same_call(ws: Path) -> None:
    s = session(ws)
    run_id = s.run("asking", cwd=ws).run_id or ""
    asked = s.turn_call(run_id, "draft", "ask_human", QUESTIONS, "q1")
    assert (asked.error or {})["code"] == "answer_pending"
    (request,) = [r for r in s.envelope(run_id).requests or [] if r["kind"] == "question"]
    region, why = request["questions"]
    assert region["options"] == [
        {"label": "eu", "detail": "Frankfurt", "recommended": True}, {"label": "us"},
    ]  # fmt: skip
    assert region["free_text"] is True and why["options"] == [] and why["required"] is False
    digest = request["request_digest"]
    wrong = {"approvals": {"draft/turn/q1": {"request_digest": digest,
                                             "value": {"region": {"option": "mars"}}}}}  # fmt: skip
    with pytest.raises(ResumeRefused) as caught:
        s.resume(run_id, wrong)
    assert caught.value.code == "answer_invalid"
    answer = {"region": {"option": "us"}, "why": {"text": "launch partner"}}
    s.resume(run_id, {"approvals": {"draft/turn/q1": {"request_digest": digest, "value": answer}}})
    answered = s.turn_call(run_id, "draft", "ask_human", QUESTIONS, "q1")
    assert answered.status == "completed" and answered.result == {"answers": answer}


@pytest.mark.parametrize(
    "args",
    [
        {"questions": []},
        {"questions": [{"id": "a", "prompt": "?"}] * 4},
        {"questions": [{"id": "a", "prompt": "?"}, {"id": "a", "prompt": "again?"}]},
        {"questions": [{"id": "a", "prompt": "?",
                        "options": [{"label": str(n)} for n in range(5)]}]},
        {"questions": [{"id": "a", "prompt": "?", "options": [
            {"label": "x", "recommended": True}, {"label": "y", "recommended": True}]}]},
        {"questions": [{"id": "a", "prompt": "?", "choices": ["x"]}]},
        {"questions": [{"id": "a", "prompt": "?", "colour": "red"}]},
        {"question": "one", "questions": [{"id": "a", "prompt": "?"}]},
        {"questions": "not a list"},
    ],
)  # fmt: skip
def test_a_malformed_ask_is_refused_and_opens_nothing(ws: Path, args: dict[str, Any]) -> None:
    s = session(ws)
    run_id = s.run("asking", cwd=ws).run_id or ""
    out = s.turn_call(run_id, "draft", "ask_human", args, "q1")
    assert out.status == "refused" and (out.error or {})["code"] == "arguments_invalid"
    assert [r for r in s.store.requests(run_id) if r.kind == "question"] == []


@FUZZ
@given(mutated(QUESTIONS))
def test_fuzz_ask_human_arguments(args: Any) -> None:
    from proctor.runtime.engine.turn_ask import _questions

    questions, problem = _questions(args if isinstance(args, dict) else {"questions": args})
    assert (questions is None) == bool(problem)
    for q in questions or []:
        assert set(q) == {"id", "prompt", "options", "free_text", "required"}
        assert len(q["options"]) <= 4
