"""The verifier's pack reader reads exactly what the store's own reader reads, damaged packs too.

``PackWindow`` reads a receipt where the index names it, unchecked, and finds it by the digests
of the pack's bodies when the verifier asks again (what it read did not hold up): whatever bytes
a pack holds, each id must settle (read, then read again when its body's digest is not the id)
as the first line of the pack whose body digest it is (what ``records_of`` names), else as
:class:`~proctor.runtime.records.receipt_packs.PackShelf` (the store's reader, the window's
fallback) reads it, and ``proctor verify`` of a damaged folder must end as it ends over those
plain reads.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.errors import ReceiptInvalid
from proctor.receipts.model import Subject, parse_envelope
from proctor.receipts.parts import RECEIPT_ID
from proctor.receipts.verify import Loader, VerifyResult, verify_tree
from proctor.receipts.writer import ReceiptWriter
from proctor.runtime.records import pack_window
from proctor.runtime.records.folder_reader import FolderReader
from proctor.runtime.records.pack_window import PackWindow
from proctor.runtime.records.receipt_packs import (
    PACKS_DIR,
    PackShelf,
    pack_names,
    records_of,
)
from proctor.runtime.records.receipts import ReceiptStore
from proctor.runtime.records.signature_processes import SignatureProcesses
from tests.receipt_files import stored
from tests.receipts.helpers import PKG, T0, fixed_clock, other_signer, signer, small_tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A small tree in one pack (with its index): the folder and the root's id."""
    folder = tmp_path_factory.mktemp("tree")
    refs = small_tree(ReceiptStore(folder))
    return folder, refs["root"].receipt_id


def _shelf(folder: Path) -> tuple[Loader, PackShelf]:
    """The plain reads of a folder of one pack, as a loader: the pack's first line of that
    digest, else what the store's own reader finds."""
    shelf = PackShelf(folder)
    found = stored(folder)

    def load(rid: str) -> bytes | None:
        hit = found.get(rid)
        if hit is not None:
            return hit
        match = RECEIPT_ID.match(rid)
        return shelf.get(match[1]) if match else None

    return load, shelf


def _plain(folder: Path, root: str) -> VerifyResult:
    """The verification over the plain reads of the folder (no window, no fast path)."""
    load, shelf = _shelf(folder)
    try:
        return verify_tree(root, load, [signer().public_key])
    finally:
        shelf.close()


def _windowed(folder: Path, root: str) -> VerifyResult:
    load = FolderReader(folder)
    try:
        with SignatureProcesses(workers=0) as pool:
            return verify_tree(
                root, load, [signer().public_key], submit_batch=pool.submit, reload=load.again
            )
    finally:
        load.close()


def _holds(data: bytes, rid: str) -> bool:
    """Whether ``data`` is a receipt whose body's digest is ``rid``."""
    try:
        body = parse_envelope(data).body_bytes
    except ReceiptInvalid:
        return False
    return "sha256:" + hashlib.sha256(body).hexdigest() == rid


def _settled(load: FolderReader, rid: str) -> bytes | None:
    """What the verifier takes for ``rid``: what the reader gives when it holds up, else the
    reader's second look when that finds something (see verify_tree's ``reload``)."""
    data = load(rid)
    if data is None or _holds(data, rid):
        return data
    again = load.again(rid)
    return data if again is None else again


def _reads_agree(folder: Path, ids: list[str]) -> None:
    plain, shelf = _shelf(folder)
    load = FolderReader(folder)
    try:
        for rid in ids + sorted(stored(folder)):
            assert _settled(load, rid) == plain(rid), rid
    finally:
        load.close()
        shelf.close()


def test_an_intact_tree_reads_and_verifies_as_the_plain_reads_do(tree: tuple[Path, str]) -> None:
    folder, root = tree
    result = _windowed(folder, root)
    assert result.status == "verified"
    assert result == _plain(folder, root)
    _reads_agree(folder, [root])


def test_only_a_well_formed_id_is_read_from_the_last_pack(tree: tuple[Path, str]) -> None:
    folder, root = tree
    load = FolderReader(folder)
    try:
        data = load(root)
        assert data is not None and load(root[7:]) == data  # the bare hex, as before
        hex_id = root[7:]
        for wrong in (
            "sha256:" + hex_id.upper(),
            "sha256:" + hex_id + "\n",
            "sha256:" + hex_id[:-1],
            "SHA256:" + hex_id,
            "sha256:sha256:" + hex_id,
        ):
            assert load(wrong) is None, wrong
        assert load(root) == data  # still found after the refusals
    finally:
        load.close()


def test_held_finds_only_the_last_packs_receipts(tree: tuple[Path, str]) -> None:
    folder, root = tree
    window = PackWindow(folder)
    try:
        assert window.held(root) is None  # nothing found yet: nothing held
        data = window.get(root[7:])
        assert data is not None and window.held(root) == data
        # only a whole id, as the index spells it, is found
        assert window.held(root[7:]) is None and window.held(root.upper()) is None
        assert window.held("") is None
    finally:
        window.close()
    assert window.held(root) is None  # closed: nothing held


