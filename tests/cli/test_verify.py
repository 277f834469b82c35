"""``proctor verify`` and ``proctor key`` as a user runs them: real subprocesses, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.receipts.signing import parse_private_key_pem
from proctor.receipts.writer import Ref
from proctor.runtime.records.receipts import ReceiptStore
from tests.receipt_files import rewrite, stored
from tests.receipts.helpers import other_signer, small_tree


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def setup(tmp_path: Path) -> tuple[dict[str, str], Path, dict[str, Ref]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(tmp_path / "home")
    env["PROCTOR_RECEIPT_DIR"] = str(tmp_path / "ws" / "receipts")
    (tmp_path / "ws").mkdir()
    shown = _run(["key", "show", "--json"], env, tmp_path / "ws")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    key_file = tmp_path / "home" / "signing_key.pem"
    signer = parse_private_key_pem(key_file.read_bytes())
    assert doc["key_id"] == signer.key_id
    assert doc["path"] == "$PROCTOR_HOME/signing_key.pem"
    assert doc["created"] is True
    assert str(tmp_path) not in shown.stdout
    refs = small_tree(ReceiptStore(tmp_path / "ws" / "receipts"), signer)
    return env, tmp_path, refs


def test_verified_exit_0_with_json(setup: tuple[dict[str, str], Path, dict[str, Ref]]) -> None:
    env, tmp, refs = setup
    done = _run(["verify", refs["root"].receipt_id, "--json"], env, tmp / "ws")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "proctor.verify.v1"
    assert (doc["status"], doc["reason"], doc["counts"]["receipts"]) == ("verified", "ok", 8)
    human = _run(["verify", refs["root"].receipt_id[7:]], env, tmp / "ws")
    assert human.returncode == 0 and human.stdout.startswith("verified:")


def test_invalid_exit_1_names_the_receipt(
    setup: tuple[dict[str, str], Path, dict[str, Ref]],
) -> None:
    env, tmp, refs = setup
    rewrite(tmp / "ws" / "receipts", refs["b1"].receipt_id, None)
    done = _run(["verify", refs["root"].receipt_id, "--json"], env, tmp / "ws")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert (doc["status"], doc["reason"]) == ("invalid", "child_missing")
    assert doc["failing_receipt_id"] == refs["b1"].receipt_id
    human = _run(["verify", refs["root"].receipt_id], env, tmp / "ws")
    assert human.returncode == 1 and refs["b1"].receipt_id in human.stdout


def test_unknown_key_exit_4(setup: tuple[dict[str, str], Path, dict[str, Ref]]) -> None:
    env, tmp, refs = setup
    other = tmp / "other.pem"
    other.write_text(other_signer().public_key.pem())
    done = _run(["verify", refs["root"].receipt_id, "--json", "--key", str(other)], env, tmp)
    assert done.returncode == 4
    assert json.loads(done.stdout)["reason"] == "unknown_key"


def test_file_target_with_exported_key_and_no_workspace(
    setup: tuple[dict[str, str], Path, dict[str, Ref]],
) -> None:
    env, tmp, refs = setup
    exported = _run(["key", "export-public"], env, tmp)
    assert exported.returncode == 0 and exported.stdout.startswith("-----BEGIN PUBLIC KEY-----")
    (tmp / "auditor").mkdir()
    pub = tmp / "auditor" / "key.pem"
    pub.write_text(exported.stdout)
    bare = {k: v for k, v in env.items() if not k.startswith("PROCTOR_")}
    bare["PROCTOR_HOME"] = str(tmp / "empty-home")
    target = tmp / "ws" / "receipts" / f"{refs['root'].receipt_id[7:]}.json"
    target.write_bytes(stored(tmp / "ws" / "receipts")[refs["root"].receipt_id])  # exported
    done = _run(["verify", str(target), "--key", str(pub)], bare, tmp / "auditor")
    assert done.returncode == 0, done.stdout + done.stderr
    without_key = _run(["verify", str(target), "--json"], bare, tmp / "auditor")
    assert without_key.returncode == 4
    assert not (tmp / "empty-home").exists()  # verifying never creates a key


def test_foreign_store_is_refused(setup: tuple[dict[str, str], Path, dict[str, Ref]]) -> None:
    env, tmp, refs = setup
    legacy = tmp / "legacy"
    legacy.mkdir()
    (legacy / "x.json").write_text("{}")
    env = {**env, "PROCTOR_RECEIPT_DIR": str(legacy)}
    done = _run(["verify", refs["root"].receipt_id], env, tmp)
    assert done.returncode == 1
    assert "receipt_store_foreign" in done.stderr and "move it aside" in done.stderr.lower()


def test_exposed_key_is_refused_by_key_show(
    setup: tuple[dict[str, str], Path, dict[str, Ref]],
) -> None:
    env, tmp, _ = setup
    (tmp / "home" / "signing_key.pem").chmod(0o644)
    done = _run(["key", "show"], env, tmp)
    assert done.returncode == 3
    assert "chmod 600" in done.stderr and str(tmp) not in done.stderr
