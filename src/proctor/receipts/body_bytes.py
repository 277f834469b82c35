"""The canonical bytes of a receipt body in its common shape, written directly.

The writer builds most receipts from fields it has already checked (digests, a known kind,
outcome and seal reason, formatted times, its own refs). For those, building a dict and handing
it to the generic canonicalizer, then proving the result with the verifier's recognizer, costs
more than signing the body. :func:`plain_body` writes the same RFC 8785 bytes by concatenation
in the fixed key order (``audit_head`` < ``authority_digest`` < ... < ``verdicts``), and only
for bodies it can prove are in the shape :func:`~proctor.receipts.scan.recognized` accepts:
every free string is printable ASCII without a quote or backslash (so JSON writes it as is),
every kind's subject rules hold, a segment commits children and states no inputs or outputs,
a run's audit head is ``{lines, last_digest}`` with a digest (``null`` only at 0 lines) and at
most 15 digits of lines, and its package identity a plain ``core:``/``registry:``/``local:``
text of at most 1,024 characters. Anything else (verdicts, a sandbox, a package, context
digests, spend past 15 digits, a string that would need an escape) answers ``None`` and the
writer takes the generic route with its full checks. A property test holds the two routes
byte-identical and every body written here recognized.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proctor.core.package_identity import IDENTITY_KINDS, MAX_IDENTITY_CHARS
from proctor.receipts.model import RECEIPT_SCHEMA, Subject

__all__ = ["plain_body", "plain_text"]

# a non-empty string JSON writes without an escape, whose canonical form is itself in quotes
_PLAIN = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+").fullmatch
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}").fullmatch
_SPEND_MAX = 10**15  # what the recognizer takes as a plain integer (at most 15 digits)
_LINES_MAX = 10**15  # an audit head's line count, likewise
_NO_HEAD = '{"audit_head":null,"authority_digest":'
_EMPTY_HEAD = '{"audit_head":{"last_digest":null,"lines":0},"authority_digest":'
_SCHEMA = f',"schema":"{RECEIPT_SCHEMA}","seal_reason":'
# the subject's text up to its step_id, by (skill, package digest, method): a seal writes the
# same three for every receipt of a run, so they are checked and written once
_HEADS: dict[tuple[str, str | None, str | None], str] = {}
_HEADS_MAX = 1024


def _subject_head(skill: object, package: str | None, method: object) -> str | None:
    """``{"method":…,"package_digest":…,"skill":…,"step_id":`` or ``None`` when the skill
    or the method (unless absent) is not a plain non-empty string."""
    if type(skill) is not str or (method is not None and type(method) is not str):
        return None  # (a subclass of str is not taken: its text is its own to decide)
    key = (skill, package, method)
    head = _HEADS.get(key)
    if head is None:
        if not _PLAIN(skill) or (method is not None and not _PLAIN(method)):
            return None
        m = "null" if method is None else f'"{method}"'
        p = "null" if package is None else f'"{package}"'
        head = f'{{"method":{m},"package_digest":{p},"skill":"{skill}","step_id":'
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        _HEADS[key] = head
    return head


def _subject(kind: str, subject: Subject) -> str | None:
    """The subject's JSON text, or ``None`` when a name is missing for its kind or is not a
    plain non-empty string."""
    method, step_id, tool = subject.method, subject.step_id, subject.tool
    if kind == "call":
        if tool is None:
            return None
    elif method is None or (step_id is None and kind == "step"):
        return None
    skill, package = subject.skill, subject.package_digest
    # the cache first (the names checked when it was filled; a subclass of str never is)
    head = _HEADS.get((skill, package, method)) if type(skill) is type(method) is str else None
    if head is None and (head := _subject_head(skill, package, method)) is None:
        return None
    if step_id is None:
        if tool is None:
            return head + 'null,"tool":null}'
        if type(tool) is str and _PLAIN(tool):
            return f'{head}null,"tool":"{tool}"}}'
        return None
    if type(step_id) is not str or not step_id:
        return None
    if tool is None:
        return f'{head}"{step_id}","tool":null}}' if _PLAIN(step_id) else None
    # one match for both: the joined names are plain exactly when each one is (each non-empty)
    if type(tool) is str and tool and _PLAIN(step_id + tool):
        return f'{head}"{step_id}","tool":"{tool}"}}'
    return None


def _audit_head(head: Mapping[str, Any]) -> str | None:
    """The body's text up to ``"authority_digest":`` with ``head`` (a run's audit head), or
    ``None`` when it is not exactly ``{lines, last_digest}`` in the shape written here."""
    if len(head) != 2:
        return None
    lines, last = head.get("lines"), head.get("last_digest")
    if type(lines) is not int or not 0 <= lines < _LINES_MAX:
        return None
    if last is None:
        return _EMPTY_HEAD if lines == 0 and "last_digest" in head else None
    if lines == 0 or type(last) is not str or not _DIGEST(last):
        return None
    return f'{{"audit_head":{{"last_digest":"{last}","lines":{lines}}},"authority_digest":'


_PLAIN_IDENTITIES: set[str] = set()
"""Identities found plain (a seal writes its run's, and the runs of a skill share one)."""


def _is_plain_identity(identity: object) -> bool:
    """Whether ``identity`` is a package identity JSON writes as it is (and the recognizer
    takes): a known kind, then printable ASCII without a quote or backslash."""
    if type(identity) is not str:
        return False
    if identity in _PLAIN_IDENTITIES:
        return True
    plain = (
        len(identity) <= MAX_IDENTITY_CHARS
        and identity.startswith(IDENTITY_KINDS)
        and identity not in IDENTITY_KINDS
        and _PLAIN(identity) is not None
    )
    if plain:
        if len(_PLAIN_IDENTITIES) >= _HEADS_MAX:
            _PLAIN_IDENTITIES.clear()
        _PLAIN_IDENTITIES.add(identity)
    return plain


def plain_text(
    kind: str,
    subject: Subject,
    outcome: str,
    seal_reason: str | None,
    started: str,
    ended: str,
    inputs_digest: str | None,
    outputs_digest: str | None,
    authority_digest: str | None,
    policy_digest: str | None,
    children: Sequence[Any],
    own: range,
    key_id: str,
    spend_micro_usd: int | None,
    audit_head: Mapping[str, Any] | None = None,
    identity: str | None = None,
) -> str | None:
    """:func:`plain_body` as ASCII text, its arguments by position (the writer's route)."""
    subject_text = _subject(kind, subject)
    if subject_text is None:
        return None
    head = _NO_HEAD if audit_head is None else _audit_head(audit_head) if kind == "run" else None
    if head is None:
        return None
    if identity is None:
        named = ""
    elif kind == "run" and _is_plain_identity(identity):
        named = f'"identity":"{identity}",'
    else:
        return None
    if spend_micro_usd is None:
        spend = ""
    elif kind != "call" and type(spend_micro_usd) is int and 0 <= spend_micro_usd < _SPEND_MAX:
        spend = f'"spend_micro_usd":{spend_micro_usd},'
    else:
        return None
    if kind == "segment" and (
        not children
        or inputs_digest is not None
        or outputs_digest is not None
        or spend_micro_usd is not None
    ):
        return None
    if children:
        parts = []
        for c in children:
            rid, body = c.receipt_id, c.body_digest
            if c.serial not in own and not (
                type(rid) is str and type(body) is str and _DIGEST(rid) and _DIGEST(body)
            ):
                return None
            parts.append(f'{{"body_digest":"{body}","receipt_id":"{rid}"}}')
        kids = ",".join(parts)
    else:
        kids = ""
    a = "null" if authority_digest is None else f'"{authority_digest}"'
    i = "null" if inputs_digest is None else f'"{inputs_digest}"'
    o = "null" if outputs_digest is None else f'"{outputs_digest}"'
    p = "null" if policy_digest is None else f'"{policy_digest}"'
    r = "null" if seal_reason is None else f'"{seal_reason}"'
    return (
        f'{head}{a},"children":[{kids}],"ended_at":"{ended}",{named}"inputs_digest":{i},'
        f'"key_id":"{key_id}","kind":"{kind}","outcome":"{outcome}","outputs_digest":{o},'
        f'"policy_digest":{p}{_SCHEMA}{r},{spend}"started_at":"{started}",'
        f'"subject":{subject_text},"verdicts":[]}}'
    )


def plain_body(
    kind: str,
    subject: Subject,
    *,
    outcome: str,
    seal_reason: str | None,
    started: str,
    ended: str,
    inputs_digest: str | None,
    outputs_digest: str | None,
    authority_digest: str | None,
    policy_digest: str | None,
    children: Sequence[Any],
    own: range,
    key_id: str,
    spend_micro_usd: int | None,
    audit_head: Mapping[str, Any] | None = None,
    identity: str | None = None,
) -> bytes | None:
    """The canonical body bytes of a receipt without verdicts or rare fields (a run's audit
    head and package identity are written here when plain).

    The caller has checked that ``kind``, ``outcome`` and ``seal_reason`` are known (and a
    completed receipt names no reason), that the four digests and the subject's package digest
    are digests or ``None``, that ``started``/``ended`` are :func:`format_time` texts in order,
    and that ``key_id`` is a digest. ``children`` are refs: one whose ``serial`` is in ``own``
    was written by this writer (its ids are digests by construction); any other child's ids
    are checked here.

    Returns:
        the bytes, or ``None`` when the body is outside the shape written here.
    """
    text = plain_text(
        kind,
        subject,
        outcome,
        seal_reason,
        started,
        ended,
        inputs_digest,
        outputs_digest,
        authority_digest,
        policy_digest,
        children,
        own,
        key_id,
        spend_micro_usd,
        audit_head,
        identity,
    )
    return None if text is None else text.encode("ascii")
