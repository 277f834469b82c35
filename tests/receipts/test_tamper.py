"""Verification of receipt trees: each tamper is refused with its own reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from proctor.core.budget import MAX_TREE_DEPTH
from proctor.receipts.signing import PublicKey
from proctor.receipts.verify import VerifyResult, verify_tree
from proctor.receipts.writer import Ref
from proctor.runtime.records.folder_reader import FolderReader
from proctor.runtime.records.receipts import ReceiptStore
from proctor.runtime.records.verify_folder import verify_receipt
from tests.receipt_files import rewrite, stored, unpack
from tests.receipts.helpers import (
    body,
    other_signer,
    put,
    signer,
    small_tree,
    write_sealed,
)


def _file(folder: Path, rid: str) -> Path:
    return folder / f"{rid.removeprefix('sha256:')}.json"


def _get(folder: Path, rid: str) -> bytes:
    return stored(folder)[rid]


@pytest.fixture(params=["packed", "loose"])
def tree(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, dict[str, Ref]]:
    """The small tree as this version stores it (packs), and as earlier versions did (one file
    per receipt): every tamper below must be caught in both."""
    folder = tmp_path / "receipts"
    refs = small_tree(ReceiptStore(folder))
    if request.param == "loose":
        unpack(folder)
    return folder, refs


def _verify(folder: Path, rid: str, key: PublicKey | None = None) -> VerifyResult:
    return verify_receipt(rid, receipts_dir=folder, public_key=key or signer().public_key)


def test_intact_tree_verifies(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    result = _verify(folder, refs["root"].receipt_id)
    assert (result.status, result.reason) == ("verified", "ok")
    assert result.receipts == 8 == refs["root"].size
    assert result.signed == 5 and result.amortized == 3
    assert result.depth == 4 == refs["root"].height
    assert result.failing_receipt_id is None


def test_one_byte_flipped_in_a_signed_body(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    data = _get(folder, refs["b"].receipt_id)
    rewrite(folder, refs["b"].receipt_id, data.replace(b'"skill":"hello"', b'"skill":"hellp"', 1))
    result = _verify(folder, refs["root"].receipt_id)
    assert (result.status, result.reason) == ("invalid", "digest_mismatch")
    assert result.failing_receipt_id == refs["b"].receipt_id
    assert result.parent_id == refs["root"].receipt_id


def test_one_byte_flipped_in_an_amortized_call(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    data = bytearray(_get(folder, refs["b1"].receipt_id))
    at = data.index(b'"outcome":"failed"') + len(b'"outcome":"f')
    data[at] ^= 0x01  # 'a' -> '`': still JSON, the outcome changed
    rewrite(folder, refs["b1"].receipt_id, bytes(data))
    result = _verify(folder, refs["root"].receipt_id)
    assert result.status == "invalid"
    assert result.reason in {"malformed", "digest_mismatch"}
    assert result.failing_receipt_id == refs["b1"].receipt_id


@pytest.mark.parametrize("offset", [3, 40, 200, -10, -2])
def test_any_flipped_byte_fails(tree: tuple[Path, dict[str, Ref]], offset: int) -> None:
    folder, refs = tree
    data = bytearray(_get(folder, refs["a"].receipt_id))
    data[offset] ^= 0x04
    rewrite(folder, refs["a"].receipt_id, bytes(data))
    result = _verify(folder, refs["root"].receipt_id)
    assert result.status == "invalid"
    assert result.failing_receipt_id == refs["a"].receipt_id


def test_signature_swapped(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    a, b = _get(folder, refs["a"].receipt_id), _get(folder, refs["b"].receipt_id)
    sig_b = b.rsplit(b'"signature":', 1)[1]
    head_a = a.rsplit(b'"signature":', 1)[0]
    rewrite(folder, refs["a"].receipt_id, head_a + b'"signature":' + sig_b)
    result = _verify(folder, refs["root"].receipt_id)
    assert (result.status, result.reason) == ("invalid", "signature_invalid")
    assert result.failing_receipt_id == refs["a"].receipt_id


def test_signature_removed_from_a_step(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    head = _get(folder, refs["a"].receipt_id).rsplit(b'"signature":', 1)[0]
    rewrite(folder, refs["a"].receipt_id, head + b'"signature":null}\n')
    result = _verify(folder, refs["root"].receipt_id)
    assert (result.status, result.reason) == ("invalid", "signature_missing")


def test_child_removed(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    rewrite(folder, refs["c"].receipt_id, None)
    result = _verify(folder, refs["root"].receipt_id)
    assert (result.status, result.reason) == ("invalid", "child_missing")
    assert result.failing_receipt_id == refs["c"].receipt_id
    assert result.parent_id == refs["child"].receipt_id


def test_child_replaced_by_another_valid_receipt(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    rewrite(folder, refs["a1"].receipt_id, _get(folder, refs["b1"].receipt_id))
    result = _verify(folder, refs["root"].receipt_id)
    assert (result.status, result.reason) == ("invalid", "digest_mismatch")
    assert result.failing_receipt_id == refs["a1"].receipt_id


def test_child_committed_by_two_parents(tmp_path: Path) -> None:
    s = signer()
    leaf = write_sealed(tmp_path, body("call", s.key_id), s, signed=False)
    p1 = write_sealed(tmp_path, body("step", s.key_id, [leaf]), s)
    p2 = write_sealed(tmp_path, body("step", s.key_id, [leaf], step_id="s2"), s)
    root = write_sealed(tmp_path, body("run", s.key_id, [p1, p2]), s)
    result = _verify(tmp_path, root)
    assert (result.status, result.reason) == ("invalid", "committed_twice")
    assert (result.failing_receipt_id, result.parent_id) == (leaf, p2)


def test_child_listed_twice_by_one_parent(tmp_path: Path) -> None:
    s = signer()
    leaf = write_sealed(tmp_path, body("call", s.key_id), s, signed=False)
    root = write_sealed(tmp_path, body("step", s.key_id, [leaf, leaf]), s)
    assert _verify(tmp_path, root).reason == "committed_twice"


def test_cycle(tmp_path: Path) -> None:
    # A content-addressed cycle needs a file stored under an id that is not its digest: the
    # verifier names the cycle (the receipt commits its own ancestor) before anything else.
    s = signer()
    fake = "sha256:" + "7" * 64
    root = write_sealed(tmp_path, body("run", s.key_id, [fake]), s)
    from proctor.receipts.writer import seal

    _, data = seal(body("step", s.key_id, [root]), s)
    put(tmp_path, fake, data)
    result = _verify(tmp_path, root)
    assert (result.status, result.reason) == ("invalid", "cycle")
    assert (result.failing_receipt_id, result.parent_id) == (fake, root)


def test_self_commitment_is_a_cycle(tmp_path: Path) -> None:
    s = signer()
    fake = "sha256:" + "8" * 64
    from proctor.receipts.writer import seal

    _, data = seal(body("step", s.key_id, [fake]), s)
    put(tmp_path, fake, data)
    assert _verify(tmp_path, fake).reason == "cycle"


def test_two_bodies_under_one_id(tmp_path: Path) -> None:
    s = signer()
    leaf = write_sealed(tmp_path, body("call", s.key_id), s, signed=False)
    other = "sha256:" + "9" * 64
    parent = body("step", s.key_id)
    parent["children"] = [{"receipt_id": leaf, "body_digest": other}]
    root = write_sealed(tmp_path, parent, s)
    result = _verify(tmp_path, root)
    assert (result.reason, result.failing_receipt_id) == ("commitment_mismatch", leaf)


def test_unknown_key_is_unverified_not_verified(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    result = _verify(folder, refs["root"].receipt_id, key=other_signer().public_key)
    assert (result.status, result.reason) == ("unverified", "unknown_key")
    assert result.failing_receipt_id == refs["root"].receipt_id
    assert result.signed == 0 and result.unknown_key == 5 and result.receipts == 8


def test_unknown_key_does_not_hide_tampering(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    rewrite(folder, refs["b1"].receipt_id, None)
    result = _verify(folder, refs["root"].receipt_id, key=other_signer().public_key)
    assert (result.status, result.reason) == ("invalid", "child_missing")


def test_subtree_signed_by_another_key_is_unverified(tmp_path: Path) -> None:
    s, o = signer(), other_signer()
    leaf = write_sealed(tmp_path, body("step", o.key_id), o)
    root = write_sealed(tmp_path, body("run", s.key_id, [leaf]), s)
    result = _verify(tmp_path, root)
    assert (result.status, result.reason, result.failing_receipt_id) == (
        "unverified",
        "unknown_key",
        leaf,
    )
    assert result.key_ids == (s.key_id, o.key_id)


def test_unsigned_call_as_root_is_unverified(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    result = _verify(folder, refs["a1"].receipt_id)
    assert (result.status, result.reason) == ("unverified", "unsigned")


def test_missing_root_and_file_target(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    assert _verify(folder, "sha256:" + "0" * 64).reason == "not_found"
    target = _file(folder, refs["a"].receipt_id)
    target.write_bytes(_get(folder, refs["a"].receipt_id))  # a packed one: exported to a file
    by_file = verify_receipt(target, public_key=signer().public_key.pem().encode())
    assert by_file.status == "verified" and by_file.receipts == 5
    renamed = folder / "copy.json"
    shutil.copyfile(_file(folder, refs["a"].receipt_id), renamed)
    assert verify_receipt(renamed, public_key=signer().public_key).receipt_id == (
        refs["a"].receipt_id
    )


def _chain(folder: Path, levels: int) -> str:
    """A chain with its deepest receipt ``levels`` below the root (levels + 1 receipts)."""
    s = signer()
    kinds = ["run", "step", "call"]
    rid = write_sealed(folder, body("step", s.key_id), s)
    for level in range(levels - 1, -1, -1):
        kind = kinds[level % 3]
        rid = write_sealed(folder, body(kind, s.key_id, [rid]), s, signed=kind != "call")
    return rid


def test_max_depth_levels_pass_and_one_more_fails(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ok = _verify(tmp_path / "a", _chain(tmp_path / "a", MAX_TREE_DEPTH))
    assert (ok.status, ok.depth, ok.receipts) == ("verified", MAX_TREE_DEPTH, MAX_TREE_DEPTH + 1)
    deep = _verify(tmp_path / "b", _chain(tmp_path / "b", MAX_TREE_DEPTH + 1))
    assert (deep.status, deep.reason) == ("invalid", "too_deep")


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """One folder, two trees: run -> step -> 30,000 calls (30,002) and -> 30,001 (30,003)."""
    folder = tmp_path_factory.mktemp("wide")
    s = signer()
    calls = [
        write_sealed(
            folder, body("call", s.key_id, inputs_digest=f"sha256:{i:064x}"), s, signed=False
        )
        for i in range(30_001)
    ]
    step_ok = write_sealed(folder, body("step", s.key_id, calls[:30_000]), s)
    step_over = write_sealed(folder, body("step", s.key_id, calls, step_id="s2"), s)
    return (
        folder,
        write_sealed(folder, body("run", s.key_id, [step_ok]), s),
        write_sealed(folder, body("run", s.key_id, [step_over]), s),
    )


def _verify_at_most(folder: Path, rid: str, most: int) -> VerifyResult:
    reader = FolderReader(folder)
    try:
        return verify_tree(rid, reader, [signer().public_key], max_receipts=most)
    finally:
        reader.close()


def test_a_tree_at_its_bound_passes(wide: tuple[Path, str, str]) -> None:
    folder, ok, over = wide
    result = _verify_at_most(folder, ok, 30_002)
    assert (result.status, result.receipts) == ("verified", 30_002)
    # the old ceiling of 30,002 is gone: the wider tree verifies under the format's bound
    assert (_verify(folder, over).status, _verify(folder, over).receipts) == ("verified", 30_003)


def test_a_tree_past_its_bound_fails(wide: tuple[Path, str, str]) -> None:
    folder, _, over = wide
    result = _verify_at_most(folder, over, 30_002)
    assert (result.status, result.reason, result.receipts) == ("invalid", "too_many", 30_002)


def test_pure_walk_reads_lazily_and_only_once(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    reads: list[str] = []

    def load(rid: str) -> bytes | None:
        reads.append(rid)
        return stored(folder).get(rid)

    result = verify_tree(refs["root"].receipt_id, load, [signer().public_key])
    assert result.ok
    assert len(reads) == len(set(reads)) == 8
