"""Receipts as in-toto statements in DSSE envelopes (pure: no I/O, no clock).

A sealed run's verified receipt tree becomes one in-toto Statement v1 whose predicate
(:data:`PREDICATE_TYPE`) summarises the tree and whose subjects are what the run produced or
changed, by digest; the statement is the payload of one DSSE envelope
(:data:`PAYLOAD_TYPE`) signed with the same Ed25519 key that signs receipts. Tools of the
supply-chain ecosystem (securesystemslib, in-toto, cosign's ``verify-blob-attestation``) check
it with the public key ``proctor key export-public`` prints.

What is signed is DSSE's pre-authentication encoding, :func:`pae`:
``"DSSEv1" SP len(type) SP type SP len(body) SP body`` (lengths in ASCII decimal), never the
JSON of the envelope, so the envelope itself need not be canonical.

:func:`open_envelope` is the strict reader: it refuses anything but one envelope of exactly
``payload``, ``payloadType`` and ``signatures``, a payload type other than in-toto's, a payload
that is not a Statement v1 of our predicate type, or a signature that no given key makes.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from proctor.contracts import json_strict
from proctor.errors import ParseError, ReceiptInvalid
from proctor.receipts.canonical import canonical, digest
from proctor.receipts.signing import PublicKey, Signer

__all__ = [
    "MAX_ENVELOPE_BYTES",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "Subject",
    "open_envelope",
    "pae",
    "seal_statement",
    "statement",
    "tree_summary",
]

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:proctor:predicate:receipt-tree:v1"
"""The predicate type of proctor's statements (documented in docs/evidence.md)."""
MAX_ENVELOPE_BYTES = 64 * 1024 * 1024

_HEX64 = re.compile(r"[0-9a-f]{64}")
_SUBJECT_NAME = re.compile(r"(file|artifact|receipt):[^\x00-\x1f\x7f]{1,4096}")

Subject = tuple[str, str]
"""A statement subject: its name (``file:<workspace path>``, ``artifact:sha256:<hex>`` or
``receipt:sha256:<hex>``) and the 64 hex digits of its SHA-256."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1's pre-authentication encoding: the exact bytes a DSSE signature covers."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def tree_summary(root_id: str, bodies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The predicate: a verified tree's run receipt and what the tree holds.

    ``bodies`` are the receipt bodies in walk order, the run receipt first. The summary carries
    ``tree_digest``, the digest of the canonical list of every receipt id in walk order, so a
    reader holding the receipts can check that the statement speaks of exactly that tree.

    Raises:
        ReceiptInvalid: (``export_tree_invalid``) the first body is not a run receipt.
    """
    if not bodies or bodies[0].get("kind") != "run":
        raise ReceiptInvalid(
            "an in-toto statement is made of a run receipt's tree; this receipt is not a run's",
            code="export_tree_invalid",
        )
    run = bodies[0]
    counts = {"run": 0, "step": 0, "call": 0}
    refused: dict[str, int] = {}
    warned: dict[str, int] = {}
    ids: list[str] = [root_id]
    for body in bodies:
        counts[str(body["kind"])] += 1
        for verdict in body.get("verdicts") or ():
            into = refused if verdict.get("enforcement") == "block" else warned
            code = str(verdict.get("code"))
            into[code] = into.get(code, 0) + 1
        ids.extend(str(child["receipt_id"]) for child in body.get("children") or ())
    subject = run["subject"]
    return {
        "receipt_id": root_id,
        "tree_digest": digest(ids),
        "key_id": None,  # filled by seal_statement: the key that signs is the one named
        "skill": subject.get("skill"),
        "method": subject.get("method"),
        "package_digest": subject.get("package_digest"),
        "package": run.get("package"),
        "outcome": run["outcome"],
        "seal_reason": run.get("seal_reason"),
        "started_at": run.get("started_at"),
        "ended_at": run.get("ended_at"),
        "inputs_digest": run.get("inputs_digest"),
        "outputs_digest": run.get("outputs_digest"),
        "authority_digest": run.get("authority_digest"),
        "policy_digest": run.get("policy_digest"),
        "audit_head": run.get("audit_head"),
        "spend_micro_usd": run.get("spend_micro_usd"),
        "receipts": {"runs": counts["run"], "steps": counts["step"], "calls": counts["call"]},
        "verdicts": {
            "refused": dict(sorted(refused.items())),
            "warned": dict(sorted(warned.items())),
        },
    }


