"""kill -9 inside ``proctor key rotate``: no receipt ever loses its trusted key, and no key
changes without its ``key_rotated`` audit line.

Two starting points: a workspace whose run sealed with the home key (the rotation retires that
key and keeps it trusted), and one whose key was deleted (``signing_key_missing``; the rotation
makes a new key). For every kill point the rotation passes, the harness kills it there, then
checks, and then does what a careful person does: rotates again, runs again, verifies.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.crash.harness import CASES, Outcome, make, proctor

KEY = Path(".home") / "signing_key.pem"


def _sealed_run(root: Path) -> str:
    out = proctor(root, ["run", "sealer", "--json"])
    doc: dict[str, Any] = json.loads(out.stdout)
    assert doc["outcome"] == "completed", out.stderr
    return str(doc["receipt_id"])


def _prepare(root: Path, key_lost: bool) -> str:
    make(root, CASES["crashy"])
    receipt = _sealed_run(root)
    if key_lost:
        (root / KEY).unlink()
    return receipt


def _rotations(root: Path) -> list[dict[str, Any]]:
    path = root / ".proctor" / "audit.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e["event"] == "key_rotated"]


def _key_bytes(root: Path) -> bytes | None:
    return (root / KEY).read_bytes() if (root / KEY).exists() else None


def rotation_scenarios(work: Path) -> list[Outcome]:
    """Every kill point of a rotation, with the old key present and with it lost."""
    outcomes: list[Outcome] = []
    for key_lost in (False, True):
        clean = work / f"clean-{key_lost}"
        _prepare(clean, key_lost)
        trace = work / "rotate.trace"
        trace.unlink(missing_ok=True)
        out = proctor(clean, ["key", "rotate"], env={"PROCTOR_TEST_TRACE": str(trace)})
        assert out.returncode == 0, out.stderr
        points = trace.read_text().split()
        shutil.rmtree(clean)
        for n, point in enumerate(points):
            root = work / f"r{key_lost}-{n}"
            outcomes.append(_one(root, key_lost, point))
            shutil.rmtree(root, ignore_errors=True)
    return outcomes


def _one(root: Path, key_lost: bool, point: str) -> Outcome:
    name = f"rotate ({'key lost' if key_lost else 'key present'}): {point}"
    outcome = Outcome(name, "killed")
    bad = outcome.violations
    receipt = _prepare(root, key_lost)
    before = _key_bytes(root)
    out = proctor(root, ["key", "rotate"], env={"PROCTOR_TEST_KILL_AT": point})
    if out.returncode != -9:
        bad.append(f"{name}: rotate was not killed (rc {out.returncode})")
    if _key_bytes(root) != before and not _rotations(root):
        bad.append(f"{name}: the key changed with no key_rotated audit line")
    if not key_lost and proctor(root, ["verify", receipt]).returncode != 0:
        bad.append(f"{name}: the old receipt lost its trusted key")
    # the careful person: rotate again, run, verify both receipts
    again = proctor(root, ["key", "rotate"])
    if again.returncode != 0:
        bad.append(f"{name}: rotating again failed: {again.stderr.strip()}")
        return outcome
    fresh = _sealed_run(root)
    outcome.final_status = "rotated, sealed/completed"
    if proctor(root, ["verify", fresh]).returncode != 0:
        bad.append(f"{name}: the new receipt does not verify")
    old = proctor(root, ["verify", receipt]).returncode
    if old != (4 if key_lost else 0):
        bad.append(f"{name}: the old receipt verifies with rc {old}")
    chain = proctor(root, ["audit", "verify"])
    if chain.returncode != 0:
        bad.append(f"{name}: the audit log does not verify: {chain.stdout.strip()}")
    return outcome
