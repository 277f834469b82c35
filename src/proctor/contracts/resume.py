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

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from proctor.contracts import json_strict
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
Digest = str


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class TurnFailure(_Model):
    """Why an agent turn could not be done (the turn's failure lane)."""

    reason: str = Field(min_length=1, max_length=4000)


class AnswerEntry(_Model):
    """An agent turn's output (``value``), or ``failure: {reason}`` when the turn cannot be
    done, bound to the turn's request digest. Exactly one of the two."""

    request_digest: Digest = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    value: Any = None
    failure: TurnFailure | None = None

    @model_validator(mode="after")
    def _one_of(self) -> AnswerEntry:
        if ("value" in self.model_fields_set) == (self.failure is not None):
            raise ValueError("an answer takes value, or failure: {reason}, exactly one")
        return self


class ApprovalEntry(_Model):
    """A person's decision: ``approved`` for an approval, ``value`` for a retry or questions."""

    request_digest: Digest = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    approved: bool | None = None
    reason: str | None = Field(default=None, max_length=4000)
    value: dict[str, Any] | None = None


class CloseSpec(_Model):
    """How a host ends a run it will not continue."""

    outcome: Literal["declined", "superseded"]


class ResumeDocument(_Model):
    """A validated ``proctor.resume.v1`` document."""

    schema_: Literal["proctor.resume.v1"] | None = Field(default=None, alias="schema")
    answers: dict[str, AnswerEntry] = {}
    approvals: dict[str, ApprovalEntry] = {}
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
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "$"
        raise ResumeRefused(
            f"the resume document is invalid at {where}: {first['type']}", code="resume_invalid"
        ) from exc
