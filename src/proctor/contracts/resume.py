"""``proctor.resume.v1``: what a host sends to continue or close a paused run.

Two lanes keep agent work and a person's authorization apart:

- ``answers`` (the agent's lane): agent turn outputs, ``{request_digest, value}`` by address,
  or ``{request_digest, failure: {reason}}`` when the turn cannot be done;
- ``approvals`` (the person's lane): ``{request_digest, approved, reason?}`` for an approval,
  ``{request_digest, value: {retry: bool}}`` for a retry, ``{request_digest, value: {QID:
  {option?, text?}}}`` for questions;
- ``standing_approvals`` (the person's lane): a new standing set for the rest of the run;
- ``close: {outcome: declined|superseded}`` comes alone and seals the run.

Every entry names the ``request_digest`` of the request it answers. The model checks shape
only; :mod:`proctor.core.resume` checks each entry against the run's requests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from proctor.contracts import json_strict
from proctor.contracts.strict import Record, Rule, StrictError, field
from proctor.errors import ParseError, ResumeRefused

__all__ = [
    "RESUME_SCHEMA",
    "AnswerEntry",
    "ApprovalEntry",
    "CloseSpec",
    "ResumeDocument",
    "TurnFailure",
    "parse_resume_document",
]

RESUME_SCHEMA = "proctor.resume.v1"
Digest = Annotated[str, Rule(pattern=r"^sha256:[0-9a-f]{64}$")]


class TurnFailure(Record):
    """Why an agent turn could not be done (the turn's failure lane)."""

    reason: Annotated[str, Rule(min_length=1, max_length=4000)]


class AnswerEntry(Record):
    """An agent turn's output (``value``), or ``failure: {reason}`` when the turn cannot be
    done, bound to the turn's request digest. Exactly one of the two: ``value: null`` is a
    value, which is why the check reads the keys given, not the values."""

    request_digest: Digest
    value: Any = None
    failure: TurnFailure | None = None

    @classmethod
    def _check_data(cls, data: dict[Any, Any]) -> None:
        if ("value" in data) == (data.get("failure") is not None):
            raise ValueError("an answer takes value, or failure: {reason}, exactly one")


class ApprovalEntry(Record):
    """A person's decision: ``approved`` for an approval, ``value`` for a retry or questions."""

    request_digest: Digest
    approved: bool | None = None
    reason: Annotated[str | None, Rule(max_length=4000)] = None
    value: dict[str, Any] | None = None


class CloseSpec(Record):
    """How a host ends a run it will not continue."""

    outcome: Literal["declined", "superseded"]


class ResumeDocument(Record):
    """A validated ``proctor.resume.v1`` document."""

    schema_: Annotated[Literal["proctor.resume.v1"] | None, Rule(alias="schema")] = None
    answers: dict[str, AnswerEntry] = field(default_factory=dict)
    approvals: dict[str, ApprovalEntry] = field(default_factory=dict)
    standing_approvals: list[dict[str, Any]] | None = None
    close: CloseSpec | None = None

    @property
    def empty(self) -> bool:
        """True when the document carries nothing (``{}``): continue the run as it is."""
        return (
            not self.answers
            and not self.approvals
            and self.standing_approvals is None
            and self.close is None
        )


def parse_resume_document(data: bytes | str | dict[str, Any]) -> ResumeDocument:
    """Parse a resume document from bytes, text or an already-decoded mapping.

    Text is read by the strict JSON reader (:mod:`proctor.contracts.json_strict`); a mapping
    (a Python host, an MCP turn tool) is held to the same depth bound.

    Raises:
        ResumeRefused: ``duplicate_key`` (a key repeated in one object: which decision is
            meant would depend on the reader), ``too_deep`` (nesting deeper than 64, refused
            before any recursive parse), ``resume_invalid`` when it is not UTF-8 JSON or
            does not fit the schema (the message names the location, never the value).
    """
    try:
        if isinstance(data, bytes | str):
            doc = json_strict.loads(data, source="the resume document")
        else:
            doc = data
            json_strict.check_value(doc, source="the resume document")
    except ParseError as exc:
        code = exc.code if exc.code in ("duplicate_key", "too_deep") else "resume_invalid"
        raise ResumeRefused(exc.message, code=code) from None
    if not isinstance(doc, dict):
        raise ResumeRefused("the resume document is one JSON object", code="resume_invalid")
    try:
        return ResumeDocument.model_validate(doc)
    except StrictError as exc:
        where = ".".join(str(p) for p in exc.loc) or "$"
        raise ResumeRefused(
            f"the resume document is invalid at {where}: {exc.message}", code="resume_invalid"
        ) from None
