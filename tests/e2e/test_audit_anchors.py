"""The audit log is anchored: cutting, emptying or rewriting it is named, by ``proctor audit
verify`` and by ``proctor check``, with the anchor it breaks and the line.

Each attack is made as an attacker with write access to the log would make it; the rewrite
removes one run's lines and chains the rest again with correct ``prev`` digests (the
re-chainer is below), so the hash chain alone cannot see it and only the anchors do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.records.audit import GENESIS, line_digest, verify_chain
from tests.e2e.conftest import REPO, Result, Ws


def _runs(ws: Ws, count: int) -> list[dict[str, Any]]:
    out = []
    for n in range(count):
        r = ws.proctor("run", str(REPO / "examples/hello-world"), "-i", f"message=m{n}", "--json")
        assert r.code == 0, r.stderr
        out.append(r.json())
    return out


def _log(ws: Ws) -> Path:
    return ws.root / ".proctor" / "audit.jsonl"


def _records(ws: Ws) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _log(ws).read_bytes().splitlines()]


def rechain(lines: list[bytes]) -> list[bytes]:
    """The attacker's tool: give every line the ``prev`` of the line now before it, keeping
    each record's fields and their order, so the chain verifies from line 1 again."""
    out: list[bytes] = []
    prev = GENESIS
    for line in lines:
        record = json.loads(line)
        record["prev"] = prev
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
        out.append(text)
        prev = line_digest(text)
    return out


def _verify(ws: Ws, *extra: str) -> tuple[Result, dict[str, Any]]:
    r = ws.proctor("audit", "verify", "--json", *extra)
    return r, json.loads(r.stdout) if r.stdout.strip() else {}


def _check(ws: Ws) -> tuple[Result, dict[str, Any]]:
    r = ws.proctor("check", "--json")
    doc = json.loads(r.stdout)
    (phase,) = [p for p in doc["phases"] if p["phase"] == "records"]
    (check,) = [c for c in phase["checks"] if c["name"] == "audit_log"]
    return r, check


def test_an_intact_log_holds_every_anchor(ws: Ws) -> None:
    ws.add_example("hello-world")  # so that proctor check has a skill to examine and passes
    runs = _runs(ws, 3)
    r, report = _verify(ws)
    assert r.code == 0, r.stdout + r.stderr
    # one anchor per run receipt, plus the run store's newest
    assert report["ok"] is True and report["anchors"] == 4
    sealed = [e for e in _records(ws) if e["event"] == "run_sealed"]
    assert [e["receipt_id"] for e in sealed] == [run["receipt_id"] for run in runs]
    # the receipt commits the head before its own run_sealed line (which names the receipt)
    for event in sealed:
        assert event["audit_head"]["lines"] == _records(ws).index(event)
    plain = ws.proctor("audit", "verify")
    assert plain.code == 0 and "4 anchors hold" in plain.stdout
    c, check = _check(ws)
    assert c.code == 0 and check["passed"] is True, check


@pytest.mark.parametrize("cut", [1, 4], ids=["run_sealed_line", "last_run"])
def test_a_cut_tail_is_named(ws: Ws, cut: int) -> None:
    _runs(ws, 3)
    lines = _log(ws).read_bytes().splitlines(keepends=True)
    total = len(lines)
    _log(ws).write_bytes(b"".join(lines[:-cut]))
    assert verify_chain(_log(ws)).ok  # what is left still chains: only an anchor sees the cut
    r, report = _verify(ws)
    assert r.code == 1
    assert report["ok"] is False and report["first_bad_line"] == total - cut + 1
    assert f"lines but the log has {total - cut}" in report["reason"]
    # the store's anchor, taken after the last run_sealed line, covers every line
    (kept,) = [b for b in report["broken_anchors"] if "run store" in b["source"]]
    assert kept["lines"] == total and kept["problem"] == "cut"
    human = ws.proctor("audit", "verify")
    assert human.code == 1 and f"broken at line {total - cut + 1}" in human.stdout
    c, check = _check(ws)
    assert c.code == 1 and check["passed"] is False
    assert any("cut from it" in f["message"] for f in check["findings"])
    assert all(f["line"] == total - cut + 1 for f in check["findings"] if "cut" in f["code"])


