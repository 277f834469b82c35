"""``proctor export RECEIPT --format dsse``: a sealed run as an in-toto statement in a DSSE
envelope, checked by an independent library (securesystemslib) with the exported public key."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from tests.e2e.conftest import Ws

WRITER = """minimum_proctor: 0.1.0
methods:
  go:
    description: Write two files and change one.
    steps:
      - id: a
        tool: fs.write
        inputs: {path: out/a.txt, content: first, create: true}
      - id: b
        tool: fs.write
        inputs: {path: out/b.txt, content: second, create: true}
      - id: read
        tool: fs.read
        inputs: {path: out/a.txt}
      - id: edit
        tool: fs.edit
        inputs:
          path: out/a.txt
          expected_digest: $steps.read.content_digest
          edits: [{old: first, new: changed}]
"""


def _run_writer(ws: Ws) -> dict[str, Any]:
    skill = ws.root / "skills" / "writer"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: writer\ndescription: Writes.\n---\nWrite.\n")
    (skill / "run.yaml").write_text(WRITER)
    r = ws.proctor("run", "writer", "--json")
    assert r.code == 0, r.stdout + r.stderr
    env: dict[str, Any] = r.json()
    return env


def _key(ws: Ws) -> SSlibKey:
    """The exported public key, as securesystemslib reads PEM, under proctor's key id."""
    pem = ws.proctor("key", "export-public")
    assert pem.code == 0, pem.stderr
    key_id = ws.proctor("key", "show", "--json").json()["key_id"]
    public = serialization.load_pem_public_key(pem.stdout.encode())
    return SSlibKey.from_crypto(public, keyid=key_id, scheme="ed25519")


def _verify(raw: bytes, key: SSlibKey) -> dict[str, Any]:
    envelope = Envelope.from_dict(json.loads(raw))
    accepted = envelope.verify([key], 1)
    assert set(accepted) == {key.keyid}
    statement: dict[str, Any] = json.loads(envelope.payload)
    return statement


def test_export_verifies_with_securesystemslib_and_names_what_the_run_changed(ws: Ws) -> None:
    env = _run_writer(ws)
    out = ws.root / "run.intoto.json"
    r = ws.proctor("export", env["receipt_id"], "--format", "dsse", "--out", str(out))
    assert r.code == 0, r.stdout + r.stderr
    raw = out.read_bytes()
    doc = json.loads(raw)
    assert doc["payloadType"] == "application/vnd.in-toto+json"
    statement = _verify(raw, _key(ws))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "urn:proctor:predicate:receipt-tree:v1"
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    files = ws.root / "out"
    assert subjects == {
        "file:out/a.txt": hashlib.sha256((files / "a.txt").read_bytes()).hexdigest(),
        "file:out/b.txt": hashlib.sha256((files / "b.txt").read_bytes()).hexdigest(),
        f"receipt:{env['receipt_id']}": env["receipt_id"].removeprefix("sha256:"),
    }
    predicate = statement["predicate"]
    assert predicate["receipt_id"] == env["receipt_id"]
    assert predicate["outcome"] == "completed"
    assert predicate["receipts"] == {"runs": 1, "steps": 4, "calls": 4}
    assert predicate["run_store"] == "held"
    assert predicate["key_id"] == doc["signatures"][0]["keyid"]
    # a run id names the same run; stdout carries the same envelope
    by_run = ws.proctor("export", env["run_id"], "--format", "dsse")
    assert by_run.code == 0 and by_run.stdout.encode() == raw


@pytest.mark.parametrize("where", ["payload", "sig"])
def test_a_flipped_byte_fails_verification(ws: Ws, where: str) -> None:
    env = _run_writer(ws)
    r = ws.proctor("export", env["receipt_id"], "--format", "dsse")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    key = _key(ws)
    _verify(r.stdout.encode(), key)  # untouched, it verifies
    if where == "payload":
        payload = bytearray(base64.b64decode(doc["payload"]))
        payload[len(payload) // 2] ^= 0x01
        doc["payload"] = base64.b64encode(bytes(payload)).decode()
    else:
        sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
        sig[5] ^= 0x01
        doc["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    with pytest.raises(VerificationError):
        Envelope.from_dict(doc).verify([key], 1)


def test_a_tampered_receipt_is_not_exported(ws: Ws) -> None:
    env = _run_writer(ws)
    packs = sorted((ws.root / ".proctor" / "receipts" / "packs").glob("*.pack"))
    assert packs
    data = bytearray(packs[-1].read_bytes())
    at = data.index(b'"outcome":"completed"')
    data[at + 11 : at + 20] = b"completex"
    packs[-1].chmod(0o644)
    packs[-1].write_bytes(bytes(data))
    out = ws.root / "never.json"
    r = ws.proctor("export", env["receipt_id"], "--format", "dsse", "--out", str(out))
    assert r.code != 0
    assert "export_unverified" in r.stderr
    assert not out.exists()


def test_unknown_target_and_format_are_refused(ws: Ws) -> None:
    _run_writer(ws)
    r = ws.proctor("export", "no-such-run", "--format", "dsse")
    assert r.code == 2 and "run_not_found" in r.stderr and not r.stdout
    r = ws.proctor("export", "sha256:" + "0" * 64, "--format", "dsse")
    assert r.code != 0 and "export_unverified" in r.stderr and not r.stdout
    r = ws.proctor("export", "x", "--format", "spdx")
    assert r.code == 2 and not r.stdout


def test_an_auditor_copy_without_the_run_store_states_the_receipt_alone(ws: Ws) -> None:
    env = _run_writer(ws)
    for name in ("runs.sqlite", "runs.sqlite-wal", "runs.sqlite-shm"):
        (ws.root / ".proctor" / name).unlink(missing_ok=True)
    assert not (ws.root / ".proctor" / "runs.sqlite").exists()
    r = ws.proctor("export", env["receipt_id"], "--format", "dsse")
    assert r.code == 0, r.stderr
    statement = json.loads(base64.b64decode(json.loads(r.stdout)["payload"]))
    assert [s["name"] for s in statement["subject"]] == [f"receipt:{env['receipt_id']}"]
    assert statement["predicate"]["run_store"] == "absent"
