"""The reference kernel's own 13 directives, read unchanged, catalogued and run.

The wheel ``auro-runtime==0.1.0`` is downloaded with pip into a temporary folder at test time
(never vendored); its ``resources/directives/*.md`` are copied byte for byte into a workspace's
``directives/``. Each loads, appears in the catalogue with its tools, and runs one managed turn
against a stub model that is offered exactly the directive's tools.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.agents import ManagedAgent
from proctor.runtime.agents.sessions import DirectiveSession
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.directives import load_directives
from proctor.runtime.tools.registry import native_tools
from tests.e2e.conftest import Ws
from tests.reference_wheel import reference_members
from tests.runtime.agent_stub import Seen, StubModel, answer, config, offered_tools, tool_results

pytestmark = pytest.mark.network_fetch

MEMBER_DIR = "auro_runtime/resources/directives/"
DIALECT = "chat_completions"

# Plausible first calls for each reference tool (what a model following the body would do).
FIRST_CALL: dict[str, dict[str, Any]] = {
    "list_dir": {"path": "."},
    "read_file": {"path": "README.md"},
    "write_file": {"path": "output/report.md", "content": "# report\n"},
    "list_tools": {"include_args": True},
    "list_directives": {},
    "validate_directive": {"path": "directives/file_analysis.md"},
    "resolve_secret": {"alias": "github_token"},
    "echo": {"message": "hello"},
}


@pytest.fixture(scope="session")
def reference_directives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """``{file name: bytes}`` of the reference wheel's shipped directives."""
    folder = tmp_path_factory.mktemp("auro-wheel-directives")
    files = reference_members(folder, MEMBER_DIR, ".md")
    assert len(files) == 13, sorted(files)
    return files


@pytest.fixture
def workspace(tmp_path: Path, reference_directives: dict[str, bytes]) -> Path:
    folder = tmp_path / "directives"
    folder.mkdir()
    for name, data in reference_directives.items():
        (folder / name).write_bytes(data)
    (tmp_path / ".proctor").mkdir()
    (tmp_path / "README.md").write_text("# a project\n", encoding="utf-8")
    return tmp_path


def test_all_thirteen_load_unchanged(
    workspace: Path, reference_directives: dict[str, bytes]
) -> None:
    found = load_directives(workspace, tools=set(native_tools()))
    assert found.refused == {}
    ids = {name[:-3] for name in reference_directives}
    assert ids <= set(found.directives)
    for directive_id in ids:
        directive = found.directives[directive_id]
        assert directive.source == f"directives/{directive_id}.md"
        assert directive.tools, directive_id
    # Byte for byte what the wheel holds: loading never rewrote a file.
    for name, data in reference_directives.items():
        assert (workspace / "directives" / name).read_bytes() == data


