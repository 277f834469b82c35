"""The ``proctor.receipt.v1`` document: its body, its signed envelope, and their strict parser.

A receipt records one run, one step or one call. Its **body** is a JSON object with exactly
these keys (every key always present, ``null`` where it does not apply)::

    schema          "proctor.receipt.v1"
    kind            "run" | "step" | "call" | "segment"
    subject         {skill, package_digest, method, step_id, tool}
    inputs_digest   sha256:<hex> of the canonical inputs, or null
    outputs_digest  sha256:<hex> of the canonical outputs, or null
    outcome         one of OUTCOMES
    seal_reason     one of SEAL_REASONS, or null; always null when outcome is "completed"
    authority_digest, policy_digest   sha256:<hex> or null
    verdicts        [{rule_id, code, enforcement}]  guard verdicts that refused (block) or
                    warned (warn), in evaluation order; advisory verdicts are not recorded
    started_at, ended_at   UTC, "YYYY-MM-DDTHH:MM:SS.ffffffZ", started_at <= ended_at
    children        [{receipt_id, body_digest}]  in execution order
    key_id          the signer's key id (see proctor.receipts.signing)
    audit_head      {lines, last_digest} of the audit log when the run sealed (an anchor:
                    line ``lines`` had digest ``last_digest``, null when ``lines`` is 0);
                    null on step and call receipts. Receipts written before it existed lack
                    the key; they parse and verify, and anchor nothing.

A ``call`` receipt of a process tool also has ``sandbox``: ``{used, mode, network, verified,
checks, toolchains}`` (``used`` one of SANDBOX_USED, ``mode`` one of SANDBOX_MODES, ``network``
and ``verified`` booleans, ``checks`` a list of ``{check, held}``, ``toolchains`` a list of the
host folders bound as toolchains): what the process ran under and whether the sandbox self-test
held (receipts written before the self-test lack the last three). No other receipt has that
key.

A ``step`` or ``run`` receipt may have ``spend_micro_usd``: what a priced step's call actually
cost, or what a run's tree spent in all (micro-dollars; see ``proctor.core.spend``). A ``step``
receipt may have ``context_digests``: the SKILL.md digests its agent turn was shown as context.
A ``run`` receipt may have ``reused_from``: the receipt id of the run a reused child took its
result from (``reuse:``). A ``run`` receipt may have ``package``: ``{source, name, version,
content_digest, manifest_digest}``, the registry name (``source`` ``registry``) or core skill
name (``source`` ``core``, ``manifest_digest`` null) its package verified as when the run
sealed; a run of a local folder has none. A ``run`` receipt may have ``identity``: the run's
package identity, decided by where the package came from (``core:<name>``,
``registry:<publisher>/<name>``, ``local:<workspace path>`` or ``local:outside/<digest>``), the
namespace its state and connector writes were kept under. Receipts written before it lack it;
they parse and verify as before.

The **receipt id** is ``sha256:`` + the hex SHA-256 of the RFC 8785 canonical bytes of the
body. The **body digest** a parent commits is the same value: the digest of the canonical body,
which is exactly what the signature covers. A parent commits both (``receipt_id`` and
``body_digest``) so that each commitment says which body it means and the verifier checks that
the two agree with the body it reads. A child never names its parent.

The **envelope** (the file ``<hex>.json``) is the canonical JSON of
``{"body": ..., "key_id": ..., "signature": ...}`` followed by one LF. ``signature`` is the
standard base64 of the Ed25519 signature over the canonical body bytes, or ``null`` for an
*amortized* call receipt: such a call is authenticated by the signed receipt that commits its
body digest (a step, or a signed ancestor further up), so changing a single byte of it changes
its digest and breaks that commitment. Only ``call`` and ``segment`` receipts may be unsigned.

A **segment** receipt groups a contiguous run of its parent's children when there are more
than :data:`~proctor.core.budget.SEGMENT_FANOUT` of them (a run of many steps, a step of many
calls): the parent commits its segments in order and each segment commits its share of the
children in order, so reading the segments' children left to right gives the parent's children
in execution order. A segment names its parent's subject (``method`` always), commits at least
one child, states no inputs, outputs or verdicts, and is unsigned when proctor writes it (its
parent's signed commitment authenticates it, as an amortized call's does).
"""

from __future__ import annotations

import binascii
import json
import re
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from proctor.contracts.values import dataclass
from proctor.core.moments import second_head
from proctor.core.package_identity import is_identity
from proctor.errors import ReceiptInvalid, UsageError
from proctor.receipts.canonical import canonical_text, is_digest
from proctor.receipts.parts import SEAL_REASONS, ChildRef

