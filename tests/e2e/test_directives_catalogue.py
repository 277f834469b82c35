"""The shipped directives: catalogue kept current, each loadable, host-driven turns pause."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from proctor.runtime.agents.sessions import DirectiveSession
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.directives import load_directives
from proctor.runtime.tools.registry import native_tools
from tests.e2e.conftest import REPO


def test_docs_directives_md_is_current() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "directives", "catalogue", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PYTHONPATH": str(REPO / "src"),
            "PATH": "/usr/bin:/bin",
            "PROCTOR_HOME": "/nonexistent",
        },
    )
    assert proc.returncode == 0, proc.stderr + " (run: proctor directives catalogue)"


def test_the_shipped_set_loads_with_known_tools() -> None:
    found = load_directives(None, tools=set(native_tools()))
    assert found.refused == {}
    assert set(found.directives) == {
        "tool_catalogue",
        "policy_audit",
        "directive_drafting",
        "file_summary",
    }


def test_without_a_managed_agent_a_directive_run_pauses_for_a_host(tmp_path: Path) -> None:
    (tmp_path / ".proctor").mkdir()
    session = DirectiveSession(Workspace(tmp_path), environ={"PROCTOR_HOME": str(tmp_path / "h")})
    try:
        envelope = session.run_directive("file_summary", "summarise everything")
    finally:
        session.close()
    doc = envelope.to_json()
    assert doc["status"] == "needs_agent"
    [request] = doc["requests"]
    assert request["kind"] == "agent_turn"
    assert request["allowance"]["tools"] == ["fs.list", "fs.read"]
    assert request["inputs"] == {"request": "summarise everything"}
    assert "# File summary" in request["instructions"]
