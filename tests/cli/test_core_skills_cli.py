"""``proctor run proctor/receipt-audit -i receipt=ID`` on a real run's receipt, and
``proctor skill list``, through the CLI (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.inprocess import enter_workspace, run_main

REFUSER = """minimum_proctor: 0.1.0
methods:
  go:
    steps:
      - id: hello
        tool: echo
        inputs: {text: hi}
      - id: peek
        tool: fs.read
        inputs: {path: ../outside.txt}
      - id: never
        tool: echo
        inputs: {text: unreachable}
    result_from: [hello]
"""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    skill = root / "skills" / "refuser"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: refuser\ndescription: Peeks outside.\n---\nx\n")
    (skill / "run.yaml").write_text(REFUSER)
    (tmp_path / "outside.txt").write_text("secret\n")
    enter_workspace(monkeypatch, root, tmp_path / "home")
    return root


def _proctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code, out, _err = run_main(capsys, *argv)
    return code, out


def test_receipt_audit_explains_a_real_refused_run(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _proctor(capsys, "run", "refuser", "--json")
    run = json.loads(out)
    assert code == 1 and run["outcome"] == "blocked"
    refused_code = run["refusal"]["code"]
    code, out = _proctor(
        capsys, "run", "proctor/receipt-audit", "-i", f"receipt={run['receipt_id']}", "--json"
    )
    assert code == 0, out
    audit = json.loads(out)["result"]
    assert audit["verification"]["status"] == "verified"
    assert [s["step"] for s in audit["steps"]] == ["hello", "peek"]  # never ran: not named
    (refusal,) = audit["refusals"]
    assert (refusal["step"], refusal["tool"], refusal["code"]) == ("peek", "fs.read", refused_code)
    assert "Step peek: blocked" in audit["text"] and f"code {refused_code}" in audit["text"]
    assert "secret" not in out
    # the text form prints the same explanation
    code, out = _proctor(capsys, "run", "proctor/receipt-audit", "-i",
                         f"receipt={run['receipt_id']}")  # fmt: skip
    assert code == 0


def test_skill_list_shows_core_and_workspace_skills(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _proctor(capsys, "skill", "list", "--json")
    assert code == 0
    refs = {(e["ref"], e["source"]) for e in json.loads(out)["skills"]}
    assert ("proctor/receipt-audit", "core") in refs and ("refuser", "workspace") in refs
    assert ("proctor/weather", "core") in refs