__all__ = [
    "ENFORCEMENTS",
    "KINDS",
    "OUTCOMES",
    "RECEIPT_SCHEMA",
    "SANDBOX_MODES",
    "SANDBOX_USED",
    "SEAL_REASONS",
    "UNSIGNED_KINDS",
    "ChildRef",
    "Envelope",
    "Subject",
    "Verdict",
    "encode_envelope",
    "format_time",
    "parse_envelope",
]

RECEIPT_SCHEMA = "proctor.receipt.v1"

Kind = Literal["run", "step", "call", "segment"]
KINDS: tuple[str, ...] = ("run", "step", "call", "segment")
UNSIGNED_KINDS = frozenset({"call", "segment"})
"""The kinds a receipt may be unsigned in (amortized: a signed ancestor commits it)."""

OUTCOMES: tuple[str, ...] = ("completed", "failed", "blocked", "declined", "superseded", "killed")

ENFORCEMENTS: tuple[str, ...] = ("warn", "block")

SANDBOX_USED: tuple[str, ...] = ("bubblewrap", "none")
SANDBOX_MODES: tuple[str, ...] = ("required", "auto", "off")

_TIME = re.compile(r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\Z")
# The body of receipts written before the audit anchor existed: still read, anchoring nothing.
_BODY_KEYS_BEFORE_ANCHORS = frozenset(
    {
        "schema",
        "kind",
        "subject",
        "inputs_digest",
        "outputs_digest",
        "outcome",
        "seal_reason",
        "authority_digest",
        "policy_digest",
        "verdicts",
        "started_at",
        "ended_at",
        "children",
        "key_id",
    }
)
_BODY_KEYS = _BODY_KEYS_BEFORE_ANCHORS | {"audit_head"}
_HEAD_KEYS = frozenset({"lines", "last_digest"})
_MAX_LINES = 2**53 - 1  # an integer canonical JSON writes exactly as the C encoder does
_CALL_KEYS = _BODY_KEYS | {"sandbox"}
_SANDBOX_KEYS = frozenset({"used", "mode", "network"})
_DESTINATION_KEYS = frozenset({"host", "port", "address"})
# the self-test's answer and the toolchains bound; receipts written before them lack all three
_SANDBOX_VERIFIED_KEYS = _SANDBOX_KEYS | {"verified", "checks", "toolchains"}
_SUBJECT_KEYS = frozenset({"skill", "package_digest", "method", "step_id", "tool"})
_ENVELOPE_KEYS = frozenset({"body", "key_id", "signature"})
_CHILD_KEYS = frozenset({"receipt_id", "body_digest"})
_VERDICT_KEYS = frozenset({"rule_id", "code", "enforcement"})
_BODY_AT = len(b'{"body":')
_TAIL = ',"key_id":"","signature":}\n'  # the envelope after its body, without the two values


def format_time(moment: datetime) -> str:
    """A timezone-aware datetime as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC.

    Raises:
        UsageError: (code ``naive_datetime``) the datetime has no timezone.
    """
    m = moment
    if m.tzinfo is not UTC:  # (UTC's offset is never None: asked only of another zone)
        if m.tzinfo is None or m.utcoffset() is None:
            raise UsageError("receipt times must be timezone-aware", code="naive_datetime")
        m = m.astimezone(UTC)
    # what strftime("%Y-%m-%dT%H:%M:%S.%fZ") writes, at a tenth of its cost (a seal formats
    # two times per receipt): the text up to the second is written once per second
    return f"{second_head(m)}{m.microsecond:06d}Z"


class Subject(NamedTuple):
    """What a receipt is about. ``skill`` is always named; the rest depend on the kind.

    A named tuple (a seal builds one per receipt): read-only, and equal only to a subject
    with the same names, as a value class would be.
    """

    skill: str
    package_digest: str | None = None
    method: str | None = None
    step_id: str | None = None
    tool: str | None = None

    def __eq__(self, other: object) -> bool:
        return type(other) is Subject and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return tuple.__hash__(self)

    def to_json(self) -> dict[str, Any]:
        """The subject as its JSON object."""
        return {
            "skill": self.skill,
            "package_digest": self.package_digest,
            "method": self.method,
            "step_id": self.step_id,
            "tool": self.tool,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """A guard verdict that refused (``block``) or warned (``warn``)."""

    rule_id: str
    code: str
    enforcement: str

    def to_json(self) -> dict[str, Any]:
        """The verdict as its JSON object."""
        return {"rule_id": self.rule_id, "code": self.code, "enforcement": self.enforcement}


class Envelope(NamedTuple):
    """A parsed receipt file. ``body_bytes`` are the canonical body bytes (what is signed)."""

    body: dict[str, Any]
    body_bytes: bytes
    key_id: str
    signature: bytes | None
    children: tuple[ChildRef, ...]

    @property
    def kind(self) -> str:
        """``run``, ``step``, ``call`` or ``segment``."""
        return str(self.body["kind"])


def encode_envelope(body_bytes: bytes, key_id: str, signature_b64: str | None) -> bytes:
    """The file bytes of a receipt: canonical ``{body, key_id, signature}`` plus LF.

    Built by concatenation: the body is already canonical and the other two values are ASCII
    strings without escapes, so this equals ``canonical(envelope) + b"\\n"`` (tested).
    """
    sig = b"null" if signature_b64 is None else b'"' + signature_b64.encode("ascii") + b'"'
    return (
        b'{"body":'
        + body_bytes
        + b',"key_id":"'
        + key_id.encode("ascii")
        + b'","signature":'
        + sig
        + b"}\n"
    )


def _bad(message: str) -> ReceiptInvalid:
    return ReceiptInvalid(message, code="malformed")


def _opt_str(value: object, name: str) -> None:
    if value is not None and (type(value) is not str or not value):
        raise _bad(f"{name} must be a non-empty string or null")


def _opt_digest(value: object, name: str) -> None:
    if value is not None and not is_digest(value):
        raise _bad(f"{name} must be a sha256:<hex> digest or null")


def _check_sandbox(value: object) -> None:
    if type(value) is not dict or value.keys() - {"destinations"} not in (
        _SANDBOX_KEYS,
        _SANDBOX_VERIFIED_KEYS,
    ):
        raise _bad(f"sandbox must have exactly the keys {sorted(_SANDBOX_VERIFIED_KEYS)}")
    if "verified" in value:
        checks = value["checks"]
        if type(value["verified"]) is not bool or type(checks) is not list:
            raise _bad("sandbox.verified is a boolean and sandbox.checks a list")
        for check in checks:
            if (
                type(check) is not dict
                or check.keys() != {"check", "held"}
                or type(check["check"]) is not str
                or type(check["held"]) is not bool
            ):
                raise _bad("each of sandbox.checks is {check: name, held: boolean}")
        tools = value["toolchains"]
        if type(tools) is not list or any(type(t) is not str or not t for t in tools):
            raise _bad("sandbox.toolchains is a list of paths")
    if value["used"] not in SANDBOX_USED or value["mode"] not in SANDBOX_MODES:
        raise _bad(
            f"sandbox.used is one of {list(SANDBOX_USED)} and mode one of {list(SANDBOX_MODES)}"
        )
    if type(value["network"]) is not bool:
        raise _bad("sandbox.network is a boolean")
    if "destinations" in value:  # what a process reached through the egress proxy
        _check_destinations(value["destinations"], value["network"])


def _check_destinations(value: object, network: object) -> None:
    if network is not True or type(value) is not list:
        raise _bad("sandbox.destinations is a list, stated only with network true")
    for item in value:
        if (
            type(item) is not dict
            or item.keys() != _DESTINATION_KEYS
            or type(item["host"]) is not str
            or type(item["address"]) is not str
            or type(item["port"]) is not int
            or not 0 < item["port"] < 65536
        ):
            raise _bad("each of sandbox.destinations is {host, port, address}")


def _check_spend(value: object, kind: object) -> None:
    if kind not in ("run", "step"):
        raise _bad("only step and run receipts state spend_micro_usd")
    if type(value) is not int or not 0 <= value <= 2**53 - 1:
        raise _bad("spend_micro_usd is a whole number of micro-dollars")


def _check_context(value: object, kind: object) -> None:
    if kind != "step":
        raise _bad("only step receipts state context_digests")
    if type(value) is not list or not value or not all(is_digest(v) for v in value):
        raise _bad("context_digests is a non-empty list of sha256:<hex> digests")


_PACKAGE_KEYS = frozenset({"source", "name", "version", "content_digest", "manifest_digest"})


def _check_package(value: object, kind: object) -> None:
    if kind != "run":
        raise _bad("only run receipts state package")
    if type(value) is not dict or value.keys() != _PACKAGE_KEYS:
        raise _bad(f"package must have exactly the keys {sorted(_PACKAGE_KEYS)}")
    if value["source"] not in ("registry", "core"):
        raise _bad("package.source is registry or core")
    for name in ("name", "version"):
        if type(value[name]) is not str or not value[name]:
            raise _bad(f"package.{name} must be a non-empty string")
    if not is_digest(value["content_digest"]):
        raise _bad("package.content_digest must be sha256:<hex>")
    manifest = value["manifest_digest"]
    if (value["source"] == "core") != (manifest is None) or (
        manifest is not None and not is_digest(manifest)
    ):
        raise _bad("package.manifest_digest is sha256:<hex> for a registry package, else null")


def _check_identity(value: object, kind: object) -> None:
    if kind != "run":
        raise _bad("only run receipts state identity")
    if type(value) is not str or not is_identity(value):
        raise _bad(
            "identity is core:<name>, registry:<publisher>/<name> or local:<path>, printable,"
            " at most 1024 characters"
        )


def check_body(body: object) -> tuple[ChildRef, ...]:
    """Check a body against the ``proctor.receipt.v1`` rules; return its child commitments.

    Raises:
        ReceiptInvalid: (code ``malformed``) naming the first field that breaks a rule.
    """
    if type(body) is not dict:
        raise _bad("the receipt body is not an object")
    keys = body.keys() - {
        "spend_micro_usd", "context_digests", "reused_from", "package", "identity"
    }  # fmt: skip
    if "identity" in body:
        _check_identity(body["identity"], body.get("kind"))
    if "package" in body:
        _check_package(body["package"], body.get("kind"))
    if "reused_from" in body and (body.get("kind") != "run" or not is_digest(body["reused_from"])):
        raise _bad("reused_from is a run receipt's sha256:<hex> receipt id")
    if "spend_micro_usd" in body:
        _check_spend(body["spend_micro_usd"], body.get("kind"))
    if "context_digests" in body:
        _check_context(body["context_digests"], body.get("kind"))
    process_call = keys == _CALL_KEYS and body.get("kind") == "call"
    if keys != _BODY_KEYS and keys != _BODY_KEYS_BEFORE_ANCHORS and not process_call:
        extra = sorted(set(keys) - _BODY_KEYS)
        missing = sorted(_BODY_KEYS - set(keys))
        raise _bad(f"the receipt body has unknown keys {extra} or lacks {missing}")
    if "sandbox" in keys:
        _check_sandbox(body["sandbox"])
    if body["schema"] != RECEIPT_SCHEMA:
        raise _bad(f"schema is not {RECEIPT_SCHEMA}")
    kind = body["kind"]
    if type(kind) is not str or kind not in KINDS:
        raise _bad(f"kind must be one of {list(KINDS)}")
    subject = body["subject"]
    if type(subject) is not dict or subject.keys() != _SUBJECT_KEYS:
        raise _bad(f"subject must have exactly the keys {sorted(_SUBJECT_KEYS)}")
    if type(subject["skill"]) is not str or not subject["skill"]:
        raise _bad("subject.skill must be a non-empty string")
    _opt_digest(subject["package_digest"], "subject.package_digest")
    for name in ("method", "step_id", "tool"):
        _opt_str(subject[name], f"subject.{name}")
    if kind in ("run", "step", "segment") and subject["method"] is None:
        raise _bad(f"a {kind} receipt names its method")
    if kind == "step" and subject["step_id"] is None:
        raise _bad("a step receipt names its step_id")
    if kind == "call" and subject["tool"] is None:
        raise _bad("a call receipt names its tool")
    if kind == "segment" and (
        not body["children"] or body["verdicts"] or body["inputs_digest"] or body["outputs_digest"]
    ):
        raise _bad("a segment commits at least one child and states no inputs, outputs or verdicts")
    for name in ("inputs_digest", "outputs_digest", "authority_digest", "policy_digest"):
        _opt_digest(body[name], name)
    outcome = body["outcome"]
    if type(outcome) is not str or outcome not in OUTCOMES:
        raise _bad(f"outcome must be one of {list(OUTCOMES)}")
    reason = body["seal_reason"]
    if reason is not None and (type(reason) is not str or reason not in SEAL_REASONS):
        raise _bad(f"seal_reason must be null or one of {sorted(SEAL_REASONS)}")
    if outcome == "completed" and reason is not None:
        raise _bad("a completed receipt has no seal_reason")
    verdicts = body["verdicts"]
    if type(verdicts) is not list:
        raise _bad("verdicts must be a list")
    for verdict in verdicts:
        if type(verdict) is not dict or verdict.keys() != _VERDICT_KEYS:
            raise _bad("each verdict has exactly rule_id, code and enforcement")
        if type(verdict["rule_id"]) is not str or type(verdict["code"]) is not str:
            raise _bad("a verdict's rule_id and code are strings")
        if verdict["enforcement"] not in ENFORCEMENTS:
            raise _bad(f"a verdict's enforcement is one of {list(ENFORCEMENTS)}")
    started, ended = body["started_at"], body["ended_at"]
    if type(started) is not str or not _TIME.match(started):
        raise _bad("started_at must be YYYY-MM-DDTHH:MM:SS.ffffffZ")
    if type(ended) is not str or not _TIME.match(ended):
        raise _bad("ended_at must be YYYY-MM-DDTHH:MM:SS.ffffffZ")
    if ended < started:
        raise _bad("ended_at is before started_at")
    if not is_digest(body["key_id"]):
        raise _bad("key_id must be a sha256:<hex> key id")
    _check_audit_head(body.get("audit_head"), kind)
    children = body["children"]
    if type(children) is not list:
        raise _bad("children must be a list")
    refs = []
    for child in children:
        if type(child) is not dict or child.keys() != _CHILD_KEYS:
            raise _bad("each child has exactly receipt_id and body_digest")
        rid, bdg = child["receipt_id"], child["body_digest"]
        # one check covers both when they are equal, as every honest commitment has them
        if not is_digest(rid) or (bdg != rid and not is_digest(bdg)):
            raise _bad("a child's receipt_id and body_digest are sha256:<hex> digests")
        refs.append(ChildRef(rid, bdg))
    return tuple(refs)


def _check_audit_head(head: object, kind: str) -> None:
    if head is None:
        return
    if kind != "run":
        raise _bad("only a run receipt commits the audit log's head")
    if type(head) is not dict or head.keys() != _HEAD_KEYS:
        raise _bad("audit_head has exactly lines and last_digest")
    lines, last = head["lines"], head["last_digest"]
    if type(lines) is not int or not 0 <= lines <= _MAX_LINES:
        raise _bad("audit_head.lines is a non-negative integer")
    if (lines == 0) != (last is None) or (last is not None and not is_digest(last)):
        raise _bad("audit_head.last_digest is a sha256:<hex> digest, null only for 0 lines")


def parse_envelope(data: bytes) -> Envelope:
    """Parse one receipt file strictly.

    The file must be exactly ``canonical(envelope) + LF``: any other spacing, key order,
    duplicate key, escape or number form is refused, so one flipped byte anywhere cannot pass.

    Raises:
        ReceiptInvalid: code ``malformed`` (not JSON, wrong shape, a rule broken) or
            ``not_canonical`` (valid JSON but not the canonical bytes).
    """
    try:
        text = data.decode("utf-8")
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad("the receipt file is not JSON") from exc
    if type(doc) is not dict or doc.keys() != _ENVELOPE_KEYS:
        raise _bad("a receipt file holds exactly body, key_id and signature")
    body = doc["body"]
    children = check_body(body)
    key_id, sig = doc["key_id"], doc["signature"]
    if key_id != body["key_id"]:
        raise ReceiptInvalid(
            "the envelope's key_id differs from the body's", code="key_id_mismatch"
        )
    if sig is not None and (type(sig) is not str or not sig.isascii()):
        raise _bad("signature must be a base64 string or null")
    try:
        # check_body admitted only fixed ASCII keys, strings, nulls, lists, objects and
        # integers in the IEEE-754 safe range (audit_head.lines), and the
        # envelope adds two ASCII keys with a string and a string or null: the values for which
        # the plain route is exactly RFC 8785 (see proctor.receipts.canonical). Its keys sort
        # as body, key_id, signature, so the whole file is one encoding plus LF, and the body
        # is the bytes between '{"body":' and the ASCII tail that encode_envelope writes.
        canonical = canonical_text(doc)
    except UnicodeEncodeError as exc:
        raise _bad("the receipt body holds a string that is not valid Unicode") from exc
    if canonical + "\n" != text:
        raise ReceiptInvalid(
            "the receipt file is not in canonical form (bytes were changed or reformatted)",
            code="not_canonical",
        )
    signature: bytes | None = None
    if sig is not None:
        try:
            signature = binascii.a2b_base64(sig, strict_mode=True)
        except binascii.Error as exc:
            raise _bad("signature is not valid base64") from exc
    elif body["kind"] not in UNSIGNED_KINDS:
        raise ReceiptInvalid(f"a {body['kind']} receipt must be signed", code="signature_missing")
    # key_id is a digest and sig is base64 (checked above): ASCII that JSON writes unescaped,
    # so the tail after the body is as long in bytes as these characters
    tail = len(_TAIL) + len(key_id) + (4 if sig is None else len(sig) + 2)
    body_bytes = data[_BODY_AT : len(data) - tail]
    return Envelope(body, body_bytes, key_id, signature, children)
