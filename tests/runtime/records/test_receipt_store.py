"""The receipt store: atomic, write-once, and refusing folders that are not ours."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from proctor.errors import ReceiptInvalid, UsageError
from proctor.receipts.canonical import canonical
from proctor.receipts.writer import seal
from proctor.runtime.records.folder_reader import FolderReader
from proctor.runtime.records.receipt_packs import PACK_HEADER, PACK_HEADER_V2, PACKS_DIR
from proctor.runtime.records.receipts import (
    INDEX_NAME,
    ReceiptStore,
    default_receipt_dir,
    receipt_hex,
)
from proctor.runtime.records.verify_folder import verify_receipt
from tests.receipt_files import unpack
from tests.receipts.helpers import body, signer

RID = "sha256:" + "ab" * 32


def test_put_creates_store_with_index(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path / "r")
    assert store.get(RID) is None
    assert not (tmp_path / "r").exists()  # a read never creates the store
    store.put(RID, b"one\n", kind="call", outcome="completed")
    assert store.get(RID) == b"one\n"
    assert ReceiptStore(tmp_path / "r").get(RID) == b"one\n"  # found by another reader too
    lines = (tmp_path / "r" / INDEX_NAME).read_text().splitlines()
    assert json.loads(lines[0]) == {"schema": "proctor.receipt_index.v1"}
    entry = json.loads(lines[1])
    pack = entry["pack"]
    assert entry == {
        "receipt_id": RID, "kind": "call", "outcome": "completed",
        "pack": pack, "at": len(PACK_HEADER_V2), "size": 4,
    }  # fmt: skip
    assert list(store.index()) == [entry]
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [INDEX_NAME, PACKS_DIR]
    data = (tmp_path / "r" / PACKS_DIR / f"{pack}.pack").read_bytes()
    trailer = {"batch": {"receipts": 1, "sha256": hashlib.sha256(b"one\n").hexdigest(), "size": 4}}
    assert data == PACK_HEADER_V2 + b"one\n" + canonical(trailer) + b"\n"
    day = datetime.now(UTC).date().isoformat()  # the day's first pack, appended to
    assert pack == hashlib.sha256(f"proctor.receipt_pack.v2/{day}/0".encode()).hexdigest()[:32]
    store.put("sha256:" + "cd" * 32, b"two\n", kind="call", outcome="completed")
    assert (tmp_path / "r" / PACKS_DIR / f"{pack}.pack").read_bytes().startswith(data + b"two\n")


def test_same_bytes_are_a_no_op_and_different_bytes_are_refused(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path)
    store.put(RID, b"one\n", kind="call", outcome="completed")
    store.put(RID, b"one\n", kind="call", outcome="completed")
    with pytest.raises(ReceiptInvalid) as info:
        store.put(RID, b"two\n", kind="call", outcome="completed")
    assert info.value.code == "receipt_conflict"
    assert store.get(RID) == b"one\n"
    assert len((tmp_path / INDEX_NAME).read_text().splitlines()) == 2
    assert len(list((tmp_path / PACKS_DIR).iterdir())) == 1
    assert (tmp_path / PACKS_DIR).iterdir().__next__().read_bytes().count(b"one\n") == 1
    assert not list(tmp_path.rglob(".tmp-*"))


def test_a_store_that_read_a_receipt_refuses_different_bytes_for_it(tmp_path: Path) -> None:
    ReceiptStore(tmp_path).put(RID, b"one\n", kind="call", outcome="completed")
    other = ReceiptStore(tmp_path)
    assert other.get(RID) == b"one\n"
    with pytest.raises(ReceiptInvalid) as info:
        other.put(RID, b"two\n", kind="call", outcome="completed")
    assert info.value.code == "receipt_conflict"


def test_a_second_copy_from_another_writer_never_replaces_the_first(tmp_path: Path) -> None:
    # A writer that has not read the id does not search every pack for it (a search of the
    # whole index per batch); whatever it adds, every reader keeps getting the first copy.
    ReceiptStore(tmp_path).put(RID, b"one\n", kind="call", outcome="completed")
    ReceiptStore(tmp_path).put(RID, b"two\n", kind="call", outcome="completed")
    assert ReceiptStore(tmp_path).get(RID) == b"one\n"
    assert FolderReader(tmp_path)(RID) == b"one\n"


def test_a_receipt_must_be_one_line(tmp_path: Path) -> None:
    for bad in (b"no line feed", b"two\nlines\n"):
        with pytest.raises(ReceiptInvalid) as info:
            ReceiptStore(tmp_path).put(RID, bad, kind="call", outcome="completed")
        assert info.value.code == "malformed"
    assert ReceiptStore(tmp_path).get(RID) is None


def test_a_batch_stops_at_a_conflict_keeping_what_came_before(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path)
    first, clash, after = ("sha256:" + c * 64 for c in "123")
    store.put(clash, b"stored\n", kind="call", outcome="completed")
    batch = [
        (first, b"first\n", "call", "completed"),
        (first, b"first\n", "call", "completed"),  # the same receipt twice: written once
        (clash, b"other\n", "call", "completed"),
        (after, b"after\n", "step", "completed"),
    ]
    with pytest.raises(ReceiptInvalid) as info:
        store.put_many(batch)
    assert info.value.code == "receipt_conflict"
    assert store.get(first) == b"first\n"
    assert store.get(clash) == b"stored\n"
    assert store.get(after) is None
    assert [entry["receipt_id"] for entry in store.index()] == [clash, first]
    assert not list(tmp_path.rglob(".tmp-*"))


def test_a_pack_whose_index_lines_were_lost_is_still_read_by_digest(tmp_path: Path) -> None:
    # a crash after the pack got its name and before its index lines: the receipts are there,
    # and a reader without the index finds each by the digest of its body
    s = signer()
    rid, data = seal(body("step", s.key_id), s)
    store = ReceiptStore(tmp_path)
    store.put(rid, data, kind="step", outcome="completed")
    header = (tmp_path / INDEX_NAME).read_bytes().splitlines(keepends=True)[0]
    (tmp_path / INDEX_NAME).write_bytes(header)
    assert FolderReader(tmp_path)(rid) == data
    assert ReceiptStore(tmp_path).get(rid) == data


@pytest.mark.parametrize(
    "pack", ["../../elsewhere/" + "a" * 16, "A" * 32, "a" * 31, "a" * 33, 7, None]
)
def test_an_index_line_naming_another_place_is_never_followed(tmp_path: Path, pack: object) -> None:
    store_dir = tmp_path / "r"
    ReceiptStore(store_dir).put(RID, b"one\n", kind="call", outcome="completed")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / ("a" * 16 + ".pack")).write_bytes(PACK_HEADER + b"planted\n")
    other = "sha256:" + "cd" * 32
    line = {"receipt_id": other, "kind": "run", "outcome": "completed",
            "pack": pack, "at": len(PACK_HEADER), "size": 8}  # fmt: skip
    with (store_dir / INDEX_NAME).open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    assert ReceiptStore(store_dir).get(other) is None
    assert FolderReader(store_dir)(other) is None
    assert ReceiptStore(store_dir).get(RID) == b"one\n"


def test_a_store_of_loose_files_from_an_earlier_version_reads_and_grows(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path)
    store.put(RID, b"one\n", kind="call", outcome="completed")
    unpack(tmp_path)
    assert (tmp_path / f"{'ab' * 32}.json").read_bytes() == b"one\n"
    later = "sha256:" + "cd" * 32
    again = ReceiptStore(tmp_path)
    assert again.get(RID) == b"one\n"
    with pytest.raises(ReceiptInvalid):  # a loose file is stored: different bytes refused
        again.put(RID, b"two\n", kind="call", outcome="completed")
    again.put(later, b"two\n", kind="call", outcome="completed")
    assert ReceiptStore(tmp_path).get(later) == b"two\n"
    assert [e["receipt_id"] for e in ReceiptStore(tmp_path).index()] == [RID, later]


def test_foreign_folder_is_refused_by_reads_and_writes(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("{}")
    before = sorted(tmp_path.iterdir())
    store = ReceiptStore(tmp_path)
    for action in (
        lambda: store.get(RID),
        lambda: store.put(RID, b"x", kind="call", outcome="completed"),
        lambda: list(store.index()),
    ):
        with pytest.raises(ReceiptInvalid) as info:
            action()
        assert info.value.code == "receipt_store_foreign"
        assert "move it aside" in info.value.message.lower()
        assert str(tmp_path) not in info.value.message
    assert sorted(tmp_path.iterdir()) == before


def test_a_store_checked_while_absent_is_checked_again_once_made(tmp_path: Path) -> None:
    """A store not made yet passes the check and creates nothing; a folder that appears at its
    place after (a foreign one, a file, a link to a foreign folder) is refused by the next
    check of the same store object."""
    where = tmp_path / "receipts"
    store = ReceiptStore(where)
    store.check()
    assert not where.exists()
    where.mkdir()
    (where / "old.json").write_text("{}")
    with pytest.raises(ReceiptInvalid) as info:
        store.check()
    assert info.value.code == "receipt_store_foreign"
    other, linked = tmp_path / "other", tmp_path / "linked"
    other.mkdir()
    (other / "old.json").write_text("{}")
    linked_store = ReceiptStore(linked)
    linked_store.check()
    linked.symlink_to(other)
    with pytest.raises(ReceiptInvalid):
        linked_store.check()
    plain = tmp_path / "plain"
    plain_store = ReceiptStore(plain)
    plain_store.check()
    plain.write_text("not a folder")
    with pytest.raises(ReceiptInvalid):
        plain_store.check()


def test_foreign_index_is_refused(tmp_path: Path) -> None:
    (tmp_path / INDEX_NAME).write_text('{"schema":"something.else"}\n')
    with pytest.raises(ReceiptInvalid):
        ReceiptStore(tmp_path).get(RID)


def test_empty_existing_folder_becomes_a_store(tmp_path: Path) -> None:
    ReceiptStore(tmp_path).put(RID, b"x\n", kind="run", outcome="failed")
    assert (tmp_path / INDEX_NAME).is_file()


def test_default_store_verification_refuses_foreign_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "legacy.json").write_text("{}")
    monkeypatch.setenv("PROCTOR_RECEIPT_DIR", str(tmp_path))
    with pytest.raises(ReceiptInvalid):
        verify_receipt(RID, public_key=b"00" * 32)


def test_receipt_ids(tmp_path: Path) -> None:
    assert receipt_hex(RID) == "ab" * 32 == receipt_hex("AB" * 32)
    for bad in ("sha256:xyz", "../../etc/passwd", "sha256:" + "a" * 65):
        with pytest.raises(UsageError):
            receipt_hex(bad)


def test_default_dir(tmp_path: Path) -> None:
    (tmp_path / "ws" / ".proctor").mkdir(parents=True)
    (tmp_path / "ws" / "sub").mkdir()
    assert default_receipt_dir({}, tmp_path / "ws" / "sub") == (
        (tmp_path / "ws").resolve() / ".proctor" / "receipts"
    )
    assert default_receipt_dir({"PROCTOR_RECEIPT_DIR": "x"}, tmp_path) == Path("x")


def test_a_long_lived_store_keeps_a_bounded_number_of_packs_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.runtime.records import receipt_packs

    ids = ["sha256:" + f"{n:064x}" for n in range(receipt_packs._MAPPED_PACKS + 10)]
    writer = ReceiptStore(tmp_path)
    monkeypatch.setattr("proctor.runtime.records.receipts.PACK_LIMIT", 1)
    for n, rid in enumerate(ids):  # one batch, and a pack past its limit, each
        writer.put(rid, b"receipt %d\n" % n, kind="call", outcome="completed")
    reader = ReceiptStore(tmp_path)
    for _ in range(2):  # read all twice: evicted packs are mapped again
        for n, rid in enumerate(ids):
            assert reader.get(rid) == b"receipt %d\n" % n
    assert len(reader._shelf._maps) == receipt_packs._MAPPED_PACKS
    assert len(list((tmp_path / PACKS_DIR).iterdir())) == len(ids)


def test_a_pack_past_its_limit_takes_no_new_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("proctor.runtime.records.receipts.PACK_LIMIT", 64)
    s = signer()
    made = [seal(body("step", s.key_id, step_id=f"s{n}"), s) for n in range(5)]
    store = ReceiptStore(tmp_path)
    for rid, data in made:
        store.put(rid, data, kind="step", outcome="completed")
    packs = sorted((tmp_path / PACKS_DIR).iterdir())
    assert len(packs) == 5  # each batch passed the limit: the next went to a new pack
    for rid, data in made:
        assert ReceiptStore(tmp_path).get(rid) == data
        assert FolderReader(tmp_path)(rid) == data


def test_a_torn_tail_of_a_pack_is_never_read_and_the_next_batch_starts_on_a_new_line(
    tmp_path: Path,
) -> None:
    # a crash mid-append leaves part of a batch at the pack's end: half a receipt line, no
    # trailer. The next writer starts on a fresh line; every receipt written whole reads back
    # and verifies; the torn line is found by no id
    s = signer()
    first, torn, after = (seal(body("step", s.key_id, step_id=f"s{n}"), s) for n in range(3))
    ReceiptStore(tmp_path).put(first[0], first[1], kind="step", outcome="completed")
    (pack,) = (tmp_path / PACKS_DIR).iterdir()
    with pack.open("ab") as handle:
        handle.write(torn[1][: len(torn[1]) // 2])
    ReceiptStore(tmp_path).put(after[0], after[1], kind="step", outcome="completed")
    data = pack.read_bytes()
    assert b"\n" + after[1] in data
    for reader in (ReceiptStore(tmp_path).get, FolderReader(tmp_path)):
        assert reader(first[0]) == first[1]
        assert reader(after[0]) == after[1]
        assert reader(torn[0]) is None
    (header, *_) = data.splitlines(keepends=True)
    assert header == PACK_HEADER_V2
    result = verify_receipt(after[0], receipts_dir=tmp_path, public_key=s.public_key)
    assert result.status == "verified"


def test_a_failed_append_leaves_the_pack_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    from proctor.errors import StoreError

    store = ReceiptStore(tmp_path)
    store.put(RID, b"one\n", kind="call", outcome="completed")
    (pack,) = (tmp_path / PACKS_DIR).iterdir()
    before = pack.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdatasync", full)
    other = "sha256:" + "cd" * 32
    with pytest.raises(StoreError) as info:
        store.put(other, b"two\n", kind="call", outcome="completed")
    assert info.value.code == "receipt_store_io"
    assert pack.read_bytes() == before  # the unsynced batch was cut off
    assert ReceiptStore(tmp_path).get(other) is None


def test_a_store_of_v1_packs_from_an_earlier_version_reads_verifies_and_grows(
    tmp_path: Path,
) -> None:
    # a v1 pack (one batch, named by its bytes, no trailer) and its index lines, as the
    # previous version wrote them; new receipts go to a v2 pack beside it
    from proctor.runtime.records.receipt_packs import pack_bytes

    s = signer()
    call_id, call = seal(body("call", s.key_id), s, signed=False)
    step_id, step = seal(body("step", s.key_id, children=[call_id]), s)
    name, data, offsets = pack_bytes([call, step])
    (tmp_path / PACKS_DIR).mkdir()
    (tmp_path / PACKS_DIR / f"{name}.pack").write_bytes(data)
    lines = [json.dumps({"schema": "proctor.receipt_index.v1"}, separators=(",", ":"))]
    for rid, record, at, kind in ((call_id, call, offsets[0], "call"),
                                  (step_id, step, offsets[1], "step")):  # fmt: skip
        entry = {"receipt_id": rid, "kind": kind, "outcome": "completed", "pack": name,
                 "at": at, "size": len(record)}  # fmt: skip
        lines.append(json.dumps(entry, separators=(",", ":")))
    (tmp_path / INDEX_NAME).write_text("\n".join(lines) + "\n")
    assert verify_receipt(step_id, receipts_dir=tmp_path, public_key=s.public_key).status == (
        "verified"
    )
    assert ReceiptStore(tmp_path).get(call_id) == call
    new_id, new = seal(body("step", s.key_id, step_id="s9"), s)
    ReceiptStore(tmp_path).put(new_id, new, kind="step", outcome="completed")
    assert len(list((tmp_path / PACKS_DIR).iterdir())) == 2
    assert FolderReader(tmp_path)(new_id) == new
    assert FolderReader(tmp_path)(step_id) == step


def test_a_writer_keeps_a_bounded_number_of_receipt_places_and_still_reads_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.runtime.records import receipt_packs

    monkeypatch.setattr(receipt_packs, "_KNOWN_MAX", 8)
    store = ReceiptStore(tmp_path)
    ids = ["sha256:" + f"{n:064x}" for n in range(40)]
    for n, rid in enumerate(ids):
        store.put(rid, b"receipt %d\n" % n, kind="call", outcome="completed")
        assert len(store._shelf._known) <= 8
    for n, rid in enumerate(ids):  # the dropped ones are found again through the index
        assert store.get(rid) == b"receipt %d\n" % n
    with pytest.raises(ReceiptInvalid) as info:  # a recent one is still refused other bytes
        store.put(ids[-1], b"other\n", kind="call", outcome="completed")
    assert info.value.code == "receipt_conflict"


def test_a_batch_costs_one_sync_once_the_days_pack_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    store = ReceiptStore(tmp_path)
    store.put(RID, b"one\n", kind="call", outcome="completed")  # makes the store and the pack
    synced: list[str] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    items = [("sha256:" + f"{n:064x}", b"r %d\n" % n, "call", "completed") for n in range(100)]
    ReceiptStore(tmp_path).put_many(items)  # another writer: the same pack, appended to
    assert len(synced) == 1 and synced[0].endswith(".pack")
    for rid, data, _, _ in items:
        assert ReceiptStore(tmp_path).get(rid) == data


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import os

    real = os.pread
    reads: list[int] = []

    def pread(fd: int, n: int, at: int) -> bytes:
        reads.append(n)
        return real(fd, n, at)

    monkeypatch.setattr(os, "pread", pread)
    return reads


def test_a_writer_reads_neither_the_packs_header_nor_its_tail_again_after_its_own_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ReceiptStore(tmp_path)
    store.put(RID, b"one\n", kind="call", outcome="completed")
    reads = _reads(monkeypatch)
    other = "sha256:" + "cd" * 32
    store.put(other, b"two\n", kind="call", outcome="completed")
    assert reads == []  # the pack and the index are as this store left them
    ReceiptStore(tmp_path).put("sha256:" + "ef" * 32, b"three\n", kind="call", outcome="failed")
    assert sorted(reads) == [1, 1, len(PACK_HEADER_V2)]  # another store object reads them
    reads.clear()
    store.put("sha256:" + "12" * 32, b"four\n", kind="call", outcome="completed")
    assert sorted(reads) == [1, 1, len(PACK_HEADER_V2)]  # grown by another: read again
    (pack,) = (tmp_path / PACKS_DIR).iterdir()
    assert pack.read_bytes().count(b"\n") == 1 + 4 * 2  # header, four receipts and trailers
    assert [line["outcome"] for line in store.index()] == ["completed"] * 2 + ["failed"] + [
        "completed"
    ]


def test_a_pack_torn_or_replaced_by_another_writer_is_seen_by_a_long_lived_writer(
    tmp_path: Path,
) -> None:
    import os

    s = signer()
    made = [seal(body("step", s.key_id, step_id=f"s{n}"), s) for n in range(4)]
    store = ReceiptStore(tmp_path)
    store.put(made[0][0], made[0][1], kind="step", outcome="completed")
    (pack,) = (tmp_path / PACKS_DIR).iterdir()
    with pack.open("ab") as handle:  # another writer, killed mid-append
        handle.write(made[1][1][: len(made[1][1]) // 2])
    store.put(made[2][0], made[2][1], kind="step", outcome="completed")
    assert b"\n" + made[2][1] in pack.read_bytes()
    # the pack replaced by a file of the same size that is not a pack: never appended to
    size = pack.stat().st_size
    aside = tmp_path / "aside"
    aside.write_bytes(b"x" * size)
    os.replace(aside, pack)
    store.put(made[3][0], made[3][1], kind="step", outcome="completed")
    assert pack.read_bytes() == b"x" * size
    assert len(list((tmp_path / PACKS_DIR).iterdir())) == 2  # the next pack took the batch
    assert ReceiptStore(tmp_path).get(made[3][0]) == made[3][1]
    # the index torn by another writer: the next line starts on a fresh line
    with (tmp_path / INDEX_NAME).open("ab") as handle:
        handle.write(b'{"receipt_id":"sha256:')
    other = "sha256:" + "cd" * 32
    store.put(other, b"two\n", kind="call", outcome="completed")
    torn = b'{"receipt_id":"sha256:\n{"receipt_id":"' + other.encode()
    assert torn in (tmp_path / INDEX_NAME).read_bytes()
    assert other in [line["receipt_id"] for line in ReceiptStore(tmp_path).index()]
    assert ReceiptStore(tmp_path).get(other) == b"two\n"
