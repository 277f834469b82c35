"""A queued submission's body: what ``proctor run --submit`` and ``proctor resume --submit``
write to the shared work queue, and what ``proctor worker`` reads back.

The queue is a table in a database other people and programs can write to, so a worker reads
every row as a document from outside: strict JSON (:mod:`.json_strict`), at most
:data:`MAX_BODY_BYTES`, nested at most one level deeper than the documents it carries, and
one of two records:

- ``start`` (:class:`StartBody`): ``ref`` (the skill reference as given), ``cwd`` (the
  folder it was given in, relative to the workspace: never absolute, never through ``..``),
  ``inputs`` (the ``--inputs`` object or ``null``), ``cli_inputs`` (the ``-i`` pairs),
  ``authority`` (the ``--run-authority`` object or ``null``) and ``profile``;
- ``resume`` (:class:`ResumeBody`): ``document``, the resume document (an object; checked
  against ``proctor.resume.v1`` when the run is resumed).

The run id of either kind is 32 lower-case hex digits (every run id proctor makes is). A row
that does not fit is refused as a whole (:class:`proctor.errors.SubmissionRefused`) with a
message naming where, never quoting a value: a body may hold secrets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Annotated, Any

from proctor.contracts import json_strict
from proctor.contracts.strict import Record, Rule, StrictError, field
from proctor.errors import ParseError, SubmissionRefused

__all__ = [
    "KINDS",
    "MAX_BODY_BYTES",
    "ResumeBody",
    "StartBody",
    "dump_body",
    "make_body",
    "read_body",
]

KINDS = ("start", "resume")
MAX_BODY_BYTES = 128 * 1024 * 1024
"""The largest body accepted: twice the 64 MiB an ``--inputs`` document may be, as the JSON a
submission writes can be longer than the document it was read from."""

_RUN_ID = re.compile(r"[0-9a-f]{32}")
_PATH = Annotated[str, Rule(min_length=1, max_length=4096)]


class StartBody(Record):
    """A ``start``: the run ``proctor run REF --submit`` asked for, as it was given."""

    ref: _PATH
    cwd: _PATH = "."
    inputs: dict[str, Any] | None = None
    cli_inputs: list[Annotated[str, Rule(max_length=1024 * 1024)]] = field(default_factory=list)
    authority: dict[str, Any] | None = None
    profile: Annotated[str | None, Rule(max_length=1000)] = None

    def _check(self) -> None:
        if "\x00" in self.ref or "\x00" in self.cwd:
            raise ValueError("ref and cwd hold no NUL character")
        cwd = PurePosixPath(self.cwd)
        if cwd.is_absolute() or ".." in cwd.parts:
            raise ValueError("cwd is a folder inside the workspace: relative, without '..'")


class ResumeBody(Record):
    """A ``resume``: the document ``proctor resume RUN_ID FILE --submit`` read (``{}`` to
    continue a run as it is)."""

    document: dict[str, Any]


def make_body(kind: str, data: Mapping[str, Any]) -> StartBody | ResumeBody:
    """The record of a ``kind`` submission's body given as a mapping (what a submitter builds).

    Raises:
        SubmissionRefused: ``submission_invalid`` for an unknown kind or a body that does not
            fit its record (the message names the field, never its value).
    """
    if kind not in KINDS:
        raise SubmissionRefused(
            "the submission's kind is neither start nor resume", code="submission_invalid"
        )
    record = StartBody if kind == "start" else ResumeBody
    try:
        return record.model_validate(dict(data))
    except StrictError as exc:
        where = ".".join(str(p) for p in exc.loc) or "$"
        raise SubmissionRefused(
            f"the {kind} submission's body is invalid at {where}: {exc.message}",
            code="submission_invalid",
        ) from None


def dump_body(body: StartBody | ResumeBody) -> str:
    """The JSON text a submission's body is stored as (UTF-8 kept as is: an escaped
    character would take up to six bytes of the cap).

    Raises:
        SubmissionRefused: ``submission_too_large`` over :data:`MAX_BODY_BYTES`; ``too_deep``
            nested deeper than :func:`read_body` reads; ``submission_invalid`` for a string
            with an unpaired surrogate (not text).
    """
    # what read_body would refuse is refused here, before a recursive dump of the value
    _strict(json_strict.check_value, body.__getstate__())
    text = json.dumps(body.model_dump(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if len(text.encode("utf-8")) > MAX_BODY_BYTES:
        raise _too_large()
    return text


def read_body(kind: str, run_id: str, text: str | None, size: int) -> StartBody | ResumeBody:
    """The body of a queued ``kind`` submission of ``run_id``, read from its stored ``text``
    (``None`` when the row's ``size`` in bytes was over the cap and it was not fetched).

    Raises:
        SubmissionRefused: ``submission_too_large``; ``too_deep`` or ``duplicate_key`` (as
            :func:`.json_strict.loads`); ``submission_invalid`` for an unknown kind, a run id
            that is not 32 hex digits, text that is not strict JSON, or a body that does not
            fit its record (the message names the field, never its value).
    """
    if kind not in KINDS:
        raise SubmissionRefused(
            "the submission's kind is neither start nor resume", code="submission_invalid"
        )
    if not _RUN_ID.fullmatch(run_id):
        raise SubmissionRefused(
            "the submission's run id is not 32 lower-case hex digits", code="submission_invalid"
        )
    if text is None or size > MAX_BODY_BYTES:
        raise _too_large()
    data = _strict(json_strict.loads, text)
    if not isinstance(data, dict):
        raise SubmissionRefused(
            f"the {kind} submission's body is not one JSON object", code="submission_invalid"
        )
    return make_body(kind, data)


def _strict(read: Callable[..., Any], value: Any) -> Any:
    """``read`` (a :mod:`.json_strict` reader) of ``value`` as a body, one level deeper than
    the documents it carries; its refusal as the submission's."""
    try:
        return read(value, source="the submission", limit=json_strict.MAX_DEPTH + 1)
    except ParseError as exc:
        code = exc.code if exc.code in ("duplicate_key", "too_deep") else "submission_invalid"
        raise SubmissionRefused(exc.message, code=code) from None


def _too_large() -> SubmissionRefused:
    return SubmissionRefused(
        f"the submission's body is larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB",
        code="submission_too_large",
    )
