"""The pure in-toto/DSSE form: PAE, the statement, and the strict envelope reader (fuzzed)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ReceiptInvalid
from proctor.receipts.intoto import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    open_envelope,
    pae,
    seal_statement,
    statement,
    tree_summary,
)
from proctor.receipts.signing import signer_from_seed

SIGNER = signer_from_seed(b"\x01" * 32)
OTHER = signer_from_seed(b"\x02" * 32)
ROOT = "sha256:" + "a" * 64
RUN = {
    "kind": "run",
    "subject": {"skill": "s", "method": "m", "package_digest": "sha256:" + "b" * 64},
    "outcome": "completed",
    "children": [{"receipt_id": "sha256:" + "c" * 64, "body_digest": "sha256:" + "c" * 64}],
    "verdicts": [],
}
STEP = {
    "kind": "step",
    "subject": {},
    "outcome": "blocked",
    "children": [],
    "verdicts": [{"rule_id": "r", "code": "denied", "enforcement": "block"}],
}


def _envelope() -> bytes:
    doc = statement(tree_summary(ROOT, [RUN, STEP]), [("file:a.txt", "d" * 64)], SIGNER.key_id)
    return json.dumps(seal_statement(doc, SIGNER)).encode()


def test_pae_is_dsse_v1() -> None:
    assert pae("a/b", b"hello") == b"DSSEv1 3 a/b 5 hello"


def test_round_trip_and_summary() -> None:
    inner = open_envelope(_envelope(), [SIGNER.public_key])
    assert inner["predicateType"] == PREDICATE_TYPE
    assert [s["name"] for s in inner["subject"]] == ["file:a.txt", f"receipt:{ROOT}"]
    assert inner["predicate"]["receipts"] == {"runs": 1, "steps": 1, "calls": 0}
    assert inner["predicate"]["verdicts"]["refused"] == {"denied": 1}
    assert inner["predicate"]["key_id"] == SIGNER.key_id


def test_another_key_or_a_flipped_byte_is_refused() -> None:
    with pytest.raises(ReceiptInvalid) as info:
        open_envelope(_envelope(), [OTHER.public_key])
    assert info.value.code == "envelope_signature_invalid"
    doc = json.loads(_envelope())
    payload = bytearray(base64.b64decode(doc["payload"]))
    payload[-3] ^= 1
    doc["payload"] = base64.b64encode(bytes(payload)).decode()
    with pytest.raises(ReceiptInvalid) as info:
        open_envelope(json.dumps(doc).encode(), [SIGNER.public_key])
    assert info.value.code == "envelope_signature_invalid"


def test_a_step_receipt_makes_no_statement() -> None:
    with pytest.raises(ReceiptInvalid) as info:
        tree_summary(ROOT, [STEP])
    assert info.value.code == "export_tree_invalid"


def test_bad_subjects_are_refused() -> None:
    summary = tree_summary(ROOT, [RUN])
    for bad in [("file:\n", "d" * 64), ("thing:x", "d" * 64), ("file:x", "D" * 64)]:
        with pytest.raises(ReceiptInvalid) as info:
            statement(summary, [bad], SIGNER.key_id)
        assert info.value.code == "export_subject_invalid"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048) | st.text(max_size=512).map(str.encode))
def test_open_envelope_refuses_any_bytes_with_a_code(data: bytes) -> None:
    try:
        open_envelope(data, [SIGNER.public_key])
    except ReceiptInvalid as exc:
        assert exc.code in {"envelope_invalid", "envelope_signature_invalid"}


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0), st.integers(min_value=0, max_value=7))
def test_every_flipped_bit_of_the_envelope_is_refused_or_harmless(at: int, bit: int) -> None:
    raw = bytearray(_envelope())
    at %= len(raw)
    raw[at] ^= 1 << bit
    try:
        inner = open_envelope(bytes(raw), [SIGNER.public_key])
    except ReceiptInvalid:
        return
    # a flip that still opens changed nothing signed (e.g. base64 padding bits, JSON spacing)
    assert inner == open_envelope(_envelope(), [SIGNER.public_key])


def test_a_signed_payload_that_repeats_a_key_is_refused() -> None:
    # the signer signed ambiguous bytes: one verifier reading the last subject and another the
    # first would vouch for different things under one signature
    good = json.loads(base64.b64decode(json.loads(_envelope())["payload"]))
    text = json.dumps(good)
    payload = text.replace('"subject": ', '"subject": [{"name": "file:evil", "digest": {}}], '
                           '"subject": ', 1).encode()  # fmt: skip
    sig = SIGNER.sign(pae(PAYLOAD_TYPE, payload))
    envelope = {
        "payload": base64.standard_b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": SIGNER.key_id, "sig": base64.standard_b64encode(sig).decode()}],
    }
    with pytest.raises(ReceiptInvalid) as info:
        open_envelope(json.dumps(envelope).encode(), [SIGNER.public_key])
    assert info.value.code == "envelope_invalid"
    assert "duplicate_key" in str(info.value)
    twice = json.dumps(json.loads(_envelope())).replace(
        '"payloadType": ', '"payloadType": "x", "payloadType": ', 1
    )
    with pytest.raises(ReceiptInvalid) as info:
        open_envelope(twice.encode(), [SIGNER.public_key])
    assert info.value.code == "envelope_invalid"
