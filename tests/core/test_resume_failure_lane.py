"""The agent turn's failure lane in resume documents: ``answers: {turn: {failure: {reason}}}``."""

from __future__ import annotations

from typing import Any

import pytest

from proctor.contracts.resume import parse_resume_document
from proctor.core.resume import RequestView, admit_resume
from proctor.errors import ResumeRefused

D1, D2 = ("sha256:" + c * 64 for c in "ab")
TURN = RequestView("draft", "agent_turn", D1, "open")
APPROVAL = RequestView("edit", "approval", D2, "open")


def admit(doc: dict[str, Any], *requests: RequestView) -> Any:
    return admit_resume(parse_resume_document(doc), sealed=False, requests=list(requests))


def test_failure_is_recorded_as_the_turns_decision() -> None:
    doc = {"answers": {"draft": {"request_digest": D1, "failure": {"reason": "cannot"}}}}
    plan = admit(doc, TURN)
    assert plan.decisions["draft"] == {
        "request_digest": D1,
        "lane": "answers",
        "failure": {"reason": "cannot"},
    }


def test_a_failure_replaces_an_unused_output_and_an_identical_one_is_unchanged() -> None:
    output = {"request_digest": D1, "lane": "answers", "value": {"x": 1}}
    decided = RequestView("draft", "agent_turn", D1, "decided", output)
    doc = {"answers": {"draft": {"request_digest": D1, "failure": {"reason": "no"}}}}
    assert "draft" in admit(doc, decided).decisions
    used = RequestView("draft", "agent_turn", D1, "used", output)
    with pytest.raises(ResumeRefused) as exc:
        admit(doc, used)
    assert exc.value.code == "already_answered"


@pytest.mark.parametrize(
    "entry",
    [
        {"request_digest": D1},
        {"request_digest": D1, "value": 1, "failure": {"reason": "x"}},
        {"request_digest": D1, "failure": {}},
        {"request_digest": D1, "failure": {"reason": "x", "extra": 1}},
        {"request_digest": D1, "failure": {"reason": "x" * 4001}},
    ],
)
def test_an_answer_takes_value_or_failure_exactly_one(entry: dict[str, Any]) -> None:
    with pytest.raises(ResumeRefused) as exc:
        admit({"answers": {"draft": entry}}, TURN)
    assert exc.value.code == "resume_invalid"


def test_value_null_is_still_an_output() -> None:
    plan = admit({"answers": {"draft": {"request_digest": D1, "value": None}}}, TURN)
    assert plan.decisions["draft"]["value"] is None


def test_failure_for_a_persons_request_is_the_wrong_lane() -> None:
    doc = {"answers": {"edit": {"request_digest": D2, "failure": {"reason": "no"}}}}
    with pytest.raises(ResumeRefused) as exc:
        admit(doc, APPROVAL)
    assert exc.value.code == "wrong_lane"
