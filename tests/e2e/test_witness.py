"""Witnesses: seals sent to ``proctor witness serve`` at every seal catch a deleted
``.proctor/`` and a rewritten audit log from the witness's copies alone."""

from __future__ import annotations

import hashlib
import json
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import REPO, Ws

HELLO = str(REPO / "examples/hello-world")


@pytest.fixture
def witness(tmp_path: Path, ws: Ws) -> Iterator[tuple[str, str]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proctor",
            "witness",
            "serve",
            "--port",
            "0",
            "--dir",
            str(tmp_path),
        ],
        env=ws.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "the witness never said where it listens"
        url, key = proc.stdout.readline().split()
        yield url, key
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def _witnessed(ws: Ws, url: str, key: str) -> Ws:
    ws.env["PROCTOR_WITNESS_URLS"] = url
    ws.env["PROCTOR_WITNESS_KEYS"] = key
    for message in ("one", "two"):
        r = ws.proctor("run", HELLO, "-i", f"message={message}", "--json")
        assert r.code == 0, r.stdout + r.stderr
    return ws


def test_every_seal_reaches_the_witness_and_the_log_verifies(
    ws: Ws, witness: tuple[str, str]
) -> None:
    url, key = witness
    _witnessed(ws, url, key)
    from proctor.runtime.records.witness import workspace_id

    assert httpx.get(f"{url}/v1/claims", params={"workspace": "x"}).json() == {"entries": []}
    ours = workspace_id(ws.root.resolve())
    entries = httpx.get(f"{url}/v1/claims", params={"workspace": ours}).json()["entries"]
    assert [e["seq"] for e in entries] == [1, 2]
    assert {e["witness_key_id"] for e in entries} == {
        "sha256:" + hashlib.sha256(bytes.fromhex(key)).hexdigest()
    }
    runs = ws.proctor("history", "--json").json()["runs"]
    assert {e["claim"]["receipt_id"] for e in entries} == {r["receipt_id"] for r in runs}
    r = ws.proctor("audit", "verify", "--witnesses", "--json")
    assert r.code == 0, r.stdout + r.stderr
    assert r.json()["ok"] is True


def test_a_rewritten_log_is_caught_from_the_witness(ws: Ws, witness: tuple[str, str]) -> None:
    url, key = witness
    _witnessed(ws, url, key)
    log = ws.root / ".proctor" / "audit.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:3]))  # the second run's lines are gone; the chain holds
    r = ws.proctor("audit", "verify", "--witnesses")
    assert r.code == 1, r.stdout + r.stderr
    assert "witness at" in r.stdout


def test_a_deleted_proctor_folder_is_caught_from_the_witness(
    ws: Ws, witness: tuple[str, str]
) -> None:
    url, key = witness
    _witnessed(ws, url, key)
    shutil.rmtree(ws.root / ".proctor")
    (ws.root / ".proctor").mkdir()
    r = ws.proctor("audit", "verify", "--witnesses", "--json")
    assert r.code == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    assert sum("is gone" in note for note in doc["notes"]) == 2


def test_a_fresh_consistent_history_in_place_of_the_old_is_caught(
    ws: Ws, witness: tuple[str, str]
) -> None:
    url, key = witness
    _witnessed(ws, url, key)
    shutil.rmtree(ws.root / ".proctor")
    (ws.root / ".proctor").mkdir()
    again = ws.proctor("run", HELLO, "-i", "message=innocent", "--json")
    assert again.code == 0, again.stderr
    plain = ws.proctor("audit", "verify")
    assert plain.code == 0, plain.stdout  # locally, the new history is consistent
    r = ws.proctor("audit", "verify", "--witnesses", "--json")
    assert r.code == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    assert any("witness at" in b["source"] for b in doc["broken_anchors"])


def test_a_witness_not_trusted_is_refused(ws: Ws, witness: tuple[str, str]) -> None:
    url, key = witness
    _witnessed(ws, url, key)
    rfc8032_key = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    r = ws.proctor("audit", "verify", "--witnesses", env={"PROCTOR_WITNESS_KEYS": rfc8032_key})
    assert r.code != 0
    assert "witness_signature_invalid" in r.stderr


def _runs(ws: Ws) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = ws.proctor("history", "--json").json()["runs"]
    return runs


def test_verify_with_witnesses_passes_a_witnessed_receipt(ws: Ws, witness: tuple[str, str]) -> None:
    url, key = witness
    _witnessed(ws, url, key)
    receipt = str(_runs(ws)[0]["receipt_id"])
    r = ws.proctor("verify", receipt, "--witnesses", "--json")
    assert r.code == 0, r.stdout + r.stderr
    doc = r.json()
    assert doc["status"] == "verified"
    assert doc["witnesses"]["ok"] is True and doc["witnesses"]["holders"] == [url]
    every = ws.proctor("verify", "--witnesses", "--json")
    assert every.code == 0, every.stdout + every.stderr
    assert every.json()["witnesses"]["seals"] == 2