def statement(
    summary: Mapping[str, Any], subjects: Iterable[Subject], key_id: str
) -> dict[str, Any]:
    """An in-toto Statement v1 of ``summary`` about ``subjects`` (sorted, one per name).

    The run receipt is always a subject (``receipt:<id>``), so the list is never empty. A name
    given twice keeps its last digest: a file written twice is stated as it was left.

    Raises:
        ReceiptInvalid: (``export_subject_invalid``) a name or digest is malformed.
    """
    by_name: dict[str, str] = {}
    root = str(summary["receipt_id"])
    for name, hex_digest in (*subjects, (f"receipt:{root}", root.removeprefix("sha256:"))):
        if _SUBJECT_NAME.fullmatch(name) is None or _HEX64.fullmatch(hex_digest) is None:
            raise ReceiptInvalid(
                f"subject {name[:80]!r} is not a name and a SHA-256 digest",
                code="export_subject_invalid",
            )
        by_name[name] = hex_digest
    predicate = dict(summary)
    predicate["key_id"] = key_id
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": n, "digest": {"sha256": d}} for n, d in sorted(by_name.items())],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def seal_statement(doc: Mapping[str, Any], signer: Signer) -> dict[str, Any]:
    """One DSSE envelope holding ``doc`` (canonical JSON), signed by ``signer``.

    ``keyid`` is proctor's key id (``sha256:`` of the raw public key).
    """
    payload = canonical(dict(doc))
    signature = signer.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payload": base64.standard_b64encode(payload).decode("ascii"),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {"keyid": signer.key_id, "sig": base64.standard_b64encode(signature).decode("ascii")}
        ],
    }


def _bad(message: str) -> ReceiptInvalid:
    return ReceiptInvalid(message, code="envelope_invalid")


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise _bad(f"{what} is not a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise _bad(f"{what} is not standard base64") from exc


def open_envelope(data: bytes, keys: Iterable[PublicKey]) -> dict[str, Any]:
    """The statement inside a DSSE envelope, once a signature by one of ``keys`` checks.

    Raises:
        ReceiptInvalid: ``envelope_invalid`` for an envelope, payload or statement of the
            wrong shape; ``envelope_signature_invalid`` when no signature is a given key's
            valid signature of the payload (a changed byte anywhere in it).
    """
    if len(data) > MAX_ENVELOPE_BYTES:
        raise _bad(f"an envelope is at most {MAX_ENVELOPE_BYTES >> 20} MiB")
    try:
        # strict, here and for the payload: a key given twice would be read one way by this
        # verifier and perhaps the other way by the next
        doc = json_strict.loads(data, source="the envelope")
    except ParseError as exc:
        raise _bad(f"not a strict JSON document ({exc.code})") from exc
    if not isinstance(doc, dict) or set(doc) != {"payload", "payloadType", "signatures"}:
        raise _bad("a DSSE envelope has exactly payload, payloadType and signatures")
    if doc["payloadType"] != PAYLOAD_TYPE:
        raise _bad(f"payloadType is not {PAYLOAD_TYPE}")
    payload = _b64(doc["payload"], "payload")
    signatures = doc["signatures"]
    if not isinstance(signatures, list) or not 1 <= len(signatures) <= 16:
        raise _bad("signatures is a list of 1 to 16 signatures")
    message = pae(PAYLOAD_TYPE, payload)
    trusted = {key.key_id: key for key in keys}
    signed = False
    for entry in signatures:
        if not isinstance(entry, dict) or set(entry) - {"keyid", "sig"} or "sig" not in entry:
            raise _bad("a signature is {keyid, sig}")
        key = trusted.get(entry.get("keyid"))  # type: ignore[arg-type]
        signed = signed or (key is not None and key.verify(_b64(entry["sig"], "sig"), message))
    if not signed:
        raise ReceiptInvalid(
            "no signature on the envelope is a trusted key's signature of its payload",
            code="envelope_signature_invalid",
        )
    try:
        inner = json_strict.loads(payload, source="the payload")
    except ParseError as exc:
        raise _bad(f"the payload is not strict JSON ({exc.code})") from exc
    if (
        not isinstance(inner, dict)
        or inner.get("_type") != STATEMENT_TYPE
        or inner.get("predicateType") != PREDICATE_TYPE
        or not isinstance(inner.get("subject"), list)
        or not inner["subject"]
        or not isinstance(inner.get("predicate"), dict)
    ):
        raise _bad(f"the payload is not an in-toto Statement v1 of {PREDICATE_TYPE}")
    return inner
