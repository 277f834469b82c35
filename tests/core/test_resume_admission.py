"""Resume-document admission (pure): every rule with its refusal code."""

from __future__ import annotations

from typing import Any

import pytest

from proctor.contracts.resume import parse_resume_document
from proctor.core.resume import RequestView, admit_resume
from proctor.errors import ResumeRefused

D1, D2, D3 = ("sha256:" + c * 64 for c in "abc")

APPROVAL = RequestView("edit", "approval", D1, "open")
TURN = RequestView("draft", "agent_turn", D2, "open")
QUESTION = RequestView(
    "pick",
    "question",
    D3,
    "open",
    body={
        "questions": [
            {"id": "colour", "options": ["red", "blue"], "free_text": False, "required": True},
            {"id": "note", "options": [], "free_text": True, "required": False},
        ]
    },
)


def admit(doc: dict[str, Any], requests: list[RequestView], sealed: bool = False) -> Any:
    return admit_resume(parse_resume_document(doc), sealed=sealed, requests=requests)


def refused(
    doc: dict[str, Any], requests: list[RequestView], code: str, sealed: bool = False
) -> None:
    with pytest.raises(ResumeRefused) as exc:
        admit(doc, requests, sealed)
    assert exc.value.code == code, exc.value.message


def test_approval_recorded() -> None:
    plan = admit({"approvals": {"edit": {"request_digest": D1, "approved": True}}}, [APPROVAL])
    assert plan.decisions["edit"]["approved"] is True


def test_refusals() -> None:
    ok = {"request_digest": D1, "approved": True}
    refused({"approvals": {"other": ok}}, [APPROVAL], "unknown_address")
    refused({"approvals": {"edit": {**ok, "request_digest": D2}}}, [APPROVAL], "digest_mismatch")
    refused({"answers": {"edit": {"request_digest": D1, "value": {}}}}, [APPROVAL], "wrong_lane")
    refused(
        {"approvals": {"draft": {"request_digest": D2, "approved": True}}}, [TURN], "wrong_lane"
    )
    refused({"approvals": {"edit": {"request_digest": D1}}}, [APPROVAL], "answer_invalid")
    refused(
        {"approvals": {"edit": ok}, "close": {"outcome": "declined"}}, [APPROVAL], "close_not_alone"
    )
    refused({"close": {"outcome": "declined"}}, [APPROVAL], "run_sealed", sealed=True)


def test_one_bad_entry_refuses_the_whole_document() -> None:
    doc = {
        "approvals": {
            "edit": {"request_digest": D1, "approved": True},
            "other": {"request_digest": D1, "approved": True},
        }
    }
    refused(doc, [APPROVAL], "unknown_address")


def test_same_decision_twice_and_replacement() -> None:
    decided = RequestView(
        "edit",
        "approval",
        D1,
        "decided",
        decision={"request_digest": D1, "lane": "approvals", "approved": True, "reason": None},
    )
    same = admit({"approvals": {"edit": {"request_digest": D1, "approved": True}}}, [decided])
    assert same.decisions == {} and same.unchanged == ["edit"]
    other = admit({"approvals": {"edit": {"request_digest": D1, "approved": False}}}, [decided])
    assert other.decisions["edit"]["approved"] is False
    used = RequestView("edit", "approval", D1, "used", decision=decided.decision)
    refused(
        {"approvals": {"edit": {"request_digest": D1, "approved": False}}},
        [used],
        "already_answered",
    )
    again = admit({"approvals": {"edit": {"request_digest": D1, "approved": True}}}, [used])
    assert again.decisions == {}


def test_sealed_run_takes_only_what_it_took() -> None:
    used = RequestView(
        "edit",
        "approval",
        D1,
        "used",
        decision={"request_digest": D1, "lane": "approvals", "approved": True, "reason": None},
    )
    assert admit({}, [used], sealed=True).decisions == {}
    assert admit(
        {"approvals": {"edit": {"request_digest": D1, "approved": True}}}, [used], sealed=True
    ).unchanged
    refused(
        {"approvals": {"edit": {"request_digest": D1, "approved": False}}},
        [used],
        "run_sealed",
        sealed=True,
    )


@pytest.mark.parametrize(
    "value",
    [
        {"colour": {"option": "green"}},
        {"colour": {"text": "free"}},
        {"note": {"text": "only the optional one"}},
        {"colour": {"option": "red"}, "extra": {"option": "x"}},
        {"colour": {}},
    ],
)
def test_question_answers_checked(value: dict[str, Any]) -> None:
    refused(
        {"approvals": {"pick": {"request_digest": D3, "value": value}}},
        [QUESTION],
        "answer_invalid",
    )


def test_question_answer_accepted() -> None:
    value = {"colour": {"option": "red"}, "note": {"text": "thanks"}}
    plan = admit({"approvals": {"pick": {"request_digest": D3, "value": value}}}, [QUESTION])
    assert plan.decisions["pick"]["value"] == value


def test_retry_takes_a_boolean() -> None:
    retry = RequestView("run/retry", "retry", D1, "open")
    refused(
        {"approvals": {"run/retry": {"request_digest": D1, "value": {"retry": "yes"}}}},
        [retry],
        "answer_invalid",
    )
    plan = admit(
        {"approvals": {"run/retry": {"request_digest": D1, "value": {"retry": False}}}}, [retry]
    )
    assert plan.decisions["run/retry"]["retry"] is False


def test_standing_approvals_parsed() -> None:
    plan = admit({"standing_approvals": [{"local": True}]}, [APPROVAL])
    assert plan.standing is not None and plan.standing[0].kind == "local"
    refused({"standing_approvals": [{"local": 1}]}, [APPROVAL], "resume_invalid")
