"""Profiles, the shipped-posture drift check, the zero-rules gate and the write budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import ConfigError
from proctor.policy import (
    SHIPPED_POSTURE,
    UNRESTRICTED,
    GuardRegistry,
    load_policy_set,
    load_workspace_policies,
    policy_profile,
    shipped_drift,
    shipped_policy_sources,
    write_budget,
)
from proctor.policy.profile import SHIPPED_POLICY_IDS
from tests.policy.conftest import TOOLS, write


def _load(ws: Path, **env: str) -> object:
    return load_workspace_policies(ws, tools=TOOLS, environ=env)


def test_shipped_files_load_to_exactly_the_reviewed_posture(registry: GuardRegistry) -> None:
    """The pin in code and the package data agree; this is what catches an edit to either."""
    from proctor.policy import load_policy_sources

    ps = load_policy_sources(shipped_policy_sources(), registry, TOOLS)
    assert ps.policy_ids == SHIPPED_POLICY_IDS
    loaded = {
        r.id: (r.guard, r.enforcement, r.on_error, None if r.tools is None else frozenset(r.tools))
        for r in ps.enforceable
    }
    reviewed = {
        k: (v.guard, v.enforcement, v.on_error, v.tools) for k, v in SHIPPED_POSTURE.items()
    }
    assert loaded == reviewed
    drift = shipped_drift(ps)
    assert not drift.drifted and drift.extra == ()


def test_shipped_rules_cover_what_the_issue_requires() -> None:
    guards = {p.guard for p in SHIPPED_POSTURE.values()}
    assert guards == {
        "check_sensitive_paths",
        "check_no_secrets_in_args",
        "check_no_raw_credentials",
        "check_no_bulk_writes",
        "check_destructive_action",
        "check_write_budget",
        "check_reason_not_empty",
    }


def test_default_profile_loads_shipped_rules_without_a_workspace_folder(tmp_path: Path) -> None:
    loaded = load_workspace_policies(tmp_path, tools=TOOLS, environ={})
    assert loaded.profile == "default" and not loaded.unguarded
    assert loaded.policy_set.policy_ids == SHIPPED_POLICY_IDS
    assert loaded.enforced is loaded.policy_set


def test_extra_workspace_rules_are_allowed_and_named(tmp_path: Path) -> None:
    write(
        tmp_path / "policies",
        "team.yaml",
        """
        id: team
        rules:
          - id: team.reasons
            guard: check_reason_not_empty
            enforcement: warn
        """,
    )
    loaded = load_workspace_policies(tmp_path, tools=TOOLS, environ={})
    assert loaded.drift.extra == ("team.reasons",)
    # shipped files first, then the workspace's
    assert loaded.policy_set.policy_ids == (*SHIPPED_POLICY_IDS, "team")


def _replace_files_policy(ws: Path, rules: str) -> None:
    write(ws / "policies", "ours.yaml", "id: proctor.files\nrules:\n" + rules)


def test_drift_names_what_is_missing_changed_and_extra(tmp_path: Path) -> None:
    # Replace the shipped file: drop two rules, downgrade one, widen one, add one.
    _replace_files_policy(
        tmp_path,
        """
  - id: proctor.sensitive_paths
    guard: check_sensitive_paths
    enforcement: warn
    on_error: fail_closed
    tools: [fs.read, fs.list, fs.search, fs.write, fs.edit, fs.apply_bundle, fs.delete, fs.restore]
  - id: proctor.write_budget
    guard: check_write_budget
    enforcement: block
    on_error: fail_closed
    tools: [fs.write]
  - id: proctor.no_bulk_writes
    guard: check_no_bulk_writes
    enforcement: advisory
  - id: my.extra
    guard: check_reason_not_empty
    enforcement: warn
