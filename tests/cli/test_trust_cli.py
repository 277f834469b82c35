"""A cloned repository's guard module never runs before a person trusts it (``proctor trust``).

The repository's ``proctor.toml`` names ``guards.py``, which writes a marker file outside the
workspace when it is imported: that file's absence proves the module never ran.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cli.inprocess import enter_workspace, run_main

REPO = Path(__file__).resolve().parents[2]

GUARD = """\
import pathlib
pathlib.Path({marker!r}).write_text("imported {version}")
from proctor.policy import register_guard


@register_guard("team_guard")
def team_guard(ctx):
    return None
"""

RULE = """\
id: team
rules:
  - id: team.guard
    description: the team's own guard
    guard: team_guard
    enforcement: block
    on_error: fail_closed
    tools: [echo]
"""


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository as cloned: skills, a policy naming the guard, the guard module."""
    root = tmp_path / "clone"
    (root / ".git").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "hello-world", root / "skills" / "hello-world")
    (root / "proctor.toml").write_text('[policy]\nguards = "guards.py"\n')
    (root / "guards.py").write_text(GUARD.format(marker=str(tmp_path / "marker"), version=1))
    (root / "policies").mkdir()
    (root / "policies" / "team.yaml").write_text(RULE)
    enter_workspace(monkeypatch, root, tmp_path / "home")
    return root


def _marker(root: Path) -> Path:
    return root.parent / "marker"


def _audit(root: Path, event: str) -> list[dict[str, object]]:
    path = root / ".proctor" / "audit.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if line["event"] == event]


def _run(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    _code, out, _err = run_main(capsys, "run", "hello-world", "-i", "message=hi", "--json")
    doc: dict[str, object] = json.loads(out)
    return doc


def test_no_command_imports_the_guard_before_trust(
    clone: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(capsys, "check", "--json")
    assert code == 1
    assert "guards_untrusted" in out
    assert run_main(capsys, "skill", "list", "--json")[0] == 0
    doc = _run(capsys)
    assert doc["outcome"] == "blocked"
    assert isinstance(doc["refusal"], dict) and doc["refusal"]["code"] == "guards_untrusted"
    code, out, _ = run_main(capsys, "test", "skills/hello-world", "--json")
    assert code == 0, out  # the test's own workspace never holds the repository's config
    code, out, _ = run_main(capsys, "trust", "--show", "--json")
    shown = json.loads(out)
    assert shown["schema"] == "proctor.trust.v1" and shown["state"] == "untrusted"
    assert [f["path"] for f in shown["files"]] == ["proctor.toml", "guards.py"]
    assert not _marker(clone).exists()


def test_after_trust_the_guard_runs_and_an_edit_asks_again(
    clone: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(capsys, "trust", "--show", "--json")
    digest = json.loads(out)["digest"]
    code, out, err = run_main(capsys, "trust", "--yes", "--digest", digest, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["action"] == "trusted" and doc["trusted"]["digest"] == digest
    assert "import pathlib" in err  # the module was shown whole before it was trusted
    (event,) = _audit(clone, "guards_trusted")
    assert event["digest"] == digest and event["how"] == "yes"
    # recorded in the home, not the workspace
    assert digest in (clone.parent / "home" / "trusted-guards.json").read_text()
    assert digest not in "".join(p.read_text() for p in clone.rglob("*.json"))
    assert not _marker(clone).exists()

    assert _run(capsys)["outcome"] == "completed"
    assert _marker(clone).read_text() == "imported 1"
    assert run_main(capsys, "check", "--json")[0] == 0
    _marker(clone).unlink()

    # one byte changed after trust: refused again, and nothing of it ran
    guard = clone / "guards.py"
    guard.write_text(guard.read_text().replace("imported 1", "imported 2"))
    doc = _run(capsys)
    assert doc["outcome"] == "blocked"
    assert isinstance(doc["refusal"], dict) and doc["refusal"]["code"] == "guards_untrusted"
    assert "changed" in str(doc["refusal"]["message"])
    code, out, _ = run_main(capsys, "trust", "--show", "--json")
    assert json.loads(out)["state"] == "changed"
    assert not _marker(clone).exists()
    # the old digest is refused: a script trusts only what it reviewed
    code, out, _ = run_main(capsys, "trust", "--yes", "--digest", digest, "--json")
    assert code == 2 and json.loads(out)["code"] == "digest_mismatch"
    assert not _marker(clone).exists()


def test_trust_asks_on_a_terminal_only(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "trust")
    assert code == 2 and "terminal_required" in err
    assert "proctor trust --yes --digest sha256:" in err
    code, out, _ = run_main(capsys, "trust", "--show", "--json")
    assert json.loads(out)["trusted"] is None


def test_revoke_withdraws_and_is_audited(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(capsys, "trust", "--yes")[0] == 0
    assert run_main(capsys, "trust", "--revoke")[0] == 0
    assert len(_audit(clone, "guards_trust_revoked")) == 1
    assert _run(capsys)["outcome"] == "blocked"
    assert not _marker(clone).exists()


def test_the_environment_trusts_for_ci_and_is_audited(
    clone: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCTOR_TRUST_WORKSPACE", "yes")  # not 1: refused, not read as a yes
    doc = _run(capsys)
    assert isinstance(doc["refusal"], dict) and doc["refusal"]["code"] == "trust_env_invalid"
    assert not _marker(clone).exists()
    monkeypatch.setenv("PROCTOR_TRUST_WORKSPACE", "1")
    assert _run(capsys)["outcome"] == "completed"
    assert _marker(clone).exists()
    (event,) = _audit(clone, "guards_trusted_by_environment")
    assert event["variable"] == "PROCTOR_TRUST_WORKSPACE"
    assert not (clone.parent / "home" / "trusted-guards.json").exists()  # nothing recorded


def test_a_guard_that_is_a_link_to_outside_is_refused_even_after_trust(
    clone: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = clone.parent / "outside.py"
    outside.write_text((clone / "guards.py").read_text())
    (clone / "guards.py").unlink()
    os.symlink(outside, clone / "guards.py")
    code, out, _err = run_main(capsys, "trust", "--yes", "--json")
    assert code == 3 and json.loads(out)["code"] == "bad_guard_module"
    doc = _run(capsys)
    assert isinstance(doc["refusal"], dict) and doc["refusal"]["code"] == "bad_guard_module"
    assert not _marker(clone).exists()


def test_a_trust_the_audit_log_cannot_keep_is_not_made(
    clone: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (clone / "log-is-a-folder").mkdir()
    monkeypatch.setenv("PROCTOR_AUDIT_LOG", "log-is-a-folder")
    code, out, _ = run_main(capsys, "trust", "--yes", "--json")
    assert code != 0 and json.loads(out)["code"] == "audit_unwritable"
    assert not (clone.parent / "home" / "trusted-guards.json").exists()
