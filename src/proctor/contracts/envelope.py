"""``proctor.run.v1``: the document ``proctor run|resume --json`` print, and what the Python API
returns. Its JSON Schema is emitted by :func:`run_envelope_schema`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from proctor.contracts.strict import Record, Rule, field, json_schema

RUN_SCHEMA: Literal["proctor.run.v1"] = "proctor.run.v1"

Status = Literal["sealed", "needs_agent", "needs_approval", "needs_credential"]
Outcome = Literal["completed", "failed", "blocked", "declined", "superseded", "killed"]


class Refusal(Record):
    """Why a call, a step or a whole run was refused or failed. Never carries a secret."""

    code: str
    message: str
    step: str | None = None
    tool: str | None = None
    rule_id: str | None = None


class TraceEntry(Record):
    """One call a step made, as the envelope shows it."""

    step: str
    tool: str
    call_id: str
    outcome: Literal["completed", "failed", "refused"]
    code: str | None = None
    message: str | None = None
    warnings: list[str] = field(default_factory=list)
    receipt_id: str | None = None


class RunEnvelope(Record, frozen=False):
    """The outcome of a run (or its pause) as programs read it.

    ``status`` is ``sealed`` (with an ``outcome`` and a ``receipt_id``), or a pause:
    ``needs_approval`` (only a person's requests are pending), ``needs_agent`` (an agent turn,
    or a mix) or ``needs_credential``. A pause lists ``requests`` (each with ``address``,
    ``kind`` and ``request_digest``), an ``answers_template`` (a ``proctor.resume.v1`` document
    bound to those digests) and the ``resume_command``. ``audit_lost`` counts the run's audit
    events the audit log could not take (a full disk): the run store and receipts still hold
    everything, and a note says so. ``spend_micro_usd`` (a sealed run whose tree made priced
    calls, or ran under a spend limit) is what the whole tree spent, in micro-dollars; it is
    left out otherwise. ``seal_reason`` (a sealed run whose outcome alone does not say why:
    ``approval_declined``, ``budget_exceeded``, ``child_failed`` ...) is the receipt's own
    ``seal_reason``; it is left out when there is none. ``trace`` lists every settled call in
    claim order while there are at most 1,000; a longer one shows the first 500 and the last
    500, and ``trace_omitted`` counts the entries left out between them (it is left out when
    the trace is whole). Every call is still in the run store (``run.read`` and ``proctor
    history RUN`` page the run's events) and in the receipt tree.
    """

    schema_: Annotated[Literal["proctor.run.v1"], Rule(alias="schema")] = RUN_SCHEMA
    status: Status
    outcome: Outcome | None = None
    run_id: str | None
    receipt_id: str | None = None
    skill: str | None = None
    method: str | None = None
    result: Any = None
    refusal: Refusal | None = None
    trace: list[TraceEntry] = field(default_factory=list)
    requests: list[dict[str, Any]] | None = None
    answers_template: dict[str, Any] | None = None
    resume_command: str | None = None
    audit_lost: int = 0
    notes: list[str] = field(default_factory=list)
    spend_micro_usd: int | None = None
    seal_reason: str | None = None
    trace_omitted: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The envelope as a JSON-ready mapping, with ``schema`` as its first key."""
        doc = self.model_dump()
        for optional in ("spend_micro_usd", "seal_reason", "trace_omitted"):
            if doc.get(optional) is None:
                doc.pop(optional, None)
        return doc


def run_envelope_schema() -> dict[str, Any]:
    """The JSON Schema of ``proctor.run.v1``."""
    return json_schema(RunEnvelope)
