"""The cheaper shapes a seal is built from hold to the old rules: refs and subjects compare as
values (the ref's serial aside), a batched writer signs its held receipts at the flush into
the same bytes an unbatched one writes, and a store takes a fresh batch a batch at a time
exactly as it takes one item by item."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import ReceiptInvalid
from proctor.receipts.body_bytes import plain_body
from proctor.receipts.canonical import canonical, digest
from proctor.receipts.model import Subject, format_time
from proctor.receipts.writer import ReceiptWriter, Ref
from proctor.runtime.records.receipts import ReceiptStore
from tests.receipt_files import stored
from tests.receipts.helpers import PKG, T0, fixed_clock, signer

RID = "sha256:" + "1" * 64


def test_refs_and_subjects_are_values_not_tuples() -> None:
    a = Ref(RID, RID, "call", "completed", 1, 0, 7)
    assert a == Ref(RID, RID, "call", "completed", 1, 0)  # the serial takes no part
    assert hash(a) == hash(Ref(RID, RID, "call", "completed", 1, 0))
    assert a != (RID, RID, "call", "completed", 1, 0, 7)
    assert a != Ref(RID, RID, "call", "failed", 1, 0, 7)
    assert "serial" not in repr(a)
    with pytest.raises(AttributeError):
        a.kind = "step"  # type: ignore[misc]
    s = Subject("hello", PKG, "main")
    assert s == Subject("hello", PKG, "main") and s != ("hello", PKG, "main", None, None)
    assert s != Subject("hello", PKG, "main", "s1")
    assert s.to_json()["method"] == "main"


def _tree(folder: Path, batch: int | None) -> list[str]:
    writer = ReceiptWriter(ReceiptStore(folder), signer(), clock=fixed_clock, batch=batch)
    steps = []
    for i in range(5):
        call = writer.call(
            Subject("hello", PKG, "main", f"s{i}", "echo"),
            outcome="completed",
            started_at=T0,
            inputs_digest=digest({"i": i}),
        )
        steps.append(writer.step(Subject("hello", PKG, "main", f"s{i}"), outcome="completed",
                                 started_at=T0, children=[call]))  # fmt: skip
    root = writer.run(Subject("hello", PKG, "main"), outcome="completed", started_at=T0,
                      children=steps)  # fmt: skip
    return [root.receipt_id, *(s.receipt_id for s in steps)]


def test_a_batched_writer_signs_at_the_flush_into_the_same_bytes(tmp_path: Path) -> None:
    ids = _tree(tmp_path / "one", None)
    assert _tree(tmp_path / "held", 3) == ids
    assert _tree(tmp_path / "all", 1000) == ids
    once, held, whole = (stored(tmp_path / n) for n in ("one", "held", "all"))
    assert once == held == whole and len(once) == 11


def test_subjects_sharing_a_head_are_written_each_as_its_own() -> None:
    """The remembered head (skill, package, method) never lends its text to another subject."""
    common = {
        "outcome": "completed", "seal_reason": None, "started": format_time(T0),
        "ended": format_time(T0), "inputs_digest": None, "outputs_digest": None,
        "authority_digest": None, "policy_digest": None, "children": [], "own": range(0),
        "key_id": signer().key_id, "spend_micro_usd": None,
    }  # fmt: skip
    for subject in (
        Subject("hello", PKG, "main", "a", "echo"),
        Subject("hello", PKG, "main", "b", "echo"),
        Subject("hello", None, "main", "b", "echo"),
        Subject("hello", PKG, None, None, "echo"),
        Subject("hello", PKG, "main", "b", 'e"cho'),
    ):
        data = plain_body("call", subject, **common)
        if data is None:
            assert '"' in str(subject.tool)
            continue
        assert canonical(_body(subject, common)) == data


def _body(subject: Subject, f: dict[str, object]) -> dict[str, object]:
    return {
        "schema": "proctor.receipt.v1", "kind": "call", "subject": subject.to_json(),
        "inputs_digest": None, "outputs_digest": None, "outcome": "completed",
        "seal_reason": None, "authority_digest": None, "policy_digest": None, "verdicts": [],
        "started_at": f["started"], "ended_at": f["ended"], "children": [],
        "key_id": f["key_id"], "audit_head": None,
    }  # fmt: skip


def test_a_batch_the_fast_check_does_not_take_goes_item_by_item(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path)
    other = "sha256:" + "2" * 64
    store.put_many([(RID, b"one\n", "call", "completed"), (other, b"two\n", "call", "completed")])
    # the same bytes again with a new one: the known ones are skipped, the new one written
    third = "sha256:" + "3" * 64
    store.put_many([(RID, b"one\n", "call", "completed"), (third, b"three\n", "call", "completed")])
    fresh = ReceiptStore(tmp_path)
    assert [fresh.get(i) for i in (RID, other, third)] == [b"one\n", b"two\n", b"three\n"]
    # two lines in one record, other bytes under a stored id: refused as before
    with pytest.raises(ReceiptInvalid) as info:
        store.put_many([("sha256:" + "4" * 64, b"a\nb\n", "call", "completed")])
    assert info.value.code == "malformed"
    with pytest.raises(ReceiptInvalid) as info:
        store.put_many([(other, b"changed\n", "call", "completed")])
    assert info.value.code == "receipt_conflict"
    lines = (tmp_path / "index.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 3  # header, then one line per receipt written
