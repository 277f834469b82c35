"""Resume-document admission (pure): check every entry against the run's requests.

:func:`admit_resume` either returns a :class:`ResumePlan` (what to record) or raises
:class:`~proctor.errors.ResumeRefused` and the caller changes nothing. The rules:

- ``close`` comes alone (``close_not_alone``);
- a sealed run accepts only nothing new: an empty document, or entries identical to decisions
  it took; anything else is ``run_sealed``;
- an entry whose address the run does not wait on, or never asked, is ``unknown_address``;
- an agent-lane answer to a person's request, or the reverse, is ``wrong_lane``;
- an entry whose digest is not the request's current digest is ``digest_mismatch`` (a request
  that changed after a person saw it is never decided by the old decision);
- a value that does not fit its request's kind is ``answer_invalid``;
- an entry naming a timed wait is ``wait_takes_no_answer`` (a resume at or after its time, with
  no entry, settles it);
- the same decision again is recorded once (nothing to record); a different decision replaces
  one no step has used; once used, only the identical decision is accepted, anything else is
  ``already_answered``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from proctor.contracts.resume import ResumeDocument
from proctor.contracts.values import dataclass, field
from proctor.core.authority import StandingApproval, parse_standing
from proctor.errors import ResumeRefused, UsageError

__all__ = [
    "PERSON_KINDS",
    "RequestView",
    "ResumePlan",
    "admit_resume",
    "decision_words",
    "normalize_decision",
    "option_labels",
    "options_of",
]

PERSON_KINDS = frozenset({"approval", "question", "retry"})
"""Request kinds only a person's lane (``approvals``) decides."""