def test_verify_catches_a_receipt_the_witnesses_never_countersigned(
    ws: Ws, witness: tuple[str, str]
) -> None:
    url, key = witness
    unseen = ws.proctor("run", HELLO, "-i", "message=before", "--json")  # no witness yet
    assert unseen.code == 0, unseen.stderr
    receipt = unseen.json()["receipt_id"]
    _witnessed(ws, url, key)
    plain = ws.proctor("verify", receipt)
    assert plain.code == 0, plain.stdout  # locally the receipt is sound
    r = ws.proctor("verify", receipt, "--witnesses", "--json")
    assert r.code == 1, r.stdout + r.stderr
    doc = r.json()
    assert doc["status"] == "invalid" and doc["reason"] == "witness_unseen"
    assert doc["witnesses"]["holders"] == []


def test_verify_catches_a_tree_rewritten_and_signed_again(ws: Ws, witness: tuple[str, str]) -> None:
    import sqlite3

    from proctor.receipts.model import parse_envelope
    from proctor.receipts.writer import seal
    from proctor.runtime.home.keys import load_signer
    from proctor.runtime.records.receipts import ReceiptStore

    url, key = witness
    _witnessed(ws, url, key)
    run = _runs(ws)[0]
    old = str(run["receipt_id"])
    # whoever can write .proctor/ and read the home's key rewrites the run's receipt
    store = ReceiptStore(ws.root / ".proctor" / "receipts")
    data = store.get(old)
    assert data is not None
    body = dict(parse_envelope(data).body)
    body["outcome"] = "failed"
    body["seal_reason"] = "tool_failed"
    signer = load_signer({"PROCTOR_HOME": str(ws.home)}, create=False).signer
    new, raw = seal(body, signer)
    store.put(new, raw, kind="run", outcome="failed")
    db = sqlite3.connect(ws.root / ".proctor" / "runs.sqlite")
    try:
        db.execute("UPDATE runs SET receipt_id = ? WHERE receipt_id = ?", (new, old))
        db.commit()
    finally:
        db.close()
    plain = ws.proctor("verify", new)
    assert plain.code == 0, plain.stdout + plain.stderr  # signed by the trusted key: it verifies
    r = ws.proctor("verify", new, "--witnesses", "--json")
    assert r.code == 1, r.stdout + r.stderr
    doc = r.json()
    assert doc["reason"] == "witness_rewritten"
    assert old in doc["message"] and str(run["run_id"]) in doc["message"]


def test_a_deleted_proctor_folder_is_caught_by_verify_from_the_witnesses(
    ws: Ws, witness: tuple[str, str]
) -> None:
    url, key = witness
    _witnessed(ws, url, key)
    receipts = [str(r["receipt_id"]) for r in _runs(ws)]
    shutil.rmtree(ws.root / ".proctor")
    (ws.root / ".proctor").mkdir()
    r = ws.proctor("verify", "--witnesses", "--json")
    assert r.code == 1, r.stdout + r.stderr
    doc = r.json()
    assert doc["status"] == "invalid" and doc["reason"] == "witness_receipts_gone"
    assert doc["witnesses"]["missing"] == 2
    assert sorted(g["receipt_id"] for g in doc["witnesses"]["gone"]) == sorted(receipts)
    one = ws.proctor("verify", receipts[0], "--witnesses", "--json")
    assert one.code == 1, one.stdout + one.stderr
    assert one.json()["witnesses"]["holders"] == [url]  # held by the witness, gone here


def test_verify_with_witnesses_refuses_what_it_cannot_judge(
    ws: Ws, witness: tuple[str, str]
) -> None:
    url, key = witness
    _witnessed(ws, url, key)
    bare = ws.proctor("verify", "--json", env={"PROCTOR_WITNESS_URLS": ""})
    assert bare.code == 2
    unset = ws.proctor("verify", "--witnesses", env={"PROCTOR_WITNESS_URLS": ""})
    assert unset.code == 2 and "witness_not_configured" in unset.stderr
    tree = ws.proctor("history", str(_runs(ws)[0]["run_id"]), "--json").json()["receipts"]
    call = next(r for r in tree if r.get("kind") == "call")
    r = ws.proctor("verify", call["receipt_id"], "--witnesses")
    assert r.code == 2 and "witness_target_not_run" in r.stderr
