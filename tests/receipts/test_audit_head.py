"""A run receipt commits the audit log's head (``audit_head``); nothing else may carry one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ReceiptInvalid, UsageError
from proctor.receipts.model import Subject, encode_envelope, parse_envelope
from proctor.receipts.writer import ReceiptWriter, seal
from proctor.runtime.records.receipts import ReceiptStore
from proctor.runtime.records.verify_folder import verify_receipt
from tests.receipt_files import stored
from tests.receipts.helpers import PKG, T0, body, fixed_clock, signer

HEAD = {"lines": 41, "last_digest": "sha256:" + "cd" * 32}


def test_a_run_receipt_commits_the_head_and_verifies(tmp_path: Path) -> None:
    writer = ReceiptWriter(ReceiptStore(tmp_path), signer(), clock=fixed_clock)
    step = writer.step(Subject("hello", PKG, "main", "a"), outcome="completed", started_at=T0)
    root = writer.run(
        Subject("hello", PKG, "main"),
        outcome="completed",
        started_at=T0,
        children=[step],
        audit_head=HEAD,
    )
    files = {rid[7:]: json.loads(data) for rid, data in stored(tmp_path).items()}
    assert files[root.receipt_id[7:]]["body"]["audit_head"] == HEAD
    assert files[step.receipt_id[7:]]["body"]["audit_head"] is None
    result = verify_receipt(root.receipt_id, receipts_dir=tmp_path, public_key=signer().public_key)
    assert result.status == "verified", result


def test_only_a_run_receipt_carries_a_head(tmp_path: Path) -> None:
    writer = ReceiptWriter(ReceiptStore(tmp_path), signer(), clock=fixed_clock)
    with pytest.raises(UsageError) as refused:
        writer.step(
            Subject("hello", PKG, "main", "a"), outcome="completed", started_at=T0, audit_head=HEAD
        )
    assert refused.value.code == "receipt_field_invalid"
    assert not stored(tmp_path)


@pytest.mark.parametrize(
    "head",
    [
        {"lines": -1, "last_digest": HEAD["last_digest"]},
        {"lines": True, "last_digest": HEAD["last_digest"]},
        {"lines": "1", "last_digest": HEAD["last_digest"]},
        {"lines": 3, "last_digest": None},
        {"lines": 0, "last_digest": HEAD["last_digest"]},
        {"lines": 3, "last_digest": "sha256:xyz"},
        {"lines": 3},
        {**HEAD, "first_digest": HEAD["last_digest"]},
        [41, HEAD["last_digest"]],
    ],
)
def test_a_malformed_head_is_refused(head: Any) -> None:
    data = seal(body("run", signer().key_id, audit_head=head), signer())[1]
    with pytest.raises(ReceiptInvalid) as refused:
        parse_envelope(data)
    assert refused.value.code == "malformed"


def test_a_line_count_past_the_safe_integers_is_refused() -> None:
    # canonical JSON cannot write it, so the file is built by hand as a forger would
    doc = body("run", signer().key_id, audit_head={**HEAD, "lines": 2**53})
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    with pytest.raises(ReceiptInvalid) as refused:
        parse_envelope(encode_envelope(raw, signer().key_id, "AAAA"))
    assert refused.value.code == "malformed"


def test_an_empty_log_has_no_last_digest() -> None:
    empty = {"lines": 0, "last_digest": None}
    data = seal(body("run", signer().key_id, audit_head=empty), signer())[1]
    assert parse_envelope(data).body["audit_head"]["lines"] == 0


def test_a_receipt_from_before_the_anchor_still_parses() -> None:
    old = body("run", signer().key_id)
    assert "audit_head" not in old
    assert parse_envelope(seal(old, signer())[1]).body == old
