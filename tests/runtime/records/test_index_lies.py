"""``proctor verify`` reads a pack's receipts where ``index.jsonl`` says: an index that lies.

The index is a finding aid, unsynced and writable by whoever can write the packs, so nothing it
says is trusted: a receipt read through it is checked against its id like any other, and when
what it names does not hold up the verifier finds the receipt by the digests of the packs'
bodies instead. Each lie below must end in the tree verifying from the packs' own bytes (when
they hold the receipt) or in a refusal naming the receipt, never in a changed receipt accepted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.receipts.verify import VerifyResult
from proctor.receipts.writer import Ref
from proctor.runtime.records.receipt_packs import PACKS_DIR, pack_names
from proctor.runtime.records.receipts import INDEX_NAME, ReceiptStore
from proctor.runtime.records.verify_folder import verify_receipt
from tests.receipts.helpers import signer, small_tree


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, dict[str, Ref]]:
    folder = tmp_path / "receipts"
    return folder, small_tree(ReceiptStore(folder))


def _verify(folder: Path, refs: dict[str, Ref]) -> VerifyResult:
    return verify_receipt(
        refs["root"].receipt_id, receipts_dir=folder, public_key=signer().public_key
    )


def _entries(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / INDEX_NAME).read_bytes().splitlines()[1:]]


def _write(folder: Path, entries: list[dict[str, object]]) -> None:
    head = (folder / INDEX_NAME).read_bytes().splitlines()[0]
    lines = [json.dumps(e, separators=(",", ":")).encode() for e in entries]
    (folder / INDEX_NAME).write_bytes(b"\n".join([head, *lines]) + b"\n")


def _entry(folder: Path, rid: str) -> dict[str, object]:
    return next(e for e in _entries(folder) if e["receipt_id"] == rid)


def _lie(folder: Path, rid: str, **fields: object) -> None:
    """Change what the index says of receipt ``rid`` (every line naming it)."""
    _write(folder, [{**e, **fields} if e["receipt_id"] == rid else e for e in _entries(folder)])


def _pack(folder: Path) -> Path:
    (name,) = pack_names(folder)
    return folder / PACKS_DIR / f"{name}.pack"


def _line(folder: Path, rid: str) -> bytes:
    entry = _entry(folder, rid)
    at, size = int(str(entry["at"])), int(str(entry["size"]))
    return _pack(folder).read_bytes()[at : at + size]


def _blank(folder: Path, rid: str) -> None:
    """Overwrite receipt ``rid``'s line in its pack with spaces (its line feed kept): the pack
    no longer holds it, every other byte where it was."""
    entry = _entry(folder, rid)
    at, size = int(str(entry["at"])), int(str(entry["size"]))
    data = bytearray(_pack(folder).read_bytes())
    data[at : at + size - 1] = b" " * (size - 1)
    _pack(folder).write_bytes(bytes(data))


def _append(folder: Path, line: bytes) -> int:
    """Append ``line`` to the pack (no index line names it); where it starts."""
    with _pack(folder).open("ab") as handle:
        at = handle.tell()
        handle.write(line)
    return at


def _changed(line: bytes) -> bytes:
    """The same receipt line with its outcome changed (its body, so its digest, differs)."""
    assert b'"outcome":"completed"' in line
    return line.replace(b'"outcome":"completed"', b'"outcome":"declined"', 1)


# -- lies the packs' own bytes correct: the tree verifies --------------------------------------


@pytest.mark.parametrize("liar", ["a1", "c", "child", "a", "root"])
def test_an_index_naming_another_receipts_bytes_still_verifies(
    tree: tuple[Path, dict[str, Ref]], liar: str
) -> None:
    folder, refs = tree
    other = _entry(folder, refs["b1"].receipt_id)
    _lie(folder, refs[liar].receipt_id, at=other["at"], size=other["size"])
    assert _verify(folder, refs).status == "verified"


def test_every_place_off_by_some_bytes_still_verifies(tree: tuple[Path, dict[str, Ref]]) -> None:
    # overlapping ranges: each receipt named from a few bytes into the line before it
    folder, refs = tree
    _write(
        folder,
        [
            {**e, "at": int(str(e["at"])) - 7, "size": int(str(e["size"])) + 3}
            for e in _entries(folder)
        ],
    )
    assert _verify(folder, refs).status == "verified"


def test_a_wrong_pack_and_a_wrong_id_still_verify(tree: tuple[Path, dict[str, Ref]]) -> None:
    folder, refs = tree
    # a pack of that name exists and holds the receipt changed: read, refused, looked for again
    decoy = "f" * 32
    line = _line(folder, refs["a1"].receipt_id)
    (folder / PACKS_DIR / f"{decoy}.pack").write_bytes(
        _pack(folder).read_bytes().replace(line, _changed(line))
    )
    _lie(folder, refs["a1"].receipt_id, pack=decoy)
    entries = _entries(folder)
    for e in entries:  # two ids swapped: each names the other's line
        if e["receipt_id"] == refs["b"].receipt_id:
            e["receipt_id"] = refs["a2"].receipt_id
        elif e["receipt_id"] == refs["a2"].receipt_id:
            e["receipt_id"] = refs["b"].receipt_id
    _write(folder, entries)
    assert _verify(folder, refs).status == "verified"


def test_a_size_past_any_receipt_is_never_read(tree: tuple[Path, dict[str, Ref]]) -> None:
    # 9,999,999,999 bytes named: a verifier that read (or made room for) what the index says
    # would fail under a 1 GiB address space; this one never reads past _MAX_SIZE
    folder, refs = tree
    _lie(folder, refs["c"].receipt_id, size=9_999_999_999)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from proctor.runtime.records.verify_folder import verify_receipt\n"
        "from tests.receipts.helpers import signer\n"
        "result = verify_receipt(sys.argv[1], receipts_dir=sys.argv[2],"
        " public_key=signer().public_key)\n"
        "print(result.status)\n"
    )
    root = refs["root"].receipt_id
    done = subprocess.run(
        [sys.executable, "-c", code, root, str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).parents[3],
    )
    assert (done.returncode, done.stdout.strip()) == (0, "verified"), done.stderr[-2000:]


def test_a_receipt_the_index_does_not_name_and_lines_it_does_not_cover_still_verify(
    tree: tuple[Path, dict[str, Ref]],
) -> None:
    folder, refs = tree
    rid = refs["child"].receipt_id
    _write(folder, [e for e in _entries(folder) if e["receipt_id"] != rid])
    _append(folder, b"not a receipt\n" + _changed(_line(folder, refs["a1"].receipt_id)))
    with (folder / INDEX_NAME).open("ab") as handle:
        handle.write(b'{"receipt_id":"sha256:' + rid[7:].encode() + b'","kind":"ru')  # torn
    assert _verify(folder, refs).status == "verified"


# -- lies over a receipt the packs no longer hold: refused, naming it ---------------------------


@pytest.mark.parametrize("name", ["a1", "child"])
def test_a_changed_receipt_the_index_points_at_is_refused(
    tree: tuple[Path, dict[str, Ref]], name: str
) -> None:
    # the attack the index invites: the receipt changed (an amortized call, an unsigned part of
    # the tree, or a run), the original blanked and the index pointed at the changed copy
    folder, refs = tree
    rid = refs[name].receipt_id
    changed = _changed(_line(folder, rid))
    _blank(folder, rid)
    _lie(folder, rid, at=_append(folder, changed), size=len(changed))
    result = _verify(folder, refs)
    assert (result.status, result.reason) == ("invalid", "digest_mismatch")
    assert result.failing_receipt_id == rid


def test_an_index_naming_a_receipt_no_pack_holds_is_refused(
    tree: tuple[Path, dict[str, Ref]],
) -> None:
    folder, refs = tree
    rid = refs["a1"].receipt_id
    _blank(folder, rid)
    other = _entry(folder, refs["b1"].receipt_id)
    _lie(folder, rid, at=other["at"], size=other["size"])  # a receipt, but another one
    result = _verify(folder, refs)
    assert (result.status, result.reason, result.failing_receipt_id) == (
        "invalid",
        "digest_mismatch",
        rid,
    )


def test_a_pack_cut_short_is_refused_at_the_receipt_it_cut(
    tree: tuple[Path, dict[str, Ref]],
) -> None:
    folder, refs = tree
    rid = refs["root"].receipt_id
    entry = _entry(folder, rid)
    data = _pack(folder).read_bytes()
    _pack(folder).write_bytes(data[: int(str(entry["at"])) + 40])
    result = _verify(folder, refs)
    assert (result.status, result.failing_receipt_id) == ("invalid", rid)


def test_a_pack_named_outside_the_packs_folder_is_never_opened(
    tree: tuple[Path, dict[str, Ref]],
) -> None:
    # the receipt moved to a file the index names by a path out of packs/: read from there,
    # the tree would verify; the name is never opened, so the receipt is missing
    folder, refs = tree
    rid = refs["a1"].receipt_id
    line = _line(folder, rid)
    outside = "../" + "e" * 29
    (folder / PACKS_DIR / f"{outside}.pack").write_bytes(_pack(folder).read_bytes())
    _blank(folder, rid)
    _lie(folder, rid, pack=outside)
    assert (folder / f"{'e' * 29}.pack").read_bytes().count(line) == 1
    result = _verify(folder, refs)
    assert (result.status, result.failing_receipt_id) == ("invalid", rid)
