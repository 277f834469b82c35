"""Rule/guard binding in both directions; a check that examined nothing fails."""

from __future__ import annotations

from pathlib import Path

from proctor.policy import (
    GuardRegistry,
    PolicySet,
    check_bindings,
    check_workspace_policies,
    load_policy_set,
)
from tests.policy.conftest import TOOLS, write


def _errors(findings: list) -> list[str]:  # type: ignore[type-arg]
    return [f.code for f in findings if f.severity == "error"]


def test_shipped_set_binds_every_shipped_guard(tmp_path: Path) -> None:
    reg = GuardRegistry.with_shipped()
    findings = check_bindings(load_policy_set(tmp_path, reg, TOOLS), reg)
    assert _errors(findings) == []
    assert findings[-1].code == "guard_binding_coverage"


def test_unbound_guard_is_a_finding(tmp_path: Path) -> None:
    reg = GuardRegistry.with_shipped()
    ps = load_policy_set(tmp_path, reg, TOOLS)
    reg.register("orphan", lambda c: None)
    findings = check_bindings(ps, reg)
    assert _errors(findings) == ["unbound_guard"]
    assert any("orphan" in f.message for f in findings)


def test_rule_whose_guard_vanished_is_a_finding(tmp_path: Path) -> None:
    reg = GuardRegistry.with_shipped()
    ps = load_policy_set(tmp_path, reg, TOOLS)
    partial = GuardRegistry({n: reg.get(n) for n in reg.names() if n != "check_write_budget"})
    findings = check_bindings(ps, partial)
    assert _errors(findings) == ["unknown_guard"]
    assert findings[0].rule_id == "proctor.write_budget"


def test_a_check_that_examined_nothing_fails() -> None:
    findings = check_bindings(PolicySet([], []), GuardRegistry())
    assert _errors(findings) == ["nothing_examined"]


def test_workspace_check_reports_load_problems_as_findings(tmp_path: Path) -> None:
    write(tmp_path / "policies", "bad.yaml", "id: bad\nrules:\n  - id: r\n    guard: nope\n")
    findings = check_workspace_policies(tmp_path, tools=TOOLS, environ={})
    codes = _errors(findings)
    assert "unknown_guard" in codes and "guard_without_enforcement" in codes
    assert all("policies/bad.yaml" in f.message for f in findings)


def test_workspace_check_passes_on_the_shipped_set(tmp_path: Path) -> None:
    findings = check_workspace_policies(tmp_path, tools=TOOLS, environ={})
    assert _errors(findings) == []
    assert findings[0].code == "policies_loaded"
