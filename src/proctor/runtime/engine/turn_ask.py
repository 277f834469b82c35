"""``ask_human`` in a turn a host works: the run waits for a person's answer, then the same call
returns it.

A turn with ``ask: true`` offers ``ask_human {question}``. The host's call opens a question
request at the call's own address (``<step>/turn/<call_id>``) and the run pauses on it, as an
approval of a turn call does; the call answers ``answer_pending``. A person answers it with
``proctor resume`` (or ``proctor approve``); the same call (same ``call_id``) then returns
``{"answers": {"answer": ...}}``. Asking something else under that ``call_id`` is a new request
(its digest differs), so an old answer never answers a different question.
"""

from __future__ import annotations

from typing import Any

from proctor.runtime.admission.governor import CallOutcome
from proctor.runtime.engine.host import StepRunner
from proctor.runtime.records.runs import RequestRecord

__all__ = ["QUESTION_MAX", "ask_human"]

QUESTION_MAX = 4000
"""Characters a question may have (it is shown to a person whole)."""


def ask_human(
    run: StepRunner, turn: dict[str, Any], args: dict[str, Any], call_id: str
) -> tuple[CallOutcome, RequestRecord | None]:
    """The outcome of a host's ``ask_human`` call, and the request to pause on (``None`` when
    the call is refused or answered)."""
    step_id = str(turn["step"])
    address = f"{step_id}/turn/{call_id}"

    def refused(code: str, message: str) -> CallOutcome:
        error = {"code": code, "message": message}
        return CallOutcome(address, "ask_human", step_id, "refused", error=error)

    if not turn.get("ask"):
        return refused("tool_not_allowed", "this turn was not given ask: true"), None
    question = args.get("question")
    if set(args) != {"question"} or not isinstance(question, str) or not question.strip():
        return refused("arguments_invalid", "ask_human takes {question: a non-empty text}"), None
    if len(question) > QUESTION_MAX:
        return refused("arguments_invalid", f"a question has at most {QUESTION_MAX} chars"), None
    body = {
        "kind": "question",
        "address": address,
        "questions": [
            {"id": "answer", "prompt": question, "options": [], "free_text": True, "required": True}
        ],
    }
    request = run.open_request(address, body)
    if request.decision is None:
        pending = refused(
            "answer_pending",
            "the run now waits for a person to answer; call ask_human again with the same"
            " call_id once they have",
        )
        return pending, request
    answers = request.decision.get("value")
    run.s.audit.emit(
        "ask_human_answered",
        run_id=run.run_id,
        step_index=turn.get("step_index"),
        address=address,
        request_digest=request.request_digest,
    )
    return CallOutcome(
        address, "ask_human", step_id, "completed", result={"answers": answers}
    ), None