def test_an_emptied_log_is_named(ws: Ws) -> None:
    runs = _runs(ws, 2)
    _log(ws).write_bytes(b"")
    r, report = _verify(ws)
    assert r.code == 1 and report["first_bad_line"] == 1
    assert runs[0]["receipt_id"][:19] in report["reason"]
    assert "but the log has 0" in report["reason"]
    c, check = _check(ws)
    assert c.code == 1 and check["passed"] is False
    # a deleted log is named as well, not taken for a workspace that never ran
    _log(ws).unlink()
    r, report = _verify(ws)
    assert r.code == 1 and "the audit log is missing" in report["reason"]
    c, check = _check(ws)
    assert c.code == 1 and check["passed"] is False


def test_a_rechained_history_without_one_run_is_named(ws: Ws) -> None:
    runs = _runs(ws, 3)
    victim = runs[1]["run_id"]
    lines = _log(ws).read_bytes().splitlines()
    kept = [line for line in lines if json.loads(line)["run_id"] != victim]
    first_gone = next(i for i, line in enumerate(lines, 1) if json.loads(line)["run_id"] == victim)
    _log(ws).write_bytes(b"".join(line + b"\n" for line in rechain(kept)))
    assert verify_chain(_log(ws)).ok  # the chain alone is fooled
    r, report = _verify(ws)
    assert r.code == 1
    # the first run's anchor still holds; the removed run's own receipt is the first to break
    broken = report["broken_anchors"]
    assert broken[0]["problem"] == "rewritten"
    assert runs[1]["receipt_id"][:19] in broken[0]["source"]
    assert report["first_bad_line"] == broken[0]["line"]
    # named as a range: after the last line an intact anchor (the first run's receipt, which
    # commits the lines before its run_sealed) vouches for, up to the broken anchor's line
    assert f"lines after {first_gone - 2} (intact as the receipt" in report["reason"]
    assert runs[0]["receipt_id"][:19] in report["reason"]
    assert {b["problem"] for b in broken[1:]} <= {"rewritten", "cut"}
    c, check = _check(ws)
    assert c.code == 1 and check["passed"] is False
    assert any(runs[1]["receipt_id"][:19] in f["message"] for f in check["findings"])


def test_an_auditors_copy_of_the_receipts_names_a_cut_the_workspace_hid(
    ws: Ws, tmp_path: Path
) -> None:
    _runs(ws, 2)
    copy = tmp_path / "auditor"
    shutil.copytree(ws.root / ".proctor" / "receipts", copy)
    lines = _log(ws).read_bytes().splitlines(keepends=True)
    # the attacker cuts the last run and removes every local anchor
    _log(ws).write_bytes(b"".join(lines[:4]))
    shutil.rmtree(ws.root / ".proctor" / "receipts")
    for name in ("runs.sqlite", "runs.sqlite-wal", "runs.sqlite-shm"):
        (ws.root / ".proctor" / name).unlink(missing_ok=True)
    r, report = _verify(ws)
    # the log's own run_started lines still say a run store existed (store_missing)
    assert r.code == 1 and report["reason"].startswith("store_missing:")
    r, report = _verify(ws, "--receipts-dir", str(copy))
    assert r.code == 1 and "but the log has 4" in report["reason"]
    # the same check works on a copy of the log outside any workspace
    elsewhere = tmp_path / "log-copy.jsonl"
    shutil.copy(_log(ws), elsewhere)
    r = ws.proctor("audit", "verify", str(elsewhere), "--receipts-dir", str(copy))
    assert r.code == 1 and "broken at line 5" in r.stdout
