"""The canonical bytes of a receipt body in its common shape, written directly.

The writer builds most receipts from fields it has already checked (digests, a known kind,
outcome and seal reason, formatted times, its own refs). For those, building a dict and handing
it to the generic canonicalizer, then proving the result with the verifier's recognizer, costs
more than signing the body. :func:`plain_body` writes the same RFC 8785 bytes by concatenation
in the fixed key order (``audit_head`` < ``authority_digest`` < ... < ``verdicts``), and only
for bodies it can prove are in the shape :func:`~proctor.receipts.scan.recognized` accepts:
every free string is printable ASCII without a quote or backslash (so JSON writes it as is),
every kind's subject rules hold, a segment commits children and states no inputs or outputs.
Anything else (an audit head, verdicts, a sandbox, a package, context digests, spend past 15
digits, a string that would need an escape) answers ``None`` and the writer takes the generic
route with its full checks. A property test holds the two routes byte-identical and every
body written here recognized.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from proctor.receipts.model import RECEIPT_SCHEMA, Subject

__all__ = ["plain_body"]

# a non-empty string JSON writes without an escape, whose canonical form is itself in quotes
_PLAIN = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+").fullmatch
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}").fullmatch
_SPEND_MAX = 10**15  # what the recognizer takes as a plain integer (at most 15 digits)
_HEAD = '{"audit_head":null,"authority_digest":'
_SCHEMA = f',"schema":"{RECEIPT_SCHEMA}","seal_reason":'


def _subject(kind: str, subject: Subject) -> str | None:
    """The subject's JSON text, or ``None`` when a name is missing for its kind or is not a
    plain non-empty string."""
    skill, method, step_id, tool = subject.skill, subject.method, subject.step_id, subject.tool
    if (method is None and kind != "call") or (step_id is None and kind == "step"):
        return None
    if tool is None and kind == "call":
        return None
    names = [skill]
    for name in (method, step_id, tool):
        if name is not None:
            if type(name) is not str or not name:
                return None
            names.append(name)
    # one match for all: the joined names are plain exactly when each one is (and each is
    # non-empty, checked above; the skill by the match when it stands alone or is empty)
    if type(skill) is not str or not skill or not _PLAIN("".join(names)):
        return None
    package = subject.package_digest  # checked a digest (or None) by the writer
    m = "null" if method is None else f'"{method}"'
    s = "null" if step_id is None else f'"{step_id}"'
    t = "null" if tool is None else f'"{tool}"'
    p = "null" if package is None else f'"{package}"'
    return f'{{"method":{m},"package_digest":{p},"skill":"{skill}","step_id":{s},"tool":{t}}}'


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
) -> bytes | None:
    """The canonical body bytes of a receipt without an audit head, verdicts or rare fields.

    The caller has checked that ``kind``, ``outcome`` and ``seal_reason`` are known (and a
    completed receipt names no reason), that the four digests and the subject's package digest
    are digests or ``None``, that ``started``/``ended`` are :func:`format_time` texts in order,
    and that ``key_id`` is a digest. ``children`` are refs: one whose ``serial`` is in ``own``
    was written by this writer (its ids are digests by construction); any other child's ids
    are checked here.

    Returns:
        the bytes, or ``None`` when the body is outside the shape written here.
    """
    subject_text = _subject(kind, subject)
    if subject_text is None:
        return None
    if spend_micro_usd is not None:
        if type(spend_micro_usd) is not int or not 0 <= spend_micro_usd < _SPEND_MAX:
            return None
        if kind == "call":
            return None
    if kind == "segment" and (
        not children
        or inputs_digest is not None
        or outputs_digest is not None
        or spend_micro_usd is not None
    ):
        return None
    parts = []
    for c in children:
        rid, body = c.receipt_id, c.body_digest
        if c.serial not in own and not (
            type(rid) is str and type(body) is str and _DIGEST(rid) and _DIGEST(body)
        ):
            return None
        parts.append(f'{{"body_digest":"{body}","receipt_id":"{rid}"}}')
    spend = "" if spend_micro_usd is None else f'"spend_micro_usd":{spend_micro_usd},'
    text = (
        f"{_HEAD}{'null' if authority_digest is None else chr(34) + authority_digest + chr(34)}"
        f',"children":[{",".join(parts)}],"ended_at":"{ended}","inputs_digest":'
        f"{'null' if inputs_digest is None else chr(34) + inputs_digest + chr(34)}"
        f',"key_id":"{key_id}","kind":"{kind}","outcome":"{outcome}","outputs_digest":'
        f"{'null' if outputs_digest is None else chr(34) + outputs_digest + chr(34)}"
        f',"policy_digest":'
        f"{'null' if policy_digest is None else chr(34) + policy_digest + chr(34)}"
        f"{_SCHEMA}{'null' if seal_reason is None else chr(34) + seal_reason + chr(34)},"
        f'{spend}"started_at":"{started}","subject":{subject_text},"verdicts":[]}}'
    )
    return text.encode("ascii")