def test_an_index_id_that_is_not_lowercase_hex_names_no_receipt(
    tree: tuple[Path, str], tmp_path: Path
) -> None:
    """An index line whose id is spelled otherwise (upper case) is never learned: the reader
    finds nothing by that spelling, though the line names the root's very place."""
    source, root = tree
    folder = tmp_path / "copy"
    shutil.copytree(source, folder)
    index = folder / "index.jsonl"
    lines = index.read_bytes().splitlines(keepends=True)
    line = next(x for x in lines if root.encode() in x)
    upper = "sha256:" + root[7:].upper()
    index.write_bytes(b"".join([*lines, line.replace(root.encode(), upper.encode())]))
    load = FolderReader(folder)
    try:
        assert load(root) is not None  # the span of both lines is learned
        assert load(upper) is None and load(upper[7:]) is None
    finally:
        load.close()


def test_held_passes_what_it_does_not_hold_to_its_miss(tree: tuple[Path, str]) -> None:
    folder, root = tree
    asked: list[str] = []
    window = PackWindow(folder, miss=lambda rid: asked.append(rid) or b"elsewhere")
    try:
        assert window.held(root) == b"elsewhere" and asked == [root]
        data = window.get(root[7:])  # the window's own look-ups never ask its miss
        assert data is not None and data != b"elsewhere" and asked == [root]
        assert window.held(root) == data and asked == [root]
    finally:
        window.close()


_DAMAGE = st.lists(
    st.tuples(
        st.sampled_from(["flip", "line_feed", "cut", "drop"]),
        st.integers(min_value=0),
        st.integers(min_value=1, max_value=255),
    ),
    min_size=1,
    max_size=4,
)


def _damaged(data: bytes, damage: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for how, where, value in damage:
        if not out:
            break
        at = where % len(out)
        if how == "flip":
            out[at] ^= value
        elif how == "line_feed":
            out.insert(at, 0x0A)
        elif how == "cut":
            del out[at:]
        else:
            del out[at]
    return bytes(out)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(damage=_DAMAGE)
def test_a_damaged_pack_reads_and_verifies_as_the_plain_reads_do(
    tree: tuple[Path, str], damage: list[tuple[str, int, int]]
) -> None:
    folder, root = tree
    (pack,) = pack_names(folder)
    original = (folder / PACKS_DIR / f"{pack}.pack").read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "r"
        shutil.copytree(folder, copy)
        (copy / PACKS_DIR / f"{pack}.pack").write_bytes(_damaged(original, damage))
        ids = ["sha256:" + hex_id for hex_id, _, _ in records_of(original)]
        _reads_agree(copy, ids)
        windowed = _windowed(copy, root)
        assert windowed == _plain(copy, root)
        if windowed.status == "verified":  # only a change the tree does not read passes
            assert _windowed(copy, root) == _windowed(folder, root)


def test_a_pack_learned_in_pieces_finds_every_line_of_a_long_pack(tmp_path: Path) -> None:
    # more receipts than one read of a pack holds: lines cut by a piece's end are found whole
    store = ReceiptStore(tmp_path)
    roots = [small_tree(store)["root"].receipt_id]
    data = (tmp_path / PACKS_DIR / f"{pack_names(tmp_path)[0]}.pack").read_bytes()
    line = next(part for part in data.split(b"\n") if part.startswith(b'{"body":'))
    filler = line.replace(b'"ended_at":"2026', b'"ended_at":"2027', 1)
    with (tmp_path / PACKS_DIR / f"{pack_names(tmp_path)[0]}.pack").open("ab") as handle:
        for _ in range((1 << 19) // len(filler) + 2):
            handle.write(filler + b"\n")
    _reads_agree(tmp_path, roots)
    assert _windowed(tmp_path, roots[0]) == _plain(tmp_path, roots[0])


def test_a_receipt_past_the_block_last_read_or_appended_since_reads_whole(tmp_path: Path) -> None:
    # receipts far apart in one pack, and one appended after the pack was first read: each
    # reads as its own bytes, never a block's stale or short copy
    store = ReceiptStore(tmp_path)
    first = small_tree(store)["root"].receipt_id
    (pack,) = pack_names(tmp_path)
    path = tmp_path / PACKS_DIR / f"{pack}.pack"
    window = PackWindow(tmp_path)
    try:
        assert window.get(first[7:]) == stored(tmp_path)[first]
        with path.open("ab") as handle:
            handle.write(b"x" * (3 << 17) + b"\n")  # a line no receipt lies in
        later = small_tree(ReceiptStore(tmp_path), other_signer())["root"].receipt_id
        found = stored(tmp_path)
        assert window.get(later[7:]) == found[later]
        assert window.get(first[7:]) == found[first]
    finally:
        window.close()


def test_receipts_read_back_and_forth_across_blocks_read_whole(tmp_path: Path) -> None:
    # a pack several blocks long, read last line first, first line first, and in strides both
    # ways: a block starts a little before the receipt it is read for, so a receipt just before
    # a block, one cut by its end and one past it each read as their own bytes
    writer = ReceiptWriter(ReceiptStore(tmp_path, durable=False), signer(), clock=fixed_clock)
    for i in range(4 * pack_window._BLOCK // 700):  # a step receipt is some 900 bytes
        writer.step(Subject("s", PKG, "main", f"step{i}"), outcome="completed", started_at=T0)
    (pack,) = pack_names(tmp_path)
    assert (tmp_path / PACKS_DIR / f"{pack}.pack").stat().st_size > 4 * pack_window._BLOCK
    found = stored(tmp_path)
    ids = list(found)
    for order in (ids[::-1], ids, ids[::7] + ids[::-5], ids[1::3] + ids[::-2]):
        window = PackWindow(tmp_path)
        try:
            for rid in order:
                assert window.get(rid[7:]) == found[rid], rid
        finally:
            window.close()
