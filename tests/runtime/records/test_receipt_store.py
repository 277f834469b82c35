"""The receipt store: atomic, write-once, and refusing folders that are not ours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.errors import ReceiptInvalid, UsageError
from proctor.runtime.records.receipts import (
    INDEX_NAME,
    ReceiptStore,
    default_receipt_dir,
    receipt_hex,
)
from proctor.runtime.records.verify_folder import verify_receipt

RID = "sha256:" + "ab" * 32


def test_put_creates_store_with_index(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path / "r")
    assert store.get(RID) is None
    assert not (tmp_path / "r").exists()  # a read never creates the store
    store.put(RID, b"one\n", kind="call", outcome="completed")
    assert store.get(RID) == b"one\n"
    lines = (tmp_path / "r" / INDEX_NAME).read_text().splitlines()
    assert json.loads(lines[0]) == {"schema": "proctor.receipt_index.v1"}
    assert json.loads(lines[1]) == {"receipt_id": RID, "kind": "call", "outcome": "completed"}
    assert list(store.index()) == [json.loads(lines[1])]
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["ab" * 32 + ".json", INDEX_NAME]


def test_same_bytes_are_a_no_op_and_different_bytes_are_refused(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path)
    store.put(RID, b"one\n", kind="call", outcome="completed")
    store.put(RID, b"one\n", kind="call", outcome="completed")
    with pytest.raises(ReceiptInvalid) as info:
        ReceiptStore(tmp_path).put(RID, b"two\n", kind="call", outcome="completed")
    assert info.value.code == "receipt_conflict"
    assert store.get(RID) == b"one\n"
    assert len((tmp_path / INDEX_NAME).read_text().splitlines()) == 2
    assert not list(tmp_path.glob(".tmp-*"))


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
    assert not list(tmp_path.glob(".tmp-*"))


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


def test_foreign_index_is_refused(tmp_path: Path) -> None:
    (tmp_path / INDEX_NAME).write_text('{"schema":"something.else"}\n')
    with pytest.raises(ReceiptInvalid):
        ReceiptStore(tmp_path).get(RID)


def test_empty_existing_folder_becomes_a_store(tmp_path: Path) -> None:
    ReceiptStore(tmp_path).put(RID, b"x", kind="run", outcome="failed")
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