""",
    )
    with pytest.raises(ConfigError) as info:
        _load(tmp_path)
    err = info.value
    assert err.code == "policy_drift"
    assert err.details["missing"] == [
        "proctor.destructive_action",
        "proctor.no_bulk_writes",
        "proctor.reason_for_changes",
    ]
    changed = " ".join(err.details["changed"])
    assert "proctor.sensitive_paths.enforcement: reviewed 'block', loaded 'warn'" in changed
    assert "proctor.write_budget.tools" in changed
    assert err.details["extra"] == ["my.extra"]
    for name in ("proctor.no_bulk_writes", "proctor.sensitive_paths", "my.extra", "custom"):
        assert name in err.message


def test_custom_profile_turns_only_the_drift_check_off(tmp_path: Path) -> None:
    _replace_files_policy(
        tmp_path,
        """
  - id: proctor.sensitive_paths
    guard: check_sensitive_paths
    enforcement: warn
""",
    )
    loaded = load_workspace_policies(
        tmp_path, tools=TOOLS, environ={"PROCTOR_POLICY_PROFILE": "custom"}
    )
    assert loaded.profile == "custom"
    rule = loaded.policy_set.rule("proctor.sensitive_paths")
    assert rule is not None and rule.enforcement == "warn"
    # validation still applies under custom
    _replace_files_policy(tmp_path, "  - id: x\n    guard: check_nothing\n    enforcement: block\n")
    from proctor.errors import PolicyLoadError

    with pytest.raises(PolicyLoadError):
        load_workspace_policies(tmp_path, tools=TOOLS, environ={"PROCTOR_POLICY_PROFILE": "custom"})


@pytest.mark.parametrize("value", ["shipped", "Default", "", "none", "custom "])
def test_any_other_profile_value_refuses_to_start(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, PROCTOR_POLICY_PROFILE=value)
    assert info.value.code == "bad_policy_profile"
    assert policy_profile({}) == "default"


def _empty_everything(ws: Path) -> None:
    write(ws / "policies", "a.yaml", "id: proctor.files\nrules:\n  - id: words\n")
    write(ws / "policies", "b.yaml", "id: proctor.credentials\nrules: []\n")


def test_zero_enforceable_rules_refuse_the_run(tmp_path: Path) -> None:
    _empty_everything(tmp_path)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, PROCTOR_POLICY_PROFILE="custom")
    assert info.value.code == "no_enforceable_policies"
    assert "PROCTOR_ALLOW_NO_POLICIES=1" in info.value.message
    with pytest.raises(ConfigError):  # only "1" opts out
        _load(tmp_path, PROCTOR_POLICY_PROFILE="custom", PROCTOR_ALLOW_NO_POLICIES="true")


def test_the_opt_out_runs_unguarded_and_says_so(tmp_path: Path) -> None:
    _empty_everything(tmp_path)
    loaded = load_workspace_policies(
        tmp_path,
        tools=TOOLS,
        environ={"PROCTOR_POLICY_PROFILE": "custom", "PROCTOR_ALLOW_NO_POLICIES": "1"},
    )
    assert loaded.unguarded
    assert loaded.enforced is UNRESTRICTED


def test_the_opt_out_alone_does_not_pass_the_default_profile(tmp_path: Path) -> None:
    _empty_everything(tmp_path)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, PROCTOR_ALLOW_NO_POLICIES="1")
    assert info.value.code == "policy_drift"


def test_a_workspace_file_replaces_only_the_shipped_file_with_its_id(
    tmp_path: Path, registry: GuardRegistry
) -> None:
    write(tmp_path / "policies", "x.yaml", "id: proctor.credentials\nrules:\n  - id: words\n")
    ps = load_policy_set(tmp_path, registry, TOOLS)
    assert ps.policy_ids == ("proctor.files", "proctor.credentials")
    assert ps.rule("proctor.no_secrets_in_args") is None
    assert ps.rule("proctor.sensitive_paths") is not None


def test_write_budget_from_the_environment() -> None:
    assert write_budget({}) == 50
    assert write_budget({"PROCTOR_WRITE_BUDGET": "3"}) == 3
    for bad in ("-1", "ten", "1.5"):
        with pytest.raises(ConfigError) as info:
            write_budget({"PROCTOR_WRITE_BUDGET": bad})
        assert info.value.code == "bad_write_budget"
