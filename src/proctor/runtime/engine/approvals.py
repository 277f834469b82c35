"""What people decide: the requests a workspace waits on, shown safely, and one decision
bound to the digest of exactly the request a person saw.

Every surface a person decides on (``proctor approve``/``decline``, the web console, an MCP
client that relays a form) goes through :func:`decide`, which writes the
``proctor.resume.v1`` document itself and hands it to :meth:`Session.resume` with the
author of the decision, so the author is recorded in the run store, the audit log and the
receipt, and admission is the same as for a hand-written document.

A request is shown from the run's sanitized envelope (the view a run prints when it pauses),
never from the raw body in the store, so a secret the act carries is never displayed.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proctor.contracts import json_strict
from proctor.contracts.values import dataclass, field
from proctor.core.resume import PERSON_KINDS, decision_words
from proctor.errors import ParseError, ResumeRefused, UsageError
from proctor.receipts.canonical import digest as digest_of
from proctor.runtime.boundary.sanitize import scrub_value
from proctor.runtime.engine.decisions import approvers_of, needed_approvers
from proctor.runtime.engine.request_lines import request_lines, summary_of
from proctor.runtime.engine.stored_envelope import is_reference, plain_view
from proctor.runtime.records.runs import RequestRecord, RunRecord

if TYPE_CHECKING:
    from proctor.contracts.envelope import RunEnvelope
    from proctor.runtime.engine.session import Session

__all__ = [
    "PENDING_SCHEMA",
    "Shown",
    "decide",
    "decision_json",
    "os_author",
    "pending",
    "pending_page",
    "run_requests",
    "shown_request",
    "summary_of",
]

PENDING_SCHEMA = "proctor.pending.v1"
PENDING_PAGE = 200
"""Open requests on one page of ``proctor pending`` unless ``--limit`` says otherwise."""
ARTIFACT_MAX = 64 * 1024 * 1024


@dataclass(frozen=True)
class Shown:
    """One request as a person sees it.

    Attributes:
        run_id, skill, method: the run that asks.
        address, kind, request_digest: the request (``kind``: approval, question, retry or
            agent_turn).
        state: ``open``, ``decided`` or ``used``; ``run_status`` the run's status.
        waiting_since: when the run last changed (its pause), ISO 8601 UTC.
        view: the sanitized request (payload, questions, reason, ...).
        decision: the recorded decision, if any (``approved``/``retry``/``value`` and
            ``decided_by``).
    """

    run_id: str
    skill: str
    method: str
    address: str
    kind: str
    request_digest: str
    state: str
    run_status: str
    waiting_since: str
    view: dict[str, Any] = field(default_factory=dict)
    decision: dict[str, Any] | None = None
    cursor: int = 0
    """Where the request stands in the store's order of first asking: a page's ``after``."""

    @property
    def summary(self) -> str:
        """One line saying what the request asks (see :func:`summary_of`)."""
        return summary_of(self.kind, self.view)

    @property
    def for_people(self) -> bool:
        """Whether a person decides it (an agent turn is the agent's)."""
        return self.kind in PERSON_KINDS

    def to_json(self) -> dict[str, Any]:
        """The request as ``proctor.pending.v1`` lists it (``approvals`` and
        ``approved_so_far`` only for a request that needs more than one person)."""
        extra: dict[str, Any] = {}
        if "approved_so_far" in self.view:
            extra = {
                "approvals": self.view.get("approvals"),
                "approved_so_far": self.view["approved_so_far"],
            }
        return {
            **extra,
            "run_id": self.run_id,
            "skill": self.skill,
            "method": self.method,
            "address": self.address,
            "kind": self.kind,
            "request_digest": self.request_digest,
            "cursor": self.cursor,
            "state": self.state,
            "summary": self.summary,
            "waiting_since": self.waiting_since,
            "decided_by": (self.decision or {}).get("decided_by"),
            "decision": decision_json(self.decision),
            "payload": self.view.get("payload"),
        }

    def lines(self) -> list[tuple[str, str]]:
        """Every field of the request, as styled lines (see :func:`request_lines`)."""
        return request_lines(self.kind, self.view)


def decision_json(decision: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A recorded decision as JSON output lists it: who, ``approved`` (true, false, or null
    for answers and retries), the reason, the answers or the retry choice, and in words."""
    if not decision:
        return None
    value = decision.get("value")
    return {
        "decided_by": decision.get("decided_by"),
        "approved": decision.get("approved"),
        "reason": decision.get("reason"),
        "answers": value if isinstance(value, dict) and "retry" not in value else None,
        "retry": value.get("retry") if isinstance(value, dict) and "retry" in value else None,
        "words": decision_words(decision),
    }


def os_author() -> str:
    """The author of a decision taken in this terminal: ``os:`` and the OS user name."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = f"uid{os.getuid()}"
    return f"os:{name}"


def _view(session: Session, run: RunRecord, request: RequestRecord) -> dict[str, Any]:
    """The sanitized view of ``request``: the run envelope's, when it shows this digest; else
    the stored body scrubbed of credential shapes and secret-named fields."""
    envelope = run.data.get("envelope")
    for shown in (envelope or {}).get("requests") or [] if isinstance(envelope, dict) else []:
        if (
            isinstance(shown, dict)
            and shown.get("address") == request.address
            and shown.get("request_digest") == request.request_digest
        ):
            # a reference (see .stored_envelope): the view was this row's body, unredacted
            view = plain_view(request) if is_reference(shown) else dict(shown)
            break
    else:
        view, _ = scrub_value(request.body)
    artifact = view.get("payload_artifact")
    if "payload" not in view and isinstance(artifact, dict):
        loaded = _artifact(session, artifact)
        if loaded is not None:
            view["payload"] = loaded
    return view


def _artifact(session: Session, ref: Mapping[str, Any]) -> Any:
    """A payload kept as an artifact, when its bytes still match its digest (scrubbed)."""
    want = ref.get("digest")
    if not isinstance(want, str) or not want.startswith("sha256:"):
        return None
    path = session.workspace.state_dir / "artifacts" / (want.removeprefix("sha256:") + ".json")
    try:
        with path.open("rb") as handle:
            data = handle.read(ARTIFACT_MAX + 1)
        # strict: the payload shown must be the one value its digest names, not one of two
        # readings of a file with a key twice
        value = json_strict.loads(data, source="artifact")
    except (OSError, ParseError):
        return None
    if len(data) > ARTIFACT_MAX or digest_of(value) != want:
        return None
    return scrub_value(value)[0]


def _shown(session: Session, run: RunRecord, request: RequestRecord) -> Shown:
    view = _view(session, run, request)
    if request.state == "open" and needed_approvers(request.body) > 1:
        # who has approved so far (the two-person rule): shown, never part of the digest
        view["approved_so_far"] = approvers_of(run, request.address, request.request_digest)
    return Shown(
        run_id=run.run_id,
        skill=run.skill,
        method=run.method,
        address=request.address,
        kind=request.kind,
        request_digest=request.request_digest,
        state=request.state,
        run_status=run.status,
        waiting_since=run.updated_at,
        view=view,
        decision=request.decision,
        cursor=request.cursor,
    )


def pending(session: Session, *, limit: int = 200) -> list[Shown]:
    """Every request still open on a run of the workspace that has not sealed, oldest first
    (at most ``limit``), through one store query."""
    return pending_page(session, limit=limit)[0]


def pending_page(
    session: Session, *, after: int | None = None, limit: int = PENDING_PAGE
) -> tuple[list[Shown], int | None]:
    """One page of the open requests, oldest first: at most ``limit`` asked after the cursor
    ``after`` (a request's ``cursor``), and the cursor of the next page (``None`` on the last).

    One keyset query over the store's index of open requests (``limit + 1`` rows read to
    know whether another page follows), so a page costs the same with 10 or 10,000 open.
    """
    rows = session.store.pending_requests(after=after, limit=limit + 1)
    page = [_shown(session, p.run, p.request) for p in rows[:limit]]
    return page, (page[-1].cursor if len(rows) > limit and page else None)


def run_requests(session: Session, run_id: str) -> list[Shown]:
    """Every request ``run_id`` asked (open, decided and used), in the order first asked.

    Raises:
        UsageError: ``run_not_found``.
    """
    run = session.store.get_run(run_id)
    if run is None:
        raise UsageError(f"no run with id {run_id!r} in this workspace", code="run_not_found")
    return [_shown(session, run, r) for r in session.store.requests(run_id)]


def shown_request(session: Session, run_id: str, address: str | None = None) -> Shown:
    """The request of ``run_id`` at ``address``; without one, the only open request a person
    decides.

    Raises:
        UsageError: ``run_not_found``; ``request_not_found`` (no request at that address);
            ``address_required`` (the run waits on several: the message lists them);
            ``nothing_pending`` (the run waits on no person).
    """
    every = run_requests(session, run_id)
    if address is not None:
        for shown in every:
            if shown.address == address:
                return shown
        raise UsageError(f"run {run_id} has no request at {address!r}", code="request_not_found")
    waiting = [s for s in every if s.state == "open" and s.for_people]
    if len(waiting) == 1 and every[0].run_status != "sealed":
        return waiting[0]
    if not waiting or every[0].run_status == "sealed":
        raise UsageError(f"run {run_id} waits on no person's decision", code="nothing_pending")
    names = ", ".join(s.address for s in waiting)
    raise UsageError(
        f"run {run_id} waits on several requests ({names}): name one", code="address_required"
    )


def _decline_questions(
    session: Session,
    run_id: str,
    address: str,
    request_digest: str,
    decided_by: str,
    reason: str | None,
) -> RunEnvelope:
    """Close the run ``declined`` on a person's word, auditing who closed it first and keeping
    the decline (who, and the reason) on the request, where history and the console show it.

    The run's lease is held from the check to the close, so a decline that another decision
    beat (a second click, another person, a worker driving the run) is refused before anything
    is audited, and the log never names an author of a close that did not happen.

    Raises:
        ResumeRefused: ``run_busy``, ``run_sealed``, ``already_answered``, ``digest_mismatch``;
            and every refusal of :meth:`Session.resume`.
    """
    from proctor.runtime.engine.start import check_parts

    session._acquire(run_id)
    try:
        shown = shown_request(session, run_id, address)
        if shown.run_status == "sealed":
            raise ResumeRefused(f"run {run_id} has sealed", code="run_sealed")
        if shown.state == "used":
            raise ResumeRefused(f"{address!r} was already answered", code="already_answered")
        if request_digest != shown.request_digest:
            raise ResumeRefused(
                f"{address!r}: the digest is not this request's; nothing was recorded",
                code="digest_mismatch",
            )
        check_parts(session)
        # who closes it is audited first: the close seals the run and its receipt commits
        # the audit log's head, so the author is inside what the receipt covers
        session.audit.emit(
            "close_decided",
            run_id=run_id,
            step_index=None,
            address=address,
            outcome="declined",
            request_digest=request_digest,
            decided_by=decided_by,
        )
        declined = {"request_digest": request_digest, "approved": False, "reason": reason}
        session.store.record_decisions(run_id, {address: {**declined, "decided_by": decided_by}})
        return session.resume(run_id, {"close": {"outcome": "declined"}})
    finally:
        session._release(run_id)


def _waiting_for_more(session: Session, shown: Shown) -> RunEnvelope:
    """The paused envelope after one of several approvers: it says who has approved and that
    another person approves the same request, and names that command as the way on (a resume
    document approving it now would be refused ``approvals_needed``)."""
    envelope = session.envelope(shown.run_id)
    record = session.store.get_run(shown.run_id)
    people = [] if record is None else approvers_of(record, shown.address, shown.request_digest)
    needed = needed_approvers(shown.view)
    command = f"proctor approve {shown.run_id} {shown.address}"
    envelope.notes = [
        *envelope.notes,
        f"{shown.address} is approved by {', '.join(people) or 'nobody yet'} ({len(people)} of"
        f" {needed} distinct people); it waits for another person: `{command}`, the console, or"
        " an MCP client",
    ]
    envelope.resume_command = command
    return envelope


def _count_approver(session: Session, shown: Shown, decided_by: str) -> list[str] | None:
    """Count ``decided_by`` as approving ``shown`` (once, however often they approve) in the
    run's record, bound to the request's digest; every approver when enough have, else
    ``None``. Under the run's lease, so two people approving at once are both counted.

    Raises:
        ResumeRefused: ``run_busy``; ``approver_unknown`` (a decision with no identity of a
            person cannot count towards a two-person rule).
    """
    if not decided_by or decided_by in ("deadline",) or ":" not in decided_by:
        raise ResumeRefused(
            f"{shown.address!r} needs distinct people to approve; this decision names nobody",
            code="approver_unknown",
        )
    run_id, needed = shown.run_id, needed_approvers(shown.view)
    session._acquire(run_id)
    try:
        record = session.store.get_run(run_id)
        assert record is not None
        people = approvers_of(record, shown.address, shown.request_digest)
        fresh = decided_by not in people
        if fresh:
            people.append(decided_by)
        session.audit.emit(
            "approval_counted",
            run_id=run_id,
            step_index=None,
            address=shown.address,
            request_digest=shown.request_digest,
            decided_by=decided_by,
            counted=fresh,
            approvers=len(people),
            needed=needed,
        )
        counted = dict(record.data.get("approvers") or {})
        counted[shown.address] = {"request_digest": shown.request_digest, "people": people}
        session.store.update_run(run_id, data={"approvers": counted})
    finally:
        session._release(run_id)
    return people if len(people) >= needed else None


def _entry(shown: Shown, approve: bool, reason: str | None, answers: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"request_digest": shown.request_digest}
    if shown.kind == "approval":
        entry.update({"approved": approve, "reason": reason})
    elif shown.kind == "retry":
        entry["value"] = {"retry": approve}
    else:  # a question, answered
        entry["value"] = answers
    return entry


def decide(
    session: Session,
    run_id: str,
    address: str,
    *,
    request_digest: str,
    approve: bool,
    decided_by: str,
    reason: str | None = None,
    answers: Mapping[str, Any] | None = None,
) -> RunEnvelope:
    """Record a person's decision on the request at ``address`` and drive the run on.

    ``approve`` true approves an approval, sends a retry again, or answers questions with
    ``answers`` (``{QID: {option?, text?}}``); false declines an approval or a retry, and for
    questions closes the run ``declined``. The decision counts only for the request whose
    current digest is ``request_digest``.

    Raises:
        UsageError: ``run_not_found``, ``request_not_found``.
        ResumeRefused: ``run_sealed``; ``wrong_lane`` (an agent turn is the agent's to
            answer); ``digest_mismatch`` (the request changed since it was shown, or the
            digest is another request's: nothing is recorded); ``already_answered``;
            ``answer_invalid``; and every refusal of :meth:`Session.resume`.
    """
    shown = shown_request(session, run_id, address)
    if shown.run_status == "sealed":
        raise ResumeRefused(f"run {run_id} has sealed", code="run_sealed")
    if not shown.for_people:
        raise ResumeRefused(
            f"{address!r} is an agent turn: the agent answers it, not a person",
            code="wrong_lane",
        )
    if request_digest != shown.request_digest:
        raise ResumeRefused(
            f"{address!r}: the digest is not this request's (it may have changed since it was"
            " shown); nothing was recorded",
            code="digest_mismatch",
        )
    if shown.kind == "question" and not approve:
        return _decline_questions(session, run_id, address, request_digest, decided_by, reason)
    if shown.kind == "approval" and approve and needed_approvers(shown.view) > 1:
        people = _count_approver(session, shown, decided_by)
        if people is None:  # counted; the run waits for the next person
            return _waiting_for_more(session, shown)
        decided_by = "+".join(people)
    if shown.kind == "question" and answers is None:
        raise ResumeRefused(f"{address!r}: questions need answers", code="answer_invalid")
    doc = {
        "schema": "proctor.resume.v1",
        "approvals": {address: _entry(shown, approve, reason, dict(answers or {}))},
    }
    return session.resume(run_id, doc, decided_by=decided_by)
