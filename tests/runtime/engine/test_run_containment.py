"""Containment in a real run: what proctor executes or trusts is never written by the run, its
state is never read, and a workspace that lifts a tool-config path says so in the audit log."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proctor.receipts.signing import signer_from_seed
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

REWRITE = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {file: {type: string}}
      required: [file]
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.file}
      - id: write
        tool: fs.write
        inputs: {path: $input.file, content: "import os; os.system('owned')\\n",
                 expected_digest: $steps.read.content_digest}
"""

PEEK = """minimum_proctor: 0.1.0
methods:
  read:
    description: Read the audit log.
    steps:
      - id: read
        tool: fs.read
        inputs: {path: logs/audit.jsonl}
  list:
    description: List its folder.
    steps:
      - id: list
        tool: fs.list
        inputs: {path: logs}
  search:
    description: Search the workspace.
    steps:
      - id: search
        tool: fs.search
        inputs: {pattern: run_started, path: logs}
"""

GRANT = {"effects": "allow", "reach": "workspace"}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "rewrite", REWRITE)
    make_skill(root, "peek", PEEK)
    (root / "guards.py").write_text("# the workspace's guards\n")
    (root / "guardpkg").mkdir()
    (root / "guardpkg" / "__init__.py").write_text("")
    (root / "guardpkg" / "helpers.py").write_text("HELP = 1\n")
    (root / ".vscode").mkdir()
    (root / ".vscode" / "tasks.json").write_text("{}\n")
    (root / ".vscode" / "settings.json").write_text("{}\n")
    (root / ".mcp.json").write_text("{}\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    return root


def events(root: Path, name: str) -> list[dict[str, Any]]:
    lines = (root / ".proctor" / "audit.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


@pytest.mark.parametrize(
    ("file", "rule"),
    [
        ("guards.py", "guard_module"),
        ("guardpkg/helpers.py", "guard_module"),
        (".vscode/tasks.json", "tool_config"),
        (".mcp.json", "tool_config"),
        (".github/workflows/ci.yml", "tool_config"),
    ],
)
def test_a_run_never_rewrites_what_proctor_or_another_tool_executes(
    ws: Path, file: str, rule: str
) -> None:
    (ws / "proctor.toml").write_text('[policy]\nguards = ["guards.py", "guardpkg.checks"]\n')
    (ws / "guardpkg" / "checks.py").write_text("# more guards\n")
    before = (ws / file).read_bytes()
    env = session(ws, trust_guards=True).run(
        "rewrite", inputs={"file": file}, authority=authority(**GRANT), cwd=ws
    )
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "authority_file"
    assert rule in env.refusal.message
    assert (ws / file).read_bytes() == before


def test_allow_write_lifts_one_path_and_the_run_start_is_audited(ws: Path) -> None:
    (ws / "proctor.toml").write_text('[containment]\nallow_write = [".vscode/settings.json"]\n')
    s = session(ws)
    env = s.run(
        "rewrite",
        inputs={"file": ".vscode/settings.json"},
        authority=authority(**GRANT),
        cwd=ws,
    )
    assert env.outcome == "completed"
    assert "owned" in (ws / ".vscode" / "settings.json").read_text()
    (narrowed,) = events(ws, "containment_narrowed")
    assert narrowed["run_id"] == env.run_id
    assert narrowed["allow_write"] == [".vscode/settings.json"]
    other = s.run(
        "rewrite", inputs={"file": ".vscode/tasks.json"}, authority=authority(**GRANT), cwd=ws
    )
    assert other.outcome == "blocked" and (ws / ".vscode" / "tasks.json").read_text() == "{}\n"


def test_an_allow_write_that_lifts_too_much_blocks_the_run(ws: Path) -> None:
    (ws / "proctor.toml").write_text('[containment]\nallow_write = ["policies/"]\n')
    env = session(ws).run(
        "rewrite", inputs={"file": ".mcp.json"}, authority=authority(**GRANT), cwd=ws
    )
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "bad_config"
    assert (ws / ".mcp.json").read_text() == "{}\n"
    assert events(ws, "containment_narrowed") == []


def test_state_the_session_keeps_in_the_workspace_is_never_read(ws: Path) -> None:
    ticks = itertools.count()
    start = datetime(2026, 1, 2, tzinfo=UTC)
    s = Session(
        Workspace(ws),  # built without the session's settings: the run's workspace gets them
        environ={"PROCTOR_HOME": str(ws / ".home"), "PROCTOR_AUDIT_LOG": "logs/audit.jsonl"},
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
        signer=signer_from_seed(bytes(range(32))),
    )
    try:
        read = s.run("peek#read", authority=authority(**GRANT), cwd=ws)
        assert read.outcome == "blocked" and read.refusal is not None
        assert read.refusal.code == "sensitive_path"
        assert "proctor_state" in read.refusal.message
        listed = s.run("peek#list", authority=authority(**GRANT), cwd=ws)
        assert listed.outcome == "completed"
        assert listed.result is not None and listed.result["entries"] == []
        # the log and the mark of how far it was verified (audit_breaks), both proctor's
        assert listed.result["withheld"] == 2
        found = s.run("peek#search", authority=authority(**GRANT), cwd=ws)
        assert found.outcome == "completed" and found.result is not None
        assert found.result["results"] == []
        assert "run_started" in (ws / "logs" / "audit.jsonl").read_text()
    finally:
        s.close()
