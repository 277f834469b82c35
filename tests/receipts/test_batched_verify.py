"""Batched signature checks (on threads) report exactly what the one-by-one walk reports."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from proctor.errors import StoreError
from proctor.receipts.canonical import canonical, digest_bytes
from proctor.receipts.model import parse_envelope
from proctor.receipts.verify import (
    Loader,
    SignatureCheck,
    VerifyResult,
    verify_serially,
    verify_tree,
)
from proctor.runtime.records.signature_pool import SignaturePool
from proctor.runtime.records.verify_folder import verify_receipt
from tests.receipts.helpers import body, other_signer, signer, write_sealed

STEPS = 600  # more than two batches of signed receipts


def _file(folder: Path, rid: str) -> Path:
    return folder / f"{rid.removeprefix('sha256:')}.json"


def _load(folder: Path) -> Loader:
    def load(rid: str) -> bytes | None:
        path = _file(folder, rid)
        return path.read_bytes() if path.exists() else None

    return load


@pytest.fixture
def fan(tmp_path: Path) -> tuple[Path, str, list[str]]:
    """run -> 600 signed steps, each with one amortized call."""
    s = signer()
    steps = []
    for i in range(STEPS):
        call = write_sealed(
            tmp_path, body("call", s.key_id, inputs_digest=f"sha256:{i:064x}"), s, signed=False
        )
        steps.append(write_sealed(tmp_path, body("step", s.key_id, [call], step_id=f"s{i}"), s))
    root = write_sealed(tmp_path, body("run", s.key_id, steps), s)
    return tmp_path, root, steps


def _swap_signature(folder: Path, target: str, donor: str) -> None:
    head = _file(folder, target).read_bytes().rsplit(b'"signature":', 1)[0]
    tail = _file(folder, donor).read_bytes().rsplit(b'"signature":', 1)[1]
    _file(folder, target).write_bytes(head + b'"signature":' + tail)


def _both(folder: Path, root: str) -> tuple[VerifyResult, VerifyResult, VerifyResult]:
    keys = [signer().public_key]
    one_by_one = verify_tree(root, _load(folder), keys)
    with SignaturePool(workers=1) as pool:
        batched = verify_tree(root, _load(folder), keys, verify_batch=pool)
    api = verify_receipt(root, receipts_dir=folder, public_key=signer().public_key)
    return one_by_one, batched, api


def test_intact_fan_verifies_alike(fan: tuple[Path, str, list[str]]) -> None:
    folder, root, _ = fan
    one, batched, api = _both(folder, root)
    assert one == batched == api
    assert api.ok and api.signed == STEPS + 1 and api.amortized == STEPS


def test_bad_signature_mid_batch_is_named_with_its_counts(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    _swap_signature(folder, steps[300], steps[7])
    _file(folder, steps[400]).unlink()  # a later failure the batched walk reads first
    one, batched, api = _both(folder, root)
    assert one == batched == api
    assert (api.reason, api.failing_receipt_id, api.parent_id) == (
        "signature_invalid",
        steps[300],
        root,
    )
    # the counts are those at the failing receipt: root + 300 steps + 300 calls + itself
    assert api.receipts == 602 and api.signed == 301


def test_first_of_two_bad_signatures_is_named(fan: tuple[Path, str, list[str]]) -> None:
    folder, root, steps = fan
    _swap_signature(folder, steps[5], steps[6])
    _swap_signature(folder, steps[140], steps[6])  # same batch, the other thread's slice
    one, batched, api = _both(folder, root)
    assert one == batched == api
    assert api.failing_receipt_id == steps[5]


def test_later_failure_reported_when_queued_signatures_pass(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    _file(folder, steps[450]).unlink()
    one, batched, api = _both(folder, root)
    assert one == batched == api
    assert (api.reason, api.failing_receipt_id) == ("child_missing", steps[450])


def test_unknown_key_after_queued_checks(tmp_path: Path) -> None:
    s, o = signer(), other_signer()
    steps = [write_sealed(tmp_path, body("step", s.key_id, step_id=f"s{i}"), s) for i in range(40)]
    steps.insert(20, write_sealed(tmp_path, body("step", o.key_id, step_id="other"), o))
    root = write_sealed(tmp_path, body("run", s.key_id, steps), s)
    one, batched, api = _both(tmp_path, root)
    assert one == batched == api
    assert (api.status, api.failing_receipt_id, api.signed) == (
        "unverified",
        steps[20],
        41,
    )


def _failing_at(folder: Path, broken: str) -> Loader:
    load = _load(folder)

    def failing(rid: str) -> bytes | None:
        if rid == broken:
            raise StoreError("the disk refused", code="receipt_store_io")
        return load(rid)

    return failing


def test_a_loader_error_after_a_bad_signature_reports_the_signature(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    _swap_signature(folder, steps[10], steps[11])
    with SignaturePool(workers=1) as pool:
        result = verify_tree(
            root, _failing_at(folder, steps[20]), [signer().public_key], verify_batch=pool
        )
    assert (result.reason, result.failing_receipt_id) == ("signature_invalid", steps[10])


def test_a_loader_error_is_raised_when_queued_signatures_pass(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    with SignaturePool(workers=1) as pool, pytest.raises(StoreError):
        verify_tree(root, _failing_at(folder, steps[20]), [signer().public_key], verify_batch=pool)


def _checks(n: int, bad: Sequence[int]) -> list[SignatureCheck]:
    s = signer()
    key = s.public_key
    out = []
    for i in range(n):
        message = f"message {i}".encode()
        sig = s.sign(message)
        out.append((key, sig if i not in bad else sig[::-1], message))
    return out


@pytest.mark.parametrize("bad", [[], [0], [63], [64], [100, 20], [127]])
def test_pool_names_the_lowest_failing_index(bad: list[int]) -> None:
    checks = _checks(128, bad)
    expected = min(bad) if bad else None
    assert verify_serially(checks) == expected
    for workers in (0, 1, 3):
        with SignaturePool(workers=workers) as pool:
            assert pool(checks) == expected
            assert pool(checks[:5]) == (min(bad) if bad and min(bad) < 5 else None)


def test_pool_raises_what_a_worker_raised() -> None:
    checks = _checks(64, [])
    broken: list[SignatureCheck] = [*checks[:40], (checks[0][0], checks[0][1], None), *checks[41:]]  # type: ignore[list-item]
    with SignaturePool(workers=1) as pool, pytest.raises(TypeError):
        pool(broken)


def test_parsed_body_bytes_are_the_canonical_body(tmp_path: Path) -> None:
    s = signer()
    for signed, kind in ((True, "step"), (False, "call")):
        extra = {"verdicts": [{"rule_id": "r-é", "code": "naïve\u2028", "enforcement": "warn"}]}
        rid = write_sealed(tmp_path, body(kind, s.key_id, **extra), s, signed=signed)
        env = parse_envelope(_file(tmp_path, rid).read_bytes())
        assert env.body_bytes == canonical(env.body)
        assert digest_bytes(env.body_bytes) == rid