def test_the_catalogue_lists_each_with_its_tools(
    workspace: Path, reference_directives: dict[str, bytes], tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    ws = Ws(workspace, tmp_path / "home", {**env, "PROCTOR_HOME": str(tmp_path / "home")})
    result = ws.proctor("directives", "catalogue")
    assert result.code == 0, result.stderr
    text = (workspace / "docs" / "DIRECTIVES.md").read_text(encoding="utf-8")
    found = load_directives(workspace, tools=set(native_tools()))
    for name in reference_directives:
        directive = found.directives[name[:-3]]
        section = text.split(f"### `{directive.id}`", 1)[1].split("### ", 1)[0]
        for tool in directive.tools:
            assert f"| `{tool}` |" in section, (directive.id, tool)
    assert ws.proctor("directives", "catalogue", "--check").code == 0
    (workspace / "directives" / "file_analysis.md").write_text(
        (workspace / "directives" / "file_analysis.md")
        .read_text()
        .replace("Analyze files", "Study files")
    )
    stale = ws.proctor("directives", "catalogue", "--check")
    assert stale.code == 1 and "out of date" in stale.stderr


def _script(expected: list[str]) -> list[Any]:
    def first(seen: Seen) -> Any:
        offered = offered_tools(DIALECT, seen)
        assert sorted(offered) == sorted(expected), offered
        name = expected[0]
        return answer(DIALECT, calls=[(name, {**FIRST_CALL[name], "reason": "first step"})])

    return [first, answer(DIALECT, text='{"done": true, "summary": "ran one step"}')]


@pytest.mark.parametrize(
    "directive_id",
    [
        "active_debug",
        "create_directive",
        "debug_research",
        "edit_directive",
        "file_analysis",
        "health_check",
        "policy_audit",
        "review_directive_policies",
        "rotate_credentials",
        "setup_credentials",
        "test_coverage_audit",
        "tool_catalog",
        "update_policies",
    ],
)
def test_each_runs_one_turn_with_only_its_listed_tools(workspace: Path, directive_id: str) -> None:
    text = (workspace / "directives" / f"{directive_id}.md").read_text(encoding="utf-8")
    found = load_directives(workspace, tools=set(native_tools()))
    listed = list(found.directives[directive_id].tools)
    with StubModel(_script(listed)) as stub:
        agent = ManagedAgent(config(stub, DIALECT), view="reference", sleep=lambda s: None)
        session = DirectiveSession(
            Workspace(workspace),
            environ={"PROCTOR_HOME": str(workspace / "home")},
            agent_driver=agent,
        )
        try:
            envelope = session.run_directive(directive_id, "please do your job")
        finally:
            session.close()
    doc = envelope.to_json()
    assert doc["status"] == "sealed" and doc["outcome"] == "completed", doc
    assert doc["result"] == {"done": True, "summary": "ran one step"}
    assert doc["receipt_id"] is not None
    [entry] = doc["trace"]
    assert entry["outcome"] == "completed", entry
    [result] = tool_results(DIALECT, stub.seen[1])
    assert result["status"] == "completed"
    # The directive's body reached the model as its instructions, unchanged.
    system = stub.seen[0].body["messages"][0]["content"]
    assert text.split("---", 2)[2].strip()[:200] in system
    if listed[0] == "write_file":
        assert (workspace / "output" / "report.md").read_text() == "# report\n"


BAD: dict[str, tuple[str, str]] = {
    "broken_yaml": (
        "---\nid: broken_yaml\ndescription: [unclosed\n---\n# x\n",
        "directive_frontmatter",
    ),
    "no_frontmatter": ("# just markdown\n", "directive_frontmatter"),
    "wrong_id": (
        "---\nid: other_name\ndescription: d\ntools: [echo]\n---\n# x\n",
        "directive_id_mismatch",
    ),
    "no_description": (
        "---\nid: no_description\ntools: [echo]\n---\n# x\n",
        "directive_description_missing",
    ),
    "bad_category": (
        "---\nid: bad_category\ndescription: d\ntools: [echo]\ncategory: admin\n---\n# x\n",
        "directive_category_unknown",
    ),
    "typo_key": (
        "---\nid: typo_key\ndescription: d\ntool: [write_file]\n---\n# x\n",
        "directive_frontmatter",
    ),
    "unknown_tool": (
        "---\nid: unknown_tool\ndescription: d\ntools: [shell_exec]\n---\n# x\n",
        "directive_tool_unknown",
    ),
}


def test_malformed_directives_are_refused_by_name(workspace: Path) -> None:
    for name, (text, _code) in BAD.items():
        (workspace / "directives" / f"{name}.md").write_text(text, encoding="utf-8")
    found = load_directives(workspace, tools=set(native_tools()))
    assert len(found.directives) >= 13
    for name, (_text, code) in BAD.items():
        error = found.refused[f"directives/{name}.md"]
        assert error.code == code, (name, error.code)
        assert f"directives/{name}.md" in error.message
        assert name not in found.directives
    session = DirectiveSession(Workspace(workspace), environ={"PROCTOR_HOME": str(workspace)})
    try:
        for name, (_text, code) in BAD.items():
            with pytest.raises(Exception) as caught:
                session.run_directive(name, "go")
            assert getattr(caught.value, "code", None) == code
        assert session.store.list_runs() == []  # refused before any run existed
    finally:
        session.close()
    listing = json.dumps([e.to_dict() for e in found.refused.values()])
    assert "unclosed" not in listing  # the refused text itself is not echoed
