"""The one error tree of proctor.

Every error proctor raises on purpose is a :class:`ProctorError` with a stable ``code`` (a
snake_case identifier programs may key on) and a message a person can act on. The CLI catches
``ProctorError`` alone, prints it and exits with its ``exit_code``; anything else is a bug.

Errors from libraries (sqlite3, httpx, yaml, ...) are translated at the boundary with
``raise ... from exc`` so callers only ever see this tree.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentError",
    "ConfigError",
    "CredentialError",
    "EgressRefused",
    "LeaseLost",
    "Message",
    "NotifyFailed",
    "ParseError",
    "PolicyLoadError",
    "ProctorError",
    "Quoted",
    "ReceiptInvalid",
    "RefusedCall",
    "ResumeRefused",
    "StoreError",
    "SubmissionRefused",
    "ToolFailed",
    "UsageError",
]


Span = tuple[int, int]


class Quoted(str):
    """A part of a :class:`Message` that is data it quotes (a file name, a field's path, a
    value someone gave) rather than proctor's own words."""

    __slots__ = ()


class Message:
    """A message told apart into proctor's own words and the data it quotes.

    ``Message(Quoted(path), ": ", "Input should be a valid dictionary")``: every part that is
    not :class:`Quoted` is proctor's own text, a constant of its code. The sanitizer replaces
    a secret-named assignment's value only where that value is quoted data, so that
    ``credentials: Input should be…`` is shown whole while ``api_key: 'hunter2'`` quoted from
    a document is still withheld; credential shapes and delivered secrets are replaced
    wherever they are (:func:`proctor.runtime.boundary.sanitize.scrub_text`).
    """

    __slots__ = ("own", "text")

    def __init__(self, *parts: str | Message) -> None:
        own: list[Span] = []
        pieces: list[str] = []
        at = 0
        for part in parts:
            if isinstance(part, Message):  # a message inside another keeps its own words
                own += [(at + start, at + end) for start, end in part.own]
                piece = part.text
            else:
                piece = part
                if piece and not isinstance(piece, Quoted):
                    own.append((at, at + len(piece)))
            pieces.append(piece)
            at += len(piece)
        self.text: str = "".join(pieces)
        self.own: tuple[Span, ...] = tuple(own)

    def __str__(self) -> str:
        return self.text


class ProctorError(Exception):
    """Base of every deliberate proctor error.

    Attributes:
        code: stable snake_case identifier of what went wrong.
        message: a sentence a person can act on; never contains a secret or a host path.
        own: the spans of ``message`` that are proctor's own words (given as a
            :class:`Message`); empty when the message was a plain string, which the sanitizer
            then treats as data throughout.
        details: JSON-serialisable structured detail (may be empty).
        exit_code: the CLI exit status this error maps to.
    """

    code: str = "error"
    exit_code: int = 1

    def __init__(
        self,
        message: str | Message,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        text = str(message)
        super().__init__(text)
        self.message = text
        self.own: tuple[Span, ...] = message.own if isinstance(message, Message) else ()
        if code is not None:
            self.code = code
        self.details: dict[str, Any] = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-ready mapping: ``code``, ``message`` and any ``details``."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out

    def __str__(self) -> str:
        return self.message


class UsageError(ProctorError):
    """A command line or API call was malformed (exit code 2)."""

    code = "usage_error"
    exit_code = 2


class ConfigError(ProctorError):
    """The workspace, home or environment configuration is invalid or refuses to start."""

    code = "config_error"
    exit_code = 3


class ParseError(ProctorError):
    """A document (YAML, SKILL.md, run.yaml, policy, directive, JSON input) could not be read.

    The message starts with ``file:line:column`` when a position is known.
    """

    code = "parse_error"
    exit_code = 2

    def __init__(
        self,
        message: str | Message,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        code: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.column = column
        # The file is data; its position and the separator are proctor's words.
        parts: list[str | Message] = []
        if file is not None:
            position = ""
            if line is not None:
                position += f":{line}"
                if column is not None:
                    position += f":{column}"
            parts += [Quoted(file), position + ": "]
        extra = dict(details or {})
        if file is not None:
            extra.setdefault("file", file)
        if line is not None:
            extra.setdefault("line", line)
        if column is not None:
            extra.setdefault("column", column)
        parts.append(message if isinstance(message, Message) else Quoted(message))
        super().__init__(Message(*parts), code=code, details=extra)


class PolicyLoadError(ProctorError):
    """A policy file or rule is invalid; the message names the file and the rule."""

    code = "policy_load_error"
    exit_code = 3


class RefusedCall(ProctorError):
    """A tool call was refused by admission (scope, schema, containment, policy, floor, budget).

    A refusal is a failed call with a stable ``code``; it never ends the process.
    """

    code = "refused"


class ToolFailed(ProctorError):
    """A tool ran and failed (e.g. a file it needed did not exist)."""

    code = "tool_failed"


class EgressRefused(RefusedCall):
    """The network egress guard refused a destination."""

    code = "egress_refused"


class CredentialError(ProctorError):
    """A credential could not be stored, resolved or delivered."""

    code = "credential_error"


class ReceiptInvalid(ProctorError):
    """A receipt or receipt tree failed verification, or the receipt store is not ours."""

    code = "receipt_invalid"


class ResumeRefused(ProctorError):
    """A resume document was refused as a whole; nothing was changed."""

    code = "resume_refused"
    exit_code = 2


class SubmissionRefused(ProctorError):
    """A submission read from the shared work queue does not fit its contract; nothing ran."""

    code = "submission_invalid"
    exit_code = 2


class StoreError(ProctorError):
    """The run store failed or holds something inconsistent."""

    code = "store_error"


class LeaseLost(ProctorError):
    """This driver no longer holds the run's lease: another driver took the run over (its lease
    epoch is newer), so the write was refused and nothing of it was recorded. The driver stops
    at once: it starts no new effect and ends the command it has in flight."""

    code = "lease_lost"
    exit_code = 75


class AgentError(ProctorError):
    """An agent turn failed: the provider refused or broke, the step cap was reached, the
    turn was cancelled, or the model's answer did not fit the turn's output schema."""

    code = "agent_failed"


class NotifyFailed(ProctorError):
    """A notification could not be delivered (the channel refused it, could not be reached,
    or is not declared); the outbox keeps it for the next attempt."""

    code = "notify_failed"
