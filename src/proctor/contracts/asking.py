"""What a person is asked: an ask step's approval or questions (:class:`AskSpec`), and an
operation step's own approval request (:class:`StepApproval`, the runx reference's
``approval: {reason, type}``). Strict frozen records, as every model of
:mod:`proctor.contracts.skill` (which re-exports these)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from proctor.contracts.strict import Record, Rule

__all__ = ["ID_PATTERN", "AskOption", "AskQuestion", "AskSpec", "StepApproval"]

ID_PATTERN = r"^[a-z0-9_-]+$"
"""A step's id, and a question's."""
Id = Annotated[str, Rule(pattern=ID_PATTERN)]
NonEmpty = Annotated[str, Rule(min_length=1)]


class AskOption(Record):
    """One choice of a question: its ``label`` (what an answer names), an optional
    ``detail`` saying what it means, and whether it is the one ``recommended``."""

    label: Annotated[str, Rule(min_length=1, max_length=200)]
    detail: Annotated[str, Rule(max_length=1000)] | None = None
    recommended: bool = False


class AskQuestion(Record):
    """One question put to a person: pick one of ``choices`` (plain labels) or of
    ``options`` (at most four, each ``{label, detail?, recommended?}``, at most one
    recommended), and/or write free text when ``free_text`` (a question with neither always
    takes free text)."""

    id: Id
    prompt: NonEmpty
    choices: list[NonEmpty] | None = None
    options: Annotated[list[AskOption], Rule(min_length=1, max_length=4)] | None = None
    free_text: bool = False
    required: bool = True

    def _check(self) -> None:
        if self.choices is not None and self.options is not None:
            raise ValueError("a question takes choices or options, not both")
        if self.options is not None:
            labels = [o.label for o in self.options]
            if len(set(labels)) != len(labels):
                raise ValueError("a question's option labels must differ")
            if sum(o.recommended for o in self.options) > 1:
                raise ValueError("at most one option is recommended")

    def request_form(self) -> dict[str, Any]:
        """The question as a request states it (and its digest covers): plain ``choices``
        stay strings (so digests of such requests are unchanged); structured ``options`` are
        ``{label, detail?, recommended?}``, each key only when set."""
        options: list[Any] = list(self.choices or [])
        for o in self.options or []:
            shown: dict[str, Any] = {"label": o.label}
            if o.detail is not None:
                shown["detail"] = o.detail
            if o.recommended:
                shown["recommended"] = True
            options.append(shown)
        return {
            "id": self.id,
            "prompt": self.prompt,
            "options": options,
            "free_text": self.free_text if options else True,
            "required": self.required,
        }


class AskSpec(Record):
    """Either an approval (``reason``) or questions for a person; exactly one of them.

    ``expires_in`` (seconds) gives the request a deadline; when it passes the request is
    decided by ``on_expiry`` (``decline``, the default; ``approve`` only an approval may say).
    ``approvals`` is how many distinct people must approve (an approval only).
    """

    reason: NonEmpty | None = None
    questions: Annotated[list[AskQuestion], Rule(min_length=1, max_length=3)] | None = None
    expires_in: Annotated[int, Rule(ge=1, le=30 * 86400)] | None = None
    on_expiry: Literal["decline", "approve"] = "decline"
    approvals: Annotated[int, Rule(ge=1, le=10)] = 1

    def _check(self) -> None:
        if (self.reason is None) == (self.questions is None):
            raise ValueError("an ask step needs exactly one of 'reason' or 'questions'")
        if self.questions is not None and (self.on_expiry == "approve" or self.approvals != 1):
            raise ValueError("on_expiry: approve and approvals are for an approval (reason)")
        if self.on_expiry == "approve" and self.expires_in is None:
            raise ValueError("on_expiry: approve needs expires_in")
        if self.on_expiry == "approve" and self.approvals > 1:
            raise ValueError("a deadline never approves for the people approvals: N needs")


class StepApproval(Record):
    """An operation step's own approval request (the runx reference's ``approval:``): a person
    approves each call of the step, whatever the floor and the standing approvals would
    admit; ``reason`` is what the person is shown (as quoted text), ``type`` names the kind
    of decision asked for (part of the request, so of its digest)."""

    reason: Annotated[str, Rule(min_length=1, max_length=2000)]
    type: Annotated[str, Rule(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")] | None = None
