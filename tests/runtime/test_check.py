"""``proctor check`` as an author meets it: a step naming a tool that does not exist is a
finding with the nearest names; a workspace with directives of its own and no skill passes the
skills check; an empty one says where it looked and how to start."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.check import check_workspace, report

TYPO = """\
minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: read
        tool: fs.reed
        inputs: {path: notes.txt}
      - id: think
        agent:
          instructions: Summarise.
          calls: {tools: [fs.list, no.such.tool]}
"""

DIRECTIVE = """\
---
id: notes_summary
description: Summarise the notes folder
tools: [read_file, list_dir]
category: task
---

# Notes summary

## Purpose
Summarise the notes.

## Steps
1. List the notes folder and read each note.
"""


def _checks(root: Path) -> dict[str, dict[str, Any]]:
    env = {"PROCTOR_HOME": str(root.parent / "home"), "PATH": os.environ.get("PATH", "")}
    doc = report(check_workspace(Workspace(root), env))
    return {f"{p['phase']}/{c['name']}": c for p in doc["phases"] for c in p["checks"]}


def test_a_step_naming_an_unknown_tool_is_a_finding_with_did_you_mean(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    package = root / "skills" / "typo"
    package.mkdir(parents=True)
    (package / "SKILL.md").write_text(
        "---\nname: typo\ndescription: A typo.\n---\n# typo\n", encoding="utf-8"
    )
    (package / "run.yaml").write_text(TYPO, encoding="utf-8")
    checks = _checks(root)
    step_tools = checks["parse/step tools"]
    assert step_tools["passed"] is False
    messages = [f["message"] for f in step_tools["findings"]]
    assert len(messages) == 2
    assert "'fs.reed'" in messages[0] and "did you mean 'fs.read'" in messages[0]
    assert "'no.such.tool'" in messages[1]
    assert all(f["code"] == "tool_unknown" for f in step_tools["findings"])


def test_directives_and_no_skills_pass_and_an_empty_workspace_says_where_it_looked(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    (root / "directives").mkdir(parents=True)
    (root / "directives" / "notes_summary.md").write_text(DIRECTIVE, encoding="utf-8")
    checks = _checks(root)
    assert checks["parse/skills"]["passed"] is True, checks["parse/skills"]
    assert "1 directive(s) of its own" in checks["parse/skills"]["detail"]
    assert checks["parse/directives"]["passed"] is True

    empty = tmp_path / "empty"
    empty.mkdir()
    skills = _checks(empty)["parse/skills"]
    assert skills["passed"] is False
    assert "looked for a SKILL.md" in skills["detail"] and "proctor init" in skills["detail"]


def _store_with_runs(root: Path) -> Path:
    from proctor.runtime.records.runs import RunRecord
    from proctor.runtime.records.sqlite import SQLiteRunStore

    path = root / ".proctor" / "runs.sqlite"
    store = SQLiteRunStore(path)
    for n in range(300):
        store.create_run(RunRecord(run_id=f"r{n}", skill="s", method="m", data={"p": "x" * 300}))
    store.close()
    return path


def test_the_run_store_is_scanned_whole_even_where_a_command_would_skip_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import sqlite3

    root = tmp_path / "ws"
    (root / "skills").mkdir(parents=True)
    assert _checks(root)["records/run_store"]["passed"]  # no store yet: none is made
    assert not (root / ".proctor" / "runs.sqlite").exists()
    _store_with_runs(root)
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    check = _checks(root)["records/run_store"]
    assert check["passed"] and "passed PRAGMA quick_check" in check["detail"], check
    assert ".proctor/runs.sqlite" in check["detail"] and str(root) not in check["detail"]
    assert any("quick_check" in s for s in statements)  # the mark matched: scanned anyway


def test_a_damaged_run_store_fails_the_check_and_is_left_as_it_is(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "skills").mkdir(parents=True)
    path = _store_with_runs(root)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page : 2 * page] = bytes(range(256)) * (page // 256)  # page 2: a b-tree page
    path.write_bytes(bytes(data))
    check = _checks(root)["records/run_store"]
    assert not check["passed"]
    assert [f["code"] for f in check["findings"]] == ["store_corrupt"]
    assert path.read_bytes() == bytes(data)


def test_a_skill_that_does_not_parse_is_reported_once_not_again_as_a_connector_problem(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    package = root / "skills" / "broken"
    package.mkdir(parents=True)
    (package / "SKILL.md").write_text("---\nname: broken\ndescription: B.\n---\n", "utf-8")
    (package / "run.yaml").write_text("minimum_proctor: 0.1.0\nmethods: [1]\n", "utf-8")
    checks = _checks(root)
    assert checks["parse/skills"]["passed"] is False
    assert len(checks["parse/skills"]["findings"]) == 1
    # no connector is declared: no connectors check, and never the skill's error again there
    assert "parse/connectors" not in checks, checks.get("parse/connectors")
