"""A lost signing key is refused, not silently replaced; ``proctor key rotate`` replaces it on
purpose, keeps the old public key trusted and records the rotation in the audit log.

Every case drives the real CLI in subprocesses with a temporary ``PROCTOR_HOME``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: count
        tool: command.execute
        inputs: {argv: [PYTHON, count.py]}
"""

COUNTER = """import pathlib
p = pathlib.Path("counter.txt")
p.write_text(str(int(p.read_text()) + 1 if p.exists() else 1))
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    skill = root / "skills" / "noter"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: noter\ndescription: Count one run.\n---\nNo.\n")
    (skill / "run.yaml").write_text(RUN_YAML.replace("PYTHON", json.dumps(sys.executable)))
    (root / "count.py").write_text(COUNTER)
    (root / ".proctor").mkdir()
    return root


def proctor(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    base["PROCTOR_HOME"] = str(root.parent / "home")
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=root, env=base, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def run_sealed(root: Path) -> dict[str, Any]:
    out = proctor(root, "run", "noter", "--json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    assert doc["outcome"] == "completed"
    return doc


def key_path(root: Path) -> Path:
    return root.parent / "home" / "signing_key.pem"


def key_id(root: Path) -> str:
    out = proctor(root, "key", "show", "--json")
    assert out.returncode == 0, out.stderr
    return str(json.loads(out.stdout)["key_id"])


def audit_events(root: Path, name: str) -> list[dict[str, Any]]:
    path = root / ".proctor" / "audit.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in lines if e["event"] == name]


def runs_in_store(root: Path) -> int:
    out = proctor(root, "history", "--json")
    assert out.returncode == 0, out.stderr
    return len(json.loads(out.stdout)["runs"])


def test_a_deleted_key_is_refused_until_rotated_on_purpose(ws: Path) -> None:
    first = run_sealed(ws)
    old_id = key_id(ws)
    key_path(ws).unlink()

    out = proctor(ws, "run", "noter", "--json")
    assert out.returncode == 3, out.stderr
    assert "error[signing_key_missing]" in out.stderr and "proctor key rotate" in out.stderr
    assert old_id[:19] in out.stderr
    assert not key_path(ws).exists(), "a new key was created silently"
    assert (ws / "counter.txt").read_text() == "1", "the step ran"
    assert runs_in_store(ws) == 1

    shown = proctor(ws, "key", "show")
    assert shown.returncode == 3 and "error[signing_key_missing]" in shown.stderr
    assert not key_path(ws).exists()

    rotated = proctor(ws, "key", "rotate", "--json")
    assert rotated.returncode == 0, rotated.stderr
    doc = json.loads(rotated.stdout)
    assert doc["schema"] == "proctor.key_rotation.v1"
    assert doc["old_key_id"] is None and doc["old_key_trusted"] is None
    assert doc["unverifiable_key_ids"] == [old_id]
    assert doc["new_key_id"] == key_id(ws)
    (event,) = audit_events(ws, "key_rotated")
    assert event["old_key_id"] is None and event["new_key_id"] == doc["new_key_id"]

    run_sealed(ws)
    assert (ws / "counter.txt").read_text() == "2"
    # the first run's receipts are not trusted by the new key, and say so
    out = proctor(ws, "verify", first["receipt_id"])
    assert out.returncode == 4, out.stdout


def test_deleting_the_key_list_does_not_hide_the_receipts_signer(ws: Path) -> None:
    """keys.jsonl is a convenience: without it the signers are read from the run receipts."""
    run_sealed(ws)
    (ws / ".proctor" / "receipts" / "keys.jsonl").unlink()
    key_path(ws).unlink()
    out = proctor(ws, "run", "noter", "--json")
    assert out.returncode == 3 and "error[signing_key_missing]" in out.stderr, out.stderr
    assert not key_path(ws).exists()


def test_rotation_keeps_the_old_key_trusted_and_is_audited(ws: Path) -> None:
    before = run_sealed(ws)
    old_id = key_id(ws)
    out = proctor(ws, "key", "rotate", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["old_key_id"] == old_id and doc["new_key_id"] != old_id
    assert doc["unverifiable_key_ids"] == []
    trusted = ws.parent / "home" / "trusted_keys" / (old_id.removeprefix("sha256:") + ".pem")
    assert doc["old_key_trusted"] == "$PROCTOR_HOME/trusted_keys/" + trusted.name
    assert "PRIVATE" not in trusted.read_text()
    after = run_sealed(ws)

    for receipt in (before["receipt_id"], after["receipt_id"]):
        checked = proctor(ws, "verify", receipt, "--json")
        assert checked.returncode == 0, checked.stdout
        assert json.loads(checked.stdout)["status"] == "verified"
    (event,) = audit_events(ws, "key_rotated")
    assert event["old_key_id"] == old_id and event["new_key_id"] == doc["new_key_id"]
    assert event["old_key_trusted"] == doc["old_key_trusted"]
    chain = proctor(ws, "audit", "verify")
    assert chain.returncode == 0, chain.stdout + chain.stderr

    # the trust comes from the home's trusted_keys/: take the file away and it is gone
    trusted.unlink()
    assert proctor(ws, "verify", before["receipt_id"]).returncode == 4
    assert proctor(ws, "verify", after["receipt_id"]).returncode == 0


def test_rotate_refuses_a_named_key_file(ws: Path, tmp_path: Path) -> None:
    named = tmp_path / "named.pem"
    run_sealed(ws)
    key_path(ws).rename(named)
    out = proctor(ws, "key", "rotate", env={"PROCTOR_SIGNING_KEY": str(named)})
    assert out.returncode == 3 and "error[signing_key_named]" in out.stderr, out.stderr
    assert audit_events(ws, "key_rotated") == []
    assert not key_path(ws).exists()


def test_rotate_refuses_an_exposed_key_and_changes_nothing(ws: Path) -> None:
    run_sealed(ws)
    key_path(ws).chmod(0o644)
    before = key_path(ws).read_bytes()
    out = proctor(ws, "key", "rotate")
    assert out.returncode == 3 and "error[signing_key_exposed]" in out.stderr, out.stderr
    assert "move" in out.stderr
    assert key_path(ws).read_bytes() == before
    assert not (ws.parent / "home" / "trusted_keys").exists()
    assert audit_events(ws, "key_rotated") == []


def test_a_named_key_going_away_does_not_block_the_home_key(ws: Path, tmp_path: Path) -> None:
    """Receipts signed by a PROCTOR_SIGNING_KEY key never depended on the home key."""
    named = tmp_path / "named.pem"
    assert proctor(ws, "key", "show").returncode == 0
    key_path(ws).rename(named)
    out = proctor(ws, "run", "noter", "--json", env={"PROCTOR_SIGNING_KEY": str(named)})
    assert out.returncode == 0, out.stderr
    run_sealed(ws)  # no home key yet: it is created, nothing is refused
    assert key_path(ws).exists()