def options_of(question: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A question's options as ``{label, detail, recommended}`` each, whether the request
    states them as plain strings (``choices``) or as structured options."""
    out: list[dict[str, Any]] = []
    for option in question.get("options") or []:
        if isinstance(option, Mapping):
            out.append(
                {
                    "label": str(option.get("label")),
                    "detail": option.get("detail"),
                    "recommended": option.get("recommended") is True,
                }
            )
        else:
            out.append({"label": str(option), "detail": None, "recommended": False})
    return out


def option_labels(question: Mapping[str, Any]) -> list[str]:
    """The labels an answer's ``option`` may name (see :func:`options_of`)."""
    return [o["label"] for o in options_of(question)]


@dataclass(frozen=True)
class RequestView:
    """A request as the run store holds it.

    Attributes:
        address: ``step``, ``step/retry`` ...
        kind: ``approval``, ``question``, ``retry`` or ``agent_turn``.
        digest: the current ``request_digest``.
        state: ``open`` (waiting), ``decided`` (a decision no step used yet) or ``used``.
        decision: the recorded decision (normalized), if any.
        body: what the request asks (questions are checked against it).
    """

    address: str
    kind: str
    digest: str
    state: str
    decision: Mapping[str, Any] | None = None
    body: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class ResumePlan:
    """What an admitted document records: new or replacing decisions, a standing set, a close."""

    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    standing: tuple[StandingApproval, ...] | None = None
    close: str | None = None
    unchanged: list[str] = field(default_factory=list)


def _refuse(message: str, code: str) -> ResumeRefused:
    return ResumeRefused(message, code=code)


def normalize_decision(request: RequestView, lane: str, entry: Any) -> dict[str, Any]:
    """The decision an entry states, in the form the store records.

    Raises:
        ResumeRefused: ``answer_invalid`` when the entry does not fit the request's kind.
    """
    base: dict[str, Any] = {"request_digest": request.digest, "lane": lane}
    where = f"{lane}.{request.address}"
    if request.kind == "agent_turn":
        failure = getattr(entry, "failure", None)
        if failure is not None:
            return {**base, "failure": {"reason": failure.reason}}
        return {**base, "value": entry.value}
    if request.kind == "approval":
        if entry.approved is None or entry.value is not None:
            raise _refuse(
                f"{where}: an approval takes 'approved' (true or false)", "answer_invalid"
            )
        return {**base, "approved": entry.approved, "reason": entry.reason}
    if request.kind == "retry":
        value = entry.value
        if (
            entry.approved is not None
            or not isinstance(value, dict)
            or set(value) != {"retry"}
            or not isinstance(value["retry"], bool)
        ):
            raise _refuse(f"{where}: a retry takes value: {{retry: true|false}}", "answer_invalid")
        return {**base, "retry": value["retry"]}
    if request.kind == "question":
        if entry.approved is not None or not isinstance(entry.value, dict):
            raise _refuse(
                f"{where}: questions take value: {{ID: {{option?, text?}}}}", "answer_invalid"
            )
        return {**base, "value": _check_answers(where, request.body, entry.value)}
    raise _refuse(f"{where}: the run cannot take an answer for this request", "unknown_address")


def _check_answers(where: str, body: Mapping[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    questions = {q["id"]: q for q in body.get("questions", []) if isinstance(q, dict)}
    for qid, answer in value.items():
        question = questions.get(qid)
        if question is None:
            raise _refuse(f"{where}: no question {qid!r}", "answer_invalid")
        if not isinstance(answer, dict) or not answer or set(answer) - {"option", "text"}:
            raise _refuse(f"{where}.{qid}: an answer is {{option?, text?}}", "answer_invalid")
        option, text = answer.get("option"), answer.get("text")
        options = option_labels(question)
        if option is not None and (not isinstance(option, str) or option not in options):
            raise _refuse(f"{where}.{qid}: option is not one of the question's", "answer_invalid")
        if text is not None:
            if not isinstance(text, str) or len(text) > 4000:
                raise _refuse(f"{where}.{qid}: text is a string of at most 4000", "answer_invalid")
            if not question.get("free_text"):
                raise _refuse(f"{where}.{qid}: this question takes no free text", "answer_invalid")
    for qid, question in questions.items():
        if question.get("required", True) and qid not in value:
            raise _refuse(f"{where}: question {qid!r} is not answered", "answer_invalid")
    return value


def _same(recorded: Mapping[str, Any], decision: dict[str, Any]) -> bool:
    """Whether a recorded decision states ``decision`` (who recorded it is not part of it)."""
    return {k: v for k, v in recorded.items() if k != "decided_by"} == decision


def _entries(doc: ResumeDocument) -> list[tuple[str, str, Any]]:
    return [("answers", a, e) for a, e in doc.answers.items()] + [
        ("approvals", a, e) for a, e in doc.approvals.items()
    ]


def admit_resume(
    doc: ResumeDocument, *, sealed: bool, requests: Sequence[RequestView]
) -> ResumePlan:
    """Check a resume document against a run; nothing is recorded by this function.

    Args:
        doc: the parsed document.
        sealed: whether the run has sealed.
        requests: every request the run has asked (open, decided or used).

    Raises:
        ResumeRefused: with one of the codes in this module's docstring.
    """
    if doc.close is not None and (
        doc.answers or doc.approvals or doc.standing_approvals is not None
    ):
        raise _refuse("close comes alone: remove every other entry", "close_not_alone")
    by_address = {r.address: r for r in requests}
    plan = ResumePlan()
    if sealed and doc.close is not None:
        raise _refuse("the run has sealed; there is nothing to close", "run_sealed")
    if sealed and doc.standing_approvals is not None:
        raise _refuse("the run has sealed; standing approvals change nothing", "run_sealed")
    if doc.close is not None:
        plan.close = doc.close.outcome
        return plan
    for lane, address, entry in _entries(doc):
        request = by_address.get(address)
        if request is None:
            if sealed:
                raise _refuse(f"the run has sealed; it took no answer at {address!r}", "run_sealed")
            raise _refuse(f"the run does not wait on {address!r}", "unknown_address")
        if request.kind == "wait":
            raise _refuse(
                f"{lane}.{address}: a wait takes no answer; a resume at or after its until"
                " (the document {} will do) settles it",
                "wait_takes_no_answer",
            )
        wants = "answers" if request.kind == "agent_turn" else "approvals"
        if lane != wants:
            raise _refuse(f"{lane}.{address}: this request is answered under {wants}", "wrong_lane")
        if entry.request_digest != request.digest:
            if sealed or request.state == "used":
                code = "run_sealed" if sealed else "already_answered"
                raise _refuse(f"{address!r} was answered with another decision", code)
            raise _refuse(
                f"{lane}.{address}: request_digest is not this request's (it may have changed"
                " since it was shown)",
                "digest_mismatch",
            )
        decision = normalize_decision(request, lane, entry)
        if request.decision is not None and _same(request.decision, decision):
            plan.unchanged.append(address)
            continue
        if sealed:
            raise _refuse(f"the run has sealed; {address!r} took another decision", "run_sealed")
        if request.state == "used":
            raise _refuse(
                f"{address!r} was already answered with another decision", "already_answered"
            )
        plan.decisions[address] = decision
    if doc.standing_approvals is not None:
        try:
            plan.standing = parse_standing(doc.standing_approvals)
        except UsageError as exc:
            raise _refuse(exc.message, "resume_invalid") from exc
    return plan


def decision_words(decision: Mapping[str, Any] | None) -> str | None:
    """A recorded decision in words: who decided, approved or declined (or the answers, the
    retry), and the reason; ``None`` when there is none."""
    if not decision:
        return None
    who = decision.get("decided_by") or "a resume document"
    parts = [f"decided by {who}"]
    if decision.get("approved") is True:
        parts.append("approved")
    elif decision.get("approved") is False:
        parts.append("declined")
    value = decision.get("value")
    if isinstance(value, Mapping) and "retry" in value:
        parts.append("sent again" if value["retry"] else "not sent again")
    elif isinstance(value, Mapping) and value:
        chosen = []
        for qid, answer in sorted(value.items()):
            if isinstance(answer, Mapping) and "option" in answer:
                chosen.append(f"{qid}={answer['option']}")
            elif isinstance(answer, Mapping) and "text" in answer:
                chosen.append(f"{qid}={json.dumps(answer['text'], ensure_ascii=False)}")
            else:
                chosen.append(f"{qid}={json.dumps(answer, ensure_ascii=False)}")
        parts.append("answered " + ", ".join(chosen))
    if decision.get("reason"):
        parts.append(f"reason: {decision['reason']}")
    return "; ".join(parts)
