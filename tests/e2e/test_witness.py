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
