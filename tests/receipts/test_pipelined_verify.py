"""Signature batches checked while the walk reads on report exactly what the one-by-one walk
reports, whichever of the two (a batch in flight, or the walk itself) finds a failure first."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from proctor.errors import StoreError
from proctor.receipts.verify import (
    MAX_IN_FLIGHT,
    Loader,
    SignatureCheck,
    VerifyResult,
    verify_tree,
)
from proctor.runtime.records.signature_pool import SignaturePool
from tests.receipts.helpers import body, signer, write_sealed

# small batches (two pool slices each) keep the tree small; more signed receipts than
# MAX_IN_FLIGHT + 1 batches, so the walk waits on the oldest
BATCH_SIZE = 40
STEPS = (MAX_IN_FLIGHT + 2) * BATCH_SIZE


def _file(folder: Path, rid: str) -> Path:
    return folder / f"{rid.removeprefix('sha256:')}.json"


def _load(folder: Path) -> Loader:
    def load(rid: str) -> bytes | None:
        path = _file(folder, rid)
        return path.read_bytes() if path.exists() else None

    return load


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """run -> STEPS signed steps, each with one amortized call (written once per module)."""
    folder = tmp_path_factory.mktemp("fan")
    s = signer()
    steps = []
    for i in range(STEPS):
        call = write_sealed(
            folder,
            body("call", s.key_id, audit_head=None, inputs_digest=f"sha256:{i:064x}"),
            s,
            signed=False,
        )
        steps.append(
            write_sealed(
                folder, body("step", s.key_id, [call], audit_head=None, step_id=f"s{i}"), s
            )
        )
    root = write_sealed(folder, body("run", s.key_id, steps, audit_head=None), s)
    return folder, root, steps


@pytest.fixture
def fan(built: tuple[Path, str, list[str]], tmp_path: Path) -> tuple[Path, str, list[str]]:
    folder, root, steps = built
    copy = tmp_path / "fan"
    shutil.copytree(folder, copy)
    return copy, root, steps


def _swap_signature(folder: Path, target: str, donor: str) -> None:
    head = _file(folder, target).read_bytes().rsplit(b'"signature":', 1)[0]
    tail = _file(folder, donor).read_bytes().rsplit(b'"signature":', 1)[1]
    _file(folder, target).write_bytes(head + b'"signature":' + tail)


def _pipelined(
    folder: Path, root: str, load: Loader | None = None, workers: int = 1
) -> VerifyResult:
    with SignaturePool(workers=workers) as pool:
        return verify_tree(
            root,
            load or _load(folder),
            [signer().public_key],
            submit_batch=pool.submit,
            batch_size=BATCH_SIZE,
        )


def _alike(folder: Path, root: str) -> VerifyResult:
    one = verify_tree(root, _load(folder), [signer().public_key])
    for workers in (0, 1, 2):
        assert _pipelined(folder, root, workers=workers) == one
    return one


def test_intact_fan_verifies_alike(fan: tuple[Path, str, list[str]]) -> None:
    folder, root, _ = fan
    result = _alike(folder, root)
    assert result.ok and result.signed == STEPS + 1 and result.amortized == STEPS


def test_bad_signature_in_an_early_batch_beats_a_later_missing_child(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    _swap_signature(folder, steps[3], steps[4])
    _file(folder, steps[-1]).unlink()  # many batches later: the walk gets there first
    result = _alike(folder, root)
    assert (result.reason, result.failing_receipt_id) == ("signature_invalid", steps[3])
    assert result.receipts == 1 + 3 * 2 + 1 and result.signed == 4


def test_bad_signature_after_the_in_flight_boundary(fan: tuple[Path, str, list[str]]) -> None:
    folder, root, steps = fan
    late = (MAX_IN_FLIGHT + 1) * BATCH_SIZE + 10  # in a batch sent after the walk first waited
    _swap_signature(folder, steps[late], steps[0])
    result = _alike(folder, root)
    assert (result.reason, result.failing_receipt_id) == ("signature_invalid", steps[late])


def test_first_of_two_bad_signatures_in_different_batches(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    _swap_signature(folder, steps[2 * BATCH_SIZE + 5], steps[0])
    _swap_signature(folder, steps[BATCH_SIZE - 1], steps[0])
    result = _alike(folder, root)
    assert result.failing_receipt_id == steps[BATCH_SIZE - 1]


def test_malformed_receipt_before_a_bad_signature_is_named(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    _file(folder, steps[BATCH_SIZE + 1]).write_bytes(b"{}\n")
    _swap_signature(folder, steps[BATCH_SIZE + 2], steps[0])
    result = _alike(folder, root)
    assert (result.reason, result.failing_receipt_id) == ("malformed", steps[BATCH_SIZE + 1])


def test_missing_child_while_batches_are_out(fan: tuple[Path, str, list[str]]) -> None:
    folder, root, steps = fan
    _file(folder, steps[MAX_IN_FLIGHT * BATCH_SIZE]).unlink()
    result = _alike(folder, root)
    assert (result.reason, result.failing_receipt_id, result.parent_id) == (
        "child_missing",
        steps[MAX_IN_FLIGHT * BATCH_SIZE],
        root,
    )


def _failing_at(folder: Path, broken: str) -> Loader:
    load = _load(folder)

    def failing(rid: str) -> bytes | None:
        if rid == broken:
            raise StoreError("the disk refused", code="receipt_store_io")
        return load(rid)

    return failing


def test_a_loader_error_after_a_bad_signature_in_flight_reports_the_signature(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    _swap_signature(folder, steps[10], steps[11])
    result = _pipelined(folder, root, _failing_at(folder, steps[3 * BATCH_SIZE]))
    assert (result.reason, result.failing_receipt_id) == ("signature_invalid", steps[10])


def test_a_loader_error_is_raised_when_every_batch_out_passes(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    with pytest.raises(StoreError):
        _pipelined(folder, root, _failing_at(folder, steps[3 * BATCH_SIZE]))


def test_a_checking_error_is_raised_to_the_walk() -> None:
    s = signer()
    message = b"m"
    good = (s.public_key, s.sign(message), message)
    broken = (s.public_key, good[1], None)
    with SignaturePool(workers=1) as pool:
        waits = [pool.submit([good] * 40), pool.submit([good] * 3 + [broken] + [good] * 40)]  # type: ignore[list-item]
        assert waits[0]() is None
        with pytest.raises(TypeError):
            waits[1]()


def _recording(folder: Path, root: str) -> tuple[VerifyResult, list[int]]:
    """The pipelined walk, and the size of every batch it sent off."""
    sent: list[int] = []
    with SignaturePool(workers=1) as pool:

        def submit(checks: Sequence[SignatureCheck]) -> Callable[[], int | None]:
            sent.append(len(checks))
            return pool.submit(checks)

        result = verify_tree(
            root, _load(folder), [signer().public_key], submit_batch=submit, batch_size=BATCH_SIZE
        )
    return result, sent


def test_the_last_checks_are_checked_by_the_walk_itself(fan: tuple[Path, str, list[str]]) -> None:
    # STEPS + 1 signed receipts (the run, then its steps): the last step is alone in the
    # final, partial batch, which the walk checks itself rather than send off and wait idle
    folder, root, steps = fan
    result, sent = _recording(folder, root)
    assert result.ok and sent == [BATCH_SIZE] * (STEPS // BATCH_SIZE)
    _swap_signature(folder, steps[-1], steps[0])
    result, sent = _recording(folder, root)
    assert (result.reason, result.failing_receipt_id) == ("signature_invalid", steps[-1])
    assert result.signed == STEPS and sent == [BATCH_SIZE] * (STEPS // BATCH_SIZE)
    assert result == verify_tree(root, _load(folder), [signer().public_key])


def test_a_bad_signature_out_beats_one_in_the_last_checks(
    fan: tuple[Path, str, list[str]],
) -> None:
    folder, root, steps = fan
    _swap_signature(folder, steps[-1], steps[0])
    _swap_signature(folder, steps[-3], steps[0])  # in the last batch sent off
    result = _alike(folder, root)
    assert (result.reason, result.failing_receipt_id) == ("signature_invalid", steps[-3])
