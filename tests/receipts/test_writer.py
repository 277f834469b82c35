"""The receipt writer: body shape, determinism, amortization, and the tree rules it enforces."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from proctor.core.budget import MAX_TREE_DEPTH, MAX_TREE_RECEIPTS
from proctor.errors import ReceiptInvalid, UsageError
from proctor.receipts.canonical import canonical, digest
from proctor.receipts.model import Subject, Verdict, encode_envelope, parse_envelope
from proctor.receipts.writer import ReceiptWriter, Ref
from proctor.runtime.records.receipts import ReceiptStore
from proctor.runtime.records.verify_folder import verify_receipt
from tests.receipt_files import stored
from tests.receipts.helpers import PKG, T0, body, fixed_clock, signer, small_tree


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}  # fmt: skip


def _read(folder: Path, receipt_id: str) -> bytes:
    return stored(folder)[receipt_id]


def test_same_inputs_key_and_clock_give_byte_identical_files(tmp_path: Path) -> None:
    first = small_tree(ReceiptStore(tmp_path / "one"))
    second = small_tree(ReceiptStore(tmp_path / "two"))
    assert first == second
    assert _files(tmp_path / "one") == _files(tmp_path / "two")
    assert len(stored(tmp_path / "one")) == 8
    assert "index.jsonl" in _files(tmp_path / "one")


def test_receipt_file_is_canonical_envelope(tmp_path: Path) -> None:
    refs = small_tree(ReceiptStore(tmp_path))
    data = _read(tmp_path, refs["root"].receipt_id)
    doc = json.loads(data)
    assert data == canonical(doc) + b"\n"
    assert digest(doc["body"]) == refs["root"].receipt_id == refs["root"].body_digest
    assert doc["key_id"] == doc["body"]["key_id"] == signer().key_id
    assert doc["body"]["children"] == [
        {"receipt_id": refs[n].receipt_id, "body_digest": refs[n].receipt_id} for n in "ab"
    ]
    assert doc["body"]["ended_at"] == "2026-01-02T03:04:05.678901Z"
    assert signer().public_key.verify(
        __import__("base64").b64decode(doc["signature"]), canonical(doc["body"])
    )


def test_calls_are_amortized_unless_asked(tmp_path: Path) -> None:
    refs = small_tree(ReceiptStore(tmp_path / "a"))
    call = json.loads(_read(tmp_path / "a", refs["a1"].receipt_id))
    assert call["signature"] is None
    w = ReceiptWriter(ReceiptStore(tmp_path / "b"), signer(), clock=fixed_clock, sign_calls=True)
    ref = w.call(Subject("hello", PKG, "main", "a", "echo"), outcome="completed", started_at=T0)
    assert not (tmp_path / "b").exists()  # call receipts wait for the step (or flush)
    w.flush()
    signed = json.loads(_read(tmp_path / "b", ref.receipt_id))
    assert signed["signature"] is not None
    assert (
        verify_receipt(
            ref.receipt_id, receipts_dir=tmp_path / "b", public_key=signer().public_key
        ).status
        == "verified"
    )


def test_verdicts_and_digests_are_recorded(tmp_path: Path) -> None:
    w = ReceiptWriter(ReceiptStore(tmp_path), signer(), clock=fixed_clock)
    ref = w.call(
        Subject("hello", PKG, "main", "a", "fs.write"),
        outcome="blocked",
        seal_reason="policy_refused",
        started_at=T0 - timedelta(seconds=1),
        inputs_digest=digest({"path": "x"}),
        verdicts=[Verdict("no-secrets", "secret_in_write", "block")],
    )
    w.flush()
    doc = json.loads(_read(tmp_path, ref.receipt_id))["body"]
    assert doc["verdicts"] == [
        {"rule_id": "no-secrets", "code": "secret_in_write", "enforcement": "block"}
    ]
    assert doc["inputs_digest"] == digest({"path": "x"})
    assert doc["started_at"] == "2026-01-02T03:04:04.678901Z"


def test_times_are_normalised_to_utc(tmp_path: Path) -> None:
    w = ReceiptWriter(ReceiptStore(tmp_path), signer(), clock=fixed_clock)
    plus2 = timezone(timedelta(hours=2))
    ref = w.step(
        Subject("h", None, "m", "s"),
        outcome="completed",
        started_at=datetime(2026, 1, 2, 5, 4, 5, tzinfo=plus2),
    )
    doc = json.loads(_read(tmp_path, ref.receipt_id))["body"]
    assert doc["started_at"] == "2026-01-02T03:04:05.000000Z"


@pytest.mark.parametrize(
    "fields",
    [
        {"outcome": "done"},
        {"outcome": "failed", "seal_reason": "because"},
        {"outcome": "completed", "seal_reason": "tool_failed"},
        {"outcome": "completed", "inputs_digest": "md5:abc"},
        {"outcome": "completed", "started_at": datetime(2026, 1, 1)},
        {"outcome": "completed", "started_at": T0 + timedelta(seconds=1)},
    ],
)
def test_malformed_fields_are_refused_and_nothing_is_written(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    w = ReceiptWriter(ReceiptStore(tmp_path), signer(), clock=fixed_clock)
    args: dict[str, object] = {"started_at": T0, **fields}
    with pytest.raises(UsageError):
        w.call(Subject("hello", PKG, "main", "a", "echo"), **args)
    assert not stored(tmp_path)


def test_step_without_step_id_is_refused(tmp_path: Path) -> None:
    w = ReceiptWriter(ReceiptStore(tmp_path), signer(), clock=fixed_clock)
    with pytest.raises(UsageError):
        w.step(Subject("hello", PKG, "main"), outcome="completed", started_at=T0)


def test_a_ref_committed_twice_is_refused_before_writing(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path)
    w = ReceiptWriter(store, signer(), clock=fixed_clock)
    call = w.call(Subject("h", None, "m", "s", "echo"), outcome="completed", started_at=T0)
    w.step(Subject("h", None, "m", "s"), outcome="completed", started_at=T0, children=[call])
    before = _files(tmp_path)
    with pytest.raises(ReceiptInvalid) as info:
        w.step(Subject("h", None, "m", "t"), outcome="completed", started_at=T0, children=[call])
    assert info.value.code == "receipt_committed_twice"
    assert _files(tmp_path) == before


def test_tree_bounds_are_refused_before_writing(tmp_path: Path) -> None:
    w = ReceiptWriter(ReceiptStore(tmp_path), signer(), clock=fixed_clock)
    sub = Subject("h", None, "m", "s")
    big = Ref("sha256:" + "1" * 64, "sha256:" + "1" * 64, "run", "completed", MAX_TREE_RECEIPTS, 3)
    with pytest.raises(ReceiptInvalid) as info:
        w.step(sub, outcome="completed", started_at=T0, children=[big])
    assert info.value.code == "receipt_tree_too_large"
    deep = Ref("sha256:" + "2" * 64, "sha256:" + "2" * 64, "run", "completed", 65, MAX_TREE_DEPTH)
    with pytest.raises(ReceiptInvalid) as info:
        w.step(sub, outcome="completed", started_at=T0, children=[deep])
    assert info.value.code == "receipt_tree_too_deep"
    assert not stored(tmp_path)
    fits = Ref(
        "sha256:" + "3" * 64,
        "sha256:" + "3" * 64,
        "run",
        "completed",
        MAX_TREE_RECEIPTS - 1,
        MAX_TREE_DEPTH - 1,
    )
    step = w.step(sub, outcome="completed", started_at=T0, children=[fits])
    assert step.size == MAX_TREE_RECEIPTS


def test_envelope_concatenation_equals_canonical() -> None:
    s = signer()
    b = body("step", s.key_id)
    for sig in (None, "QUJD"):
        expected = canonical({"body": b, "key_id": s.key_id, "signature": sig}) + b"\n"
        assert encode_envelope(canonical(b), s.key_id, sig) == expected


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda b: b.update(extra=1), "malformed"),
        (lambda b: b.pop("verdicts"), "malformed"),
        (lambda b: b.update(kind="task"), "malformed"),
        (lambda b: b.update(outcome=["completed"]), "malformed"),
        (lambda b: b.update(seal_reason=["x"]), "malformed"),
        (lambda b: b.update(started_at="2026-01-02T03:04:05Z"), "malformed"),
        (lambda b: b.update(ended_at="2026-01-01T00:00:00.000000Z"), "malformed"),
        (lambda b: b["subject"].update(parent="x"), "malformed"),
        (
            lambda b: b.update(verdicts=[{"rule_id": "r", "code": "c", "enforcement": "advisory"}]),
            "malformed",
        ),
        (lambda b: b.update(children=[{"receipt_id": "sha256:" + "a" * 64}]), "malformed"),
    ],
)
def test_parser_refuses_malformed_bodies(mutate: object, code: str) -> None:
    s = signer()
    b = body("step", s.key_id)
    mutate(b)  # type: ignore[operator]
    data = encode_envelope(canonical(b), s.key_id, None)
    with pytest.raises(ReceiptInvalid) as info:
        parse_envelope(data)
    assert info.value.code == code


def test_parser_refuses_non_canonical_files() -> None:
    s = signer()
    data = encode_envelope(canonical(body("call", s.key_id)), s.key_id, None)
    parse_envelope(data)
    for variant in (data.rstrip(b"\n"), data + b"\n", b" " + data, data.replace(b":", b": ", 1)):
        with pytest.raises(ReceiptInvalid) as info:
            parse_envelope(variant)
        assert info.value.code in {"not_canonical", "malformed"}


def test_a_receipt_with_a_key_twice_is_refused() -> None:
    # already so before the boundary readers moved to the strict reader: a receipt file must
    # be its canonical bytes, which never repeat a key (kept here as the reason those
    # readers were left as they were)
    s = signer()
    data = encode_envelope(canonical(body("call", s.key_id)), s.key_id, None)
    for key in (b'"key_id":', b'"signature":'):
        twice = data.replace(key, key + b'"x",' + key, 1)
        with pytest.raises(ReceiptInvalid) as info:
            parse_envelope(twice)
        assert info.value.code in {"not_canonical", "malformed"}


def test_a_run_receipt_states_its_package_identity_and_one_without_still_verifies() -> None:
    from proctor.receipts.model import check_body

    s = signer()
    with_identity = body("run", s.key_id, audit_head=None, identity="local:skills/summ")
    check_body(with_identity)
    check_body(body("run", s.key_id, audit_head=None))  # written before identities
    for kind, value in (
        ("step", "local:skills/summ"),  # a run's alone
        ("run", "summ"),  # a name the package chose is no identity
        ("run", "core:"),
        ("run", "local:a\u202eb"),
        ("run", "local:" + "a" * 1025),
        ("run", 7),
    ):
        with pytest.raises(ReceiptInvalid):
            check_body(body(kind, s.key_id, audit_head=None, identity=value))
    from proctor.receipts.writer import seal

    data = seal(with_identity, s, signed=True)[1]
    assert parse_envelope(data).body["identity"] == "local:skills/summ"
