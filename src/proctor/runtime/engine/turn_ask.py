"""``ask_human`` in a turn a host works: the run waits for a person's answer, then the same call
returns it.

A turn with ``ask: true`` offers ``ask_human``: ``{question}`` (one question answered in free
text) or ``{questions: [...]}`` (one to three, each ``{id, prompt, options?: [{label, detail?,
recommended?}], free_text?, required?}`` with at most four options and at most one
recommended: the same shape as an ask step's questions, read by the same strict model).
The host's call opens a question request at the call's own address
(``<step>/turn/<call_id>``) and the run pauses on it, as an approval of a turn call does; the
call answers ``answer_pending``. A person answers it with
``proctor resume`` (or ``proctor approve``); the same call (same ``call_id``) then returns
``{"answers": {ID: {option?, text?}}}`` (``answer`` is the ID of a single ``question``).
Asking something else under that ``call_id`` is a new request
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


_SHAPE = (
    "ask_human takes {question: a non-empty text} or {questions: [1 to 3 of {id, prompt,"
    " options?: [up to 4 of {label, detail?, recommended?}], free_text?, required?}]}"
)


def _questions(args: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, str]:
    """The questions ``args`` asks, as a request states them; else ``None`` and why."""
    from proctor.contracts.skill import AskQuestion

    question = args.get("question")
    if set(args) == {"question"}:
        if not isinstance(question, str) or not question.strip():
            return None, _SHAPE
        if len(question) > QUESTION_MAX:
            return None, f"a question has at most {QUESTION_MAX} chars"
        one = {"id": "answer", "prompt": question, "options": [], "free_text": True}
        return [{**one, "required": True}], ""
    given = args.get("questions")
    if set(args) != {"questions"} or not isinstance(given, list) or not 1 <= len(given) <= 3:
        return None, _SHAPE
    out: list[dict[str, Any]] = []
    for index, item in enumerate(given):
        try:
            parsed = AskQuestion.model_validate(item)
        except (ValueError, TypeError) as exc:
            return None, f"questions[{index}]: {str(exc).splitlines()[0][:300]}"
        if parsed.choices is not None:
            return None, f"questions[{index}]: name choices as options: [{{label, detail?}}]"
        if len(parsed.prompt) > QUESTION_MAX:
            return None, f"questions[{index}]: a prompt has at most {QUESTION_MAX} chars"
        out.append(parsed.request_form())
    if len({q["id"] for q in out}) != len(out):
        return None, "each question has its own id"
    return out, ""


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
    questions, problem = _questions(args)
    if questions is None:
        return refused("arguments_invalid", problem), None
    body: dict[str, Any] = {"kind": "question", "address": address, "questions": questions}
    if run.authority.expires_in is not None:  # the run's deadline for every request it opens
        body.update(expires_in=run.authority.expires_in, on_expiry="decline")
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
