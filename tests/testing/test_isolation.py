"""Each test runs in a workspace of its own: tests cannot see each other's state, the user's
home or environment, and the same test signs byte-identical receipts every time."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from proctor.receipts.signing import signer_from_seed
from proctor.testing.keys import fixture_public_key
from tests.receipt_files import stored
from tests.testing.support import ECHO, FETCH, package, run_one, workspace

WRITER = """
method: say
inputs: {text: from-a, path: shared.txt}
expect: {status: sealed, outcome: completed, files: {shared.txt: {content: from-a}}}
"""

READER = """
method: say
inputs: {text: from-b, path: mine.txt}
expect:
  status: sealed
  outcome: completed
  files:
    shared.txt: {exists: false}
"""


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home with a signing key, settings and a credential in the environment."""
    home = tmp_path / "user-home"
    home.mkdir()
    (home / "config.json").write_text('{"agent": {"provider": "x"}}')
    (home / "signing_key.pem").write_bytes(signer_from_seed(bytes(range(32))).private_pem())
    monkeypatch.setenv("PROCTOR_HOME", str(home))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SVC_TOKEN", "user-real-token-must-stay-home")
    monkeypatch.setenv("PROCTOR_ALLOW_NO_POLICIES", "1")
    return home


def test_two_tests_see_nothing_of_each_other(tmp_path: Path, user_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "echoer", ECHO, {"a": WRITER, "b": READER})
    first = run_one(folder, "a", keep=True)
    second = run_one(folder, "b", keep=True)
    assert first.status == second.status == "passed", (first.failures, second.failures)
    assert first.workspace is not None and second.workspace is not None
    assert first.workspace != second.workspace
    for result in (first, second):
        assert result.workspace is not None
        with sqlite3.connect(result.workspace / ".proctor" / "runs.sqlite") as db:
            runs = [row[0] for row in db.execute("select run_id from runs")]
        assert runs == [result.run_id]
        index = (result.workspace / ".proctor" / "receipts" / "index.jsonl").read_text()
        other = first if result is second else second
        assert str(other.receipt_id) not in index
    # the package's own workspace gained nothing but the test folders
    assert sorted(os.listdir(root / ".proctor")) == ["test"]


def test_nothing_of_the_users_home_or_environment_reaches_a_test(
    tmp_path: Path, user_home: Path
) -> None:
    before = _tree(user_home)
    root = workspace(tmp_path / "ws")
    (root / ".env").write_text("SVC_TOKEN=user-dotenv-token-must-stay-home\n")
    (root / "policies").mkdir()  # the user's own policies are not the test's either
    (root / "policies" / "broken.yaml").write_text("not: [a, policy")
    text = """
method: fetch
inputs: {url: "https://svc.example.com/a"}
expect: {status: needs_credential}
"""
    folder = package(root, "fetcher", FETCH.format(audience="https://svc.example.com"), {"t": text})
    result = run_one(folder, "t", keep=True)
    # the credential is in the user's environment and .env, yet the test does not see it
    assert result.status == "passed", ([f.to_json() for f in result.failures], result.error)
    assert _tree(user_home) == before
    assert result.workspace is not None
    assert not (result.workspace / ".env").exists()
    # and a run that seals signs with the public test key, not the user's key
    sealed = run_one(package(root, "echoer", ECHO, {"a": WRITER}), "a", keep=True)
    assert sealed.workspace is not None and sealed.receipt_id is not None
    receipt = stored(sealed.workspace / ".proctor" / "receipts")[sealed.receipt_id]
    assert fixture_public_key().key_id.encode() in receipt
    assert _tree(user_home) == before


def test_the_same_test_gives_byte_identical_receipts_twice(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "echoer", ECHO, {"a": WRITER})
    first = run_one(folder, "a", keep=True)
    second = run_one(folder, "a", keep=True)
    assert first.status == second.status == "passed"
    assert first.workspace is not None and second.workspace is not None
    assert first.receipt_id == second.receipt_id
    a = _tree(first.workspace / ".proctor" / "receipts")
    b = _tree(second.workspace / ".proctor" / "receipts")
    # the run sealed at once: one pack of its two calls, two steps and itself, the index, and
    # the signers this store has seen
    assert len(a) == 1 + 1 + 1, sorted(a)
    assert "keys.jsonl" in a
    assert len(stored(first.workspace / ".proctor" / "receipts")) == 2 * 2 + 1
    assert a == b


def test_a_workspace_is_removed_unless_kept(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "echoer", ECHO, {"a": WRITER})
    assert run_one(folder, "a").workspace is None
    assert os.listdir(root / ".proctor" / "test") == []


def test_a_test_cannot_read_its_own_expectations(tmp_path: Path) -> None:
    reader = """
minimum_proctor: 0.1.0
methods:
  peek:
    description: Read a path.
    inputs: {type: object, properties: {path: {type: string}}, required: [path]}
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.path}
"""
    text = """
method: peek
inputs: {path: skills/peeker/tests/t.yaml}
expect: {status: sealed, outcome: failed, steps: {read: {outcome: failed, code: not_found}}}
"""
    folder = package(workspace(tmp_path / "ws"), "peeker", reader, {"t": text})
    result = run_one(folder, "t")
    assert result.status == "passed", [f.to_json() for f in result.failures]
