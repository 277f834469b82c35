"""The review tools: skills.inspect and audit.summary are contained reads; the draft checks
refuse what does not parse or load, and a policy that would replace the shipped rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import ToolFailed
from proctor.runtime.tools.inspect_tools import CHANGING_TOOLS
from proctor.runtime.tools.registry import native_tools
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

PEEK = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: look
        tool: {tool}
        inputs: {{path: {path}}}
"""


def test_the_changing_tools_list_is_every_write_network_or_process_tool() -> None:
    changing = {n for n, t in native_tools().items() if t.effect in ("write", "network", "process")}
    assert changing == CHANGING_TOOLS


@pytest.mark.parametrize(
    ("tool", "path"),
    [
        ("skills.inspect", "../elsewhere"),
        ("audit.summary", "/etc/passwd"),
        ("audit.summary", "../elsewhere/audit.jsonl"),
    ],
)
def test_the_review_reads_never_leave_the_reach(tmp_path: Path, tool: str, path: str) -> None:
    root = make_workspace(tmp_path / "ws")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "SKILL.md").write_text("---\nname: x\ndescription: y\n---\n")
    (tmp_path / "elsewhere" / "audit.jsonl").write_text('{"event":"call_refused"}\n')
    make_skill(root, "peek", PEEK.format(tool=tool, path=path))
    env = session(root).run(str(root / "skills" / "peek"))
    assert env.outcome == "blocked" and env.refusal is not None
    assert env.result is None


def test_skills_inspect_reports_facts_and_findings(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "wide", "minimum_proctor: 0.1.0\nmethods:\n  go:\n    effects: allow\n"
               "    reach: inputs\n    steps:\n      - {id: run, tool: command.execute, "
               "inputs: {argv: [ls]}}\n")  # fmt: skip
    make_skill(root, "peek", PEEK.format(tool="skills.inspect", path="skills/wide"))
    env = session(root).run(str(root / "skills" / "peek"))
    assert env.outcome == "completed", env.refusal
    facts = env.result or {}
    assert facts["methods"]["go"]["steps"] == [{"id": "run", "kind": "tool",
                                                "name": "command.execute"}]  # fmt: skip
    findings = "\n".join(facts["findings"])
    assert "effects allow with changing tools ['command.execute']" in findings
    assert "reach inputs" in findings and "runs commands" in findings


def test_check_draft_refuses_unknown_tools_missing_effects_and_bad_tests() -> None:
    check = native_tools()["skills.check_draft"].handler
    md = "---\nname: d\ndescription: x\n---\nx\n"
    ok_run = "minimum_proctor: 0.1.0\nmethods:\n  m:\n    effects: none\n    steps:\n" \
             "      - {id: s, tool: echo, inputs: {text: a}}\n"  # fmt: skip
    good = {"name": "d", "skill_md": md, "run_yaml": ok_run,
            "tests": {"t": "method: m\nexpect: {status: sealed}\n"}}  # fmt: skip
    out = check(None, good)  # type: ignore[arg-type]
    assert [c["path"] for c in out["changes"]] == [
        "drafts/d/SKILL.md.draft", "drafts/d/run.yaml.draft", "drafts/d/tests/t.yaml"]  # fmt: skip
    for bad in (
        {**good, "run_yaml": ok_run.replace("echo", "rm.rf")},
        {**good, "run_yaml": ok_run.replace("    effects: none\n", "")},
        {**good, "tests": {}},
        {**good, "tests": {"t": "method: other\n"}},
        {**good, "tests": {"../t": "method: m\n"}},
        {**good, "name": "other"},
    ):
        with pytest.raises(ToolFailed) as refused:
            check(None, bad)  # type: ignore[arg-type]
        assert refused.value.code == "draft_invalid"


def test_policy_check_draft_loads_for_real_and_keeps_the_shipped_namespace() -> None:
    check = native_tools()["policy.check_draft"].handler
    rule = ("id: {pid}\nrules:\n  - id: {rid}\n    description: d\n    guard: {guard}\n"
            "    enforcement: block\n    on_error: fail_closed\n    tools: [{tool}]\n")  # fmt: skip
    ok = rule.format(pid="team.x", rid="team.r", guard="check_sensitive_paths", tool="fs.read")
    assert check(None, {"rules_yaml": ok})["rules"][0]["id"] == "team.r"  # type: ignore[arg-type]
    for bad in (
        rule.format(
            pid="proctor.files", rid="team.r", guard="check_sensitive_paths", tool="fs.read"
        ),
        rule.format(pid="team.x", rid="proctor.r", guard="check_sensitive_paths", tool="fs.read"),
        rule.format(pid="team.x", rid="team.r", guard="check_nothing", tool="fs.read"),
        rule.format(pid="team.x", rid="team.r", guard="check_sensitive_paths", tool="fs.nuke"),
        "id: team.x\nrules: []\n",
    ):
        with pytest.raises(ToolFailed) as refused:
            check(None, {"rules_yaml": bad})  # type: ignore[arg-type]
        assert refused.value.code == "draft_invalid"
