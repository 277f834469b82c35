"""Segment receipts (a parent of more than SEGMENT_FANOUT children) and the walk of trees too
large for a set of every id: exact results through fingerprints and walks made again."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import ReceiptInvalid
from proctor.receipts.model import Subject, parse_envelope
from proctor.receipts.scan import scan_envelope
from proctor.receipts.seen import Fingerprints
from proctor.receipts.verify import VerifyResult, verify_tree
from proctor.receipts.writer import ChildList, ReceiptWriter, Ref
from proctor.runtime.records.folder_reader import FolderReader
from proctor.runtime.records.receipts import ReceiptStore
from tests.receipt_files import stored
from tests.receipts.helpers import PKG, T0, body, fixed_clock, signer, write_sealed

VERDICT = {"rule_id": "r", "code": "c", "enforcement": "warn"}


def _walk(folder: Path, root: str, **options: int) -> VerifyResult:
    reader = FolderReader(folder)
    try:
        return verify_tree(root, reader, [signer().public_key], **options)
    finally:
        reader.close()


def _run(folder: Path, steps: int, calls: int, fanout: int) -> Ref:
    w = ReceiptWriter(ReceiptStore(folder), signer(), clock=fixed_clock, batch=64)
    step_refs = ChildList(w, Subject("h", PKG, "m"), started_at=T0, ended_at=T0, fanout=fanout)
    for i in range(steps):
        sub = Subject("h", PKG, "m", f"s{i}")
        call_refs = ChildList(w, sub, started_at=T0, ended_at=T0, fanout=fanout)
        for j in range(calls):
            call_refs.add(
                w.call(
                    Subject("h", PKG, "m", f"s{i}", "echo"),
                    outcome="completed" if (i, j) != (1, 0) else "failed",
                    seal_reason=None if (i, j) != (1, 0) else "tool_failed",
                    started_at=T0,
                    inputs_digest=f"sha256:{i:032x}{j:032x}",
                )
            )
        step_refs.add(w.step(sub, outcome="completed", started_at=T0, children=call_refs.refs()))
    return w.run(
        Subject("h", PKG, "m"), outcome="completed", started_at=T0, children=step_refs.refs()
    )


def _kinds(folder: Path) -> dict[str, bytes]:
    return stored(folder)


def test_a_parent_of_at_most_fanout_children_commits_them_directly(tmp_path: Path) -> None:
    root = _run(tmp_path, 4, 4, fanout=4)
    receipts = _kinds(tmp_path)
    assert not any(b'"kind":"segment"' in data for data in receipts.values())
    assert root.size == 1 + 4 + 16


def test_more_children_than_the_fanout_go_through_segments_in_order(tmp_path: Path) -> None:
    root = _run(tmp_path, 10, 1, fanout=3)
    receipts = _kinds(tmp_path)
    segments = [parse_envelope(d) for d in receipts.values() if b'"kind":"segment"' in d]
    # 10 steps: segments of 3, 3, 3, 1 under two segments of the run (3 + 1), then the run
    assert len(segments) == 6
    result = _walk(tmp_path, root.receipt_id)
    assert (result.status, result.receipts) == ("verified", root.size)
    # reading the segments' children in order gives the steps in execution order
    order: list[str] = []

    def leaves(rid: str) -> None:
        env = parse_envelope(receipts[rid])
        if env.kind in ("run", "segment"):
            for child in env.children:
                leaves(child.receipt_id)
        else:
            order.append(env.body["subject"]["step_id"])

    leaves(root.receipt_id)
    assert order == [f"s{i}" for i in range(10)]
    for env in segments:  # unsigned, authenticated by the signed parent that commits them
        assert env.signature is None and env.body["verdicts"] == []
    for data in receipts.values():  # the fast route takes them
        if b'"kind":"segment"' in data:
            assert scan_envelope(data) is not None


def test_a_segment_outcome_says_whether_every_child_completed(tmp_path: Path) -> None:
    _run(tmp_path, 2, 5, fanout=2)
    outcomes = {
        (env.body["subject"]["step_id"], env.body["outcome"], env.body["seal_reason"])
        for env in (parse_envelope(d) for d in _kinds(tmp_path).values())
        if env.kind == "segment"
    }
    assert ("s1", "failed", "child_failed") in outcomes
    assert ("s0", "failed", "child_failed") not in outcomes


def test_a_byte_changed_in_a_segment_breaks_its_parents_commitment(tmp_path: Path) -> None:
    root = _run(tmp_path, 7, 1, fanout=2)
    from tests.receipt_files import rewrite

    receipts = _kinds(tmp_path)
    rid = next(r for r, d in receipts.items() if b'"kind":"segment"' in d)
    rewrite(tmp_path, rid, receipts[rid].replace(b"2026-01-02", b"2026-01-03", 1))
    result = _walk(tmp_path, root.receipt_id)
    assert (result.status, result.reason) == ("invalid", "digest_mismatch")
    assert result.failing_receipt_id == rid


def test_a_segment_must_commit_something_and_state_no_verdicts(tmp_path: Path) -> None:
    s = signer()
    leaf = write_sealed(tmp_path, body("call", s.key_id), s, signed=False)
    for bad in (
        body("segment", s.key_id, [], audit_head=None),
        body("segment", s.key_id, [leaf], audit_head=None, verdicts=[VERDICT]),
        body("segment", s.key_id, [leaf], audit_head=None, inputs_digest=PKG),
    ):
        from proctor.receipts.writer import seal

        _, data = seal(bad, s, signed=False)
        assert scan_envelope(data) is None
        with pytest.raises(ReceiptInvalid):
            parse_envelope(data)
    _, data = seal(body("segment", s.key_id, [leaf], audit_head=None), s, signed=False)
    assert scan_envelope(data) is not None and parse_envelope(data).kind == "segment"


def test_fingerprints_say_when_a_hash_comes_again_and_grow() -> None:
    prints = Fingerprints()
    ids = [hash(f"sha256:{n:064x}") for n in range(5000)]
    assert not any(prints.add(h) for h in ids)
    assert all(prints.add(h) for h in ids[::7])
    assert len(prints) == 5000


@pytest.mark.parametrize("small_seen", [1, 3, 1 << 15])
def test_large_tree_walks_are_exact_whatever_holds_the_ids(tmp_path: Path, small_seen: int) -> None:
    s = signer()
    leaves = [
        write_sealed(
            tmp_path, body("call", s.key_id, inputs_digest=f"sha256:{n:064x}"), s, signed=False
        )
        for n in range(12)
    ]
    ok = write_sealed(tmp_path, body("run", s.key_id, leaves), s)
    result = _walk(tmp_path, ok, small_seen=small_seen)
    assert (result.status, result.receipts) == ("verified", 13)
    # a leaf committed by two parents, far apart: named where a set of every id names it
    p1 = write_sealed(tmp_path, body("step", s.key_id, leaves[:8]), s)
    p2 = write_sealed(tmp_path, body("step", s.key_id, [*leaves[8:], leaves[5]], step_id="s2"), s)
    twice = write_sealed(tmp_path, body("run", s.key_id, [p1, p2]), s)
    result = _walk(tmp_path, twice, small_seen=small_seen)
    assert (result.status, result.reason) == ("invalid", "committed_twice")
    assert (result.failing_receipt_id, result.parent_id) == (leaves[5], p2)
    assert result.receipts == 1 + 1 + 8 + 1 + 4


def test_a_diamond_chain_stops_at_its_first_repeat(tmp_path: Path) -> None:
    # each level commits the one below twice: 2**40 paths, 41 receipts
    s = signer()
    rid = write_sealed(tmp_path, body("call", s.key_id), s, signed=False)
    for level in range(40):
        rid = write_sealed(tmp_path, body("step", s.key_id, [rid, rid], step_id=f"l{level}"), s)
    result = _walk(tmp_path, rid, small_seen=1)
    assert (result.status, result.reason) == ("invalid", "committed_twice")
    assert result.receipts == 41
