"""``proctor verify``'s path (helper processes, the folder reader, the fast recognizer) on the
shape the benchmark times: a run, its step, many amortized calls each committing a signed run
and step. Every tamper is named exactly as the one-by-one walk names it, wherever it falls:
in the last batch (which the walk checks itself), in an amortized call, in the wide step."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from proctor.receipts.verify import VerifyResult, verify_tree
from proctor.runtime.records.folder_reader import FolderReader
from proctor.runtime.records.verify_folder import verify_receipt
from tests.receipts.helpers import body, signer, write_sealed

CALLS = 90  # 182 signed receipts: several batches out to a helper, and a last partial one


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, list[str]]]:
    folder = tmp_path_factory.mktemp("fan")
    s = signer()
    ids: dict[str, list[str]] = {"call": [], "run": [], "step": []}
    for i in range(CALLS):
        leaf = write_sealed(
            folder,
            body("step", s.key_id, audit_head=None, outputs_digest=f"sha256:{i:064x}"),
            s,
        )
        run = write_sealed(folder, body("run", s.key_id, [leaf], audit_head=None), s)
        call = write_sealed(
            folder,
            body("call", s.key_id, [run], audit_head=None, inputs_digest=f"sha256:{i:064x}"),
            s,
            signed=False,
        )
        ids["step"].append(leaf)
        ids["run"].append(run)
        ids["call"].append(call)
    step = write_sealed(folder, body("step", s.key_id, ids["call"], audit_head=None), s)
    ids["fan"] = [step]
    root = write_sealed(folder, body("run", s.key_id, [step], audit_head=None), s)
    return folder, root, ids


@pytest.fixture
def fan(
    built: tuple[Path, str, dict[str, list[str]]], tmp_path: Path
) -> tuple[Path, str, dict[str, list[str]]]:
    folder, root, ids = built
    copy = tmp_path / "fan"
    shutil.copytree(folder, copy)
    return copy, root, ids


def _file(folder: Path, rid: str) -> Path:
    return folder / f"{rid.removeprefix('sha256:')}.json"


def _both(folder: Path, root: str) -> VerifyResult:
    """verify_receipt's result, asserted equal to the one-by-one walk's."""
    reader = FolderReader(folder)
    try:
        one = verify_tree(root, reader, [signer().public_key])
    finally:
        reader.close()
    got = verify_receipt(root, receipts_dir=folder, public_key=signer().public_key)
    assert got == one
    return got


def _swap_signature(folder: Path, rid: str, donor: str) -> None:
    head = _file(folder, rid).read_bytes().rsplit(b'"signature":', 1)[0]
    tail = _file(folder, donor).read_bytes().rsplit(b'"signature":', 1)[1]
    _file(folder, rid).write_bytes(head + b'"signature":' + tail)


def _change(folder: Path, rid: str, edit: Callable[[bytes], bytes]) -> None:
    path = _file(folder, rid)
    data = path.read_bytes()
    changed = edit(data)
    assert changed != data
    path.write_bytes(changed)


def test_the_intact_fan_verifies(fan: tuple[Path, str, dict[str, list[str]]]) -> None:
    folder, root, _ = fan
    got = _both(folder, root)
    assert (got.status, got.receipts, got.signed, got.amortized) == (
        "verified",
        3 * CALLS + 2,
        2 * CALLS + 2,
        CALLS,
    )


@pytest.mark.parametrize("which", [-1, -2, 0, CALLS // 2])
def test_a_bad_signature_is_named_wherever_its_batch_falls(
    fan: tuple[Path, str, dict[str, list[str]]], which: int
) -> None:
    """The last step is the last check of the walk's own last batch; the others fall in
    batches sent to a helper."""
    folder, root, ids = fan
    bad = ids["step"][which]
    _swap_signature(folder, bad, ids["run"][which])
    got = _both(folder, root)
    assert (got.status, got.reason, got.failing_receipt_id) == ("invalid", "signature_invalid", bad)


@pytest.mark.parametrize("which", [-1, 0, CALLS // 2])
@pytest.mark.parametrize(
    "edit",
    [
        lambda data: data.replace(b'"outcome":"completed"', b'"outcome":"completes"'),
        lambda data: data.replace(b'"skill":"hello"', b'"skill":"hellp"'),
        lambda data: data.replace(b'"inputs_digest":"sha256:0', b'"inputs_digest":"sha256:1'),
    ],
)
def test_a_changed_byte_in_an_amortized_call_is_named(
    fan: tuple[Path, str, dict[str, list[str]]], which: int, edit: Callable[[bytes], bytes]
) -> None:
    folder, root, ids = fan
    call = ids["call"][which]
    _change(folder, call, edit)
    got = _both(folder, root)
    assert (got.status, got.failing_receipt_id) == ("invalid", call)


@pytest.mark.parametrize("which", [0, CALLS - 1])
@pytest.mark.parametrize("new", [b"A", b"g", b"x", b"0"])
def test_a_changed_byte_in_a_child_digest_of_the_wide_step_is_named(
    fan: tuple[Path, str, dict[str, list[str]]], which: int, new: bytes
) -> None:
    folder, root, ids = fan
    step = ids["fan"][0]
    call = ids["call"][which]
    at = _file(folder, step).read_bytes().index(call.encode()) + len("sha256:") + 40

    def edit(data: bytes) -> bytes:
        return data[:at] + (new if data[at : at + 1] != new else b"1") + data[at + 1 :]

    _change(folder, step, edit)
    got = _both(folder, root)
    assert (got.status, got.failing_receipt_id) == ("invalid", step)
