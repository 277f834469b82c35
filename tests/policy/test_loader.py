"""Load-time validation: every malformed rule is a PolicyLoadError naming its file and rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import PolicyLoadError
from proctor.policy import GuardRegistry, GuardVerdict, load_policies
from tests.policy.conftest import TOOLS, write


def _load(tmp_path: Path, body: str, registry: GuardRegistry) -> None:
    write(tmp_path / "policies", "team.yaml", body)
    load_policies(tmp_path / "policies", registry, TOOLS)


def _refused(tmp_path: Path, body: str, registry: GuardRegistry, code: str) -> PolicyLoadError:
    with pytest.raises(PolicyLoadError) as info:
        _load(tmp_path, body, registry)
    err = info.value
    assert err.code == code, err.message
    assert "policies/team.yaml" in err.message
    return err


def test_a_valid_file_loads_with_reference_defaults(
    tmp_path: Path, registry: GuardRegistry
) -> None:
    write(
        tmp_path / "policies",
        "team.yaml",
        """
        id: team
        rules:
          - id: reasons
            description: say why
            guard: check_reason_not_empty
            enforcement: warn
          - id: words only
            description: advisory text
          - a bare string rule is advisory too
        """,
    )
    ps = load_policies(tmp_path / "policies", registry, TOOLS)
    assert [r.id for r in ps.rules] == ["reasons", "words only", "a bare string rule is advisory t"]
    first = ps.rules[0]
    assert (first.on_error, first.tools, first.source_file, first.position) == (
        "fail_closed",
        None,
        "policies/team.yaml",
        0,
    )
    assert [r.id for r in ps.enforceable] == ["reasons"]
    assert ps.policy_ids == ("team",)
    assert ps.digest.startswith("sha256:") and len(ps.digest) == 71


def test_unknown_guard(tmp_path: Path, registry: GuardRegistry) -> None:
    err = _refused(
        tmp_path,
        """
        id: team
        rules:
          - id: r1
            guard: check_nothing
            enforcement: block
        """,
        registry,
        "unknown_guard",
    )
    assert "rule 'r1'" in err.message and "check_nothing" in err.message
    # file:line:column of the guard key
    assert "policies/team.yaml:4:" in err.message


def test_non_callable_guard(tmp_path: Path) -> None:
    reg = GuardRegistry({"not_a_function": 42})
    err = _refused(
        tmp_path,
        """
        id: team
        rules:
          - id: r1
            guard: not_a_function
            enforcement: block
        """,
        reg,
        "guard_not_callable",
    )
    assert "rule 'r1'" in err.message


@pytest.mark.parametrize(
    "guard",
    [
        lambda: None,
        lambda a, b: None,
        lambda *args: None,
        lambda a, *, b: None,
    ],
    ids=["none", "two", "varargs_only", "required_keyword"],
)
def test_wrong_arity(tmp_path: Path, guard: object) -> None:
    reg = GuardRegistry({"odd": guard})
    err = _refused(
        tmp_path,
        """
        id: team
        rules:
          - id: r1
            guard: odd
            enforcement: warn
        """,
        reg,
        "guard_arity",
    )
    assert "rule 'r1'" in err.message


def test_one_positional_with_optional_extras_is_fine(tmp_path: Path) -> None:
    def guard(ctx: object, extra: int = 1, *rest: object, **kw: object) -> GuardVerdict | None:
        return None

    _load(
        tmp_path,
        """
        id: team
        rules:
          - id: r1
            guard: g
            enforcement: warn
        """,
        GuardRegistry({"g": guard}),
    )


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("enforcement", "Block", "unknown_enforcement"),
        ("enforcement", "deny", "unknown_enforcement"),
        ("on_error", "ignore", "unknown_on_error"),
        ("on_error", "fail-open", "unknown_on_error"),
    ],
)
def test_unknown_enforcement_or_on_error(
    tmp_path: Path, registry: GuardRegistry, field: str, value: str, code: str
) -> None:
    values = {"enforcement": "block", "on_error": "fail_closed", field: value}
    err = _refused(
        tmp_path,
        f"""
        id: team
        rules:
          - id: r1
            guard: check_reason_not_empty
            enforcement: {values["enforcement"]}
            on_error: {values["on_error"]}
        """,
        registry,
        code,
    )
    assert "rule 'r1'" in err.message and value in err.message


@pytest.mark.parametrize("level", ["block", "warn"])
def test_block_or_warn_without_a_guard(tmp_path: Path, registry: GuardRegistry, level: str) -> None:
    err = _refused(
        tmp_path,
        f"""
        id: team
        rules:
          - id: r1
            description: enforce me
            enforcement: {level}
        """,
        registry,
        "enforcement_without_guard",
    )
    assert "rule 'r1'" in err.message


def test_guard_without_an_enforcement_key(tmp_path: Path, registry: GuardRegistry) -> None:
    err = _refused(
        tmp_path,
        """
        id: team
        rules:
          - id: r1
            guard: check_sensitive_paths
        """,
        registry,
        "guard_without_enforcement",
    )
    assert "rule 'r1'" in err.message and "no enforcement key" in err.message


def test_explicit_advisory_with_a_guard_loads_but_is_not_enforced(
    tmp_path: Path, registry: GuardRegistry
) -> None:
    write(
        tmp_path / "policies",
        "team.yaml",
        """
        id: team
        rules:
          - id: r1
            guard: check_sensitive_paths
            enforcement: advisory
        """,
    )
    ps = load_policies(tmp_path / "policies", registry, TOOLS)
    assert ps.enforceable == ()


def test_duplicate_rule_ids_across_files(tmp_path: Path, registry: GuardRegistry) -> None:
    write(tmp_path / "policies", "a.yaml", "id: a\nrules:\n  - id: same\n")
    write(tmp_path / "policies", "b.yaml", "id: b\nrules:\n  - id: same\n")
    with pytest.raises(PolicyLoadError) as info:
        load_policies(tmp_path / "policies", registry, TOOLS)
    assert info.value.code == "duplicate_rule_id"
    assert "policies/b.yaml" in info.value.message and "policies/a.yaml" in info.value.message


def test_duplicate_policy_ids(tmp_path: Path, registry: GuardRegistry) -> None:
    write(tmp_path / "policies", "a.yaml", "id: same\nrules:\n  - id: one\n")
    write(tmp_path / "policies", "b.yaml", "id: same\nrules:\n  - id: two\n")
    with pytest.raises(PolicyLoadError) as info:
        load_policies(tmp_path / "policies", registry, TOOLS)
    assert info.value.code == "duplicate_policy_id"


def test_unknown_tool_is_an_error(tmp_path: Path, registry: GuardRegistry) -> None:
    err = _refused(
        tmp_path,
        """
        id: team
        rules:
          - id: r1
            guard: check_reason_not_empty
            enforcement: warn
            tools: [fs.read, shell_exec]
        """,
        registry,
        "unknown_tool",
    )
    assert "shell_exec" in err.message and "rule 'r1'" in err.message


def test_empty_tools_list_is_an_error(tmp_path: Path, registry: GuardRegistry) -> None:
    _refused(
        tmp_path,
        """
        id: team
        rules:
          - id: r1
            guard: check_reason_not_empty
            enforcement: warn
            tools: []
        """,
        registry,
        "empty_tools",
    )


def test_reference_tool_names_map_to_ours(tmp_path: Path, registry: GuardRegistry) -> None:
    write(
        tmp_path / "policies",
        "team.yaml",
        """
        id: team
        rules:
          - id: r1
            guard: check_sensitive_paths
            enforcement: block
            on_error: fail_closed
            tools: [read_file, write_file, list_dir, delete_file, restore_file, http_request]
          - id: r2
            guard: check_reason_not_empty
            enforcement: warn
            tools: [resolve_secret]
        """,
    )
    ps = load_policies(tmp_path / "policies", registry, TOOLS)
    r1 = ps.rules[0]
    assert r1.tools == (
        "fs.read",
        "fs.write",
        "fs.edit",
        "fs.apply_bundle",
        "fs.list",
        "fs.delete",
        "fs.restore",
        "http.request",
    )
    assert r1.declared_tools == (
        "read_file",
        "write_file",
        "list_dir",
        "delete_file",
        "restore_file",
        "http_request",
    )
    # every tool that writes a file is covered by a write_file rule
    assert [r.id for r in ps.rules_for("fs.edit")] == ["r1"]
    assert [r.id for r in ps.rules_for("fs.apply_bundle")] == ["r1"]
    # a reference tool we do not have yet loads, cannot fire, and is named in a warning
    assert ps.rules[1].tools == ("credential.resolve",)
    assert any("resolve_secret" in w for w in ps.warnings)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("id: team\nrules:\n  - id: r1\n    severity: high\n", "unknown_rule_key"),
        ("id: team\nowner: me\nrules: []\n", "unknown_policy_key"),
        ("id: team\n", "bad_rules"),
        ("- id: r1\n", "policy_not_mapping"),
        ("id: team\nrules:\n  - description: no id\n", "bad_rule_id"),
        ("id: team\nrules:\n  - id: r1\n    tools: fs.read\n", "bad_tools"),
        ("id: team\nrules:\n  - id: r1\n    directives: []\n", "empty_directives"),
        ("id: team\nrules:\n  - &a {id: r1}\n", "yaml_anchor"),
        ("id: team\nid: other\nrules: []\n", "yaml_duplicate_key"),
    ],
)
def test_malformed_documents(tmp_path: Path, registry: GuardRegistry, body: str, code: str) -> None:
    write(tmp_path / "policies", "team.yaml", body)
    with pytest.raises(PolicyLoadError) as info:
        load_policies(tmp_path / "policies", registry, TOOLS)
    assert "policies/team.yaml" in info.value.message
    assert info.value.code == code, info.value.message


def test_every_problem_is_listed(tmp_path: Path, registry: GuardRegistry) -> None:
    write(
        tmp_path / "policies",
        "team.yaml",
        """
        id: team
        rules:
          - id: r1
            guard: check_nothing
            enforcement: block
          - id: r2
            enforcement: warn
        """,
    )
    with pytest.raises(PolicyLoadError) as info:
        load_policies(tmp_path / "policies", registry, TOOLS)
    problems = info.value.details["problems"]
    assert [(p["rule"], p["code"]) for p in problems] == [
        ("r1", "unknown_guard"),
        ("r2", "enforcement_without_guard"),
    ]


def test_files_load_in_name_order_whatever_order_given(
    tmp_path: Path, registry: GuardRegistry
) -> None:
    b = write(tmp_path / "p", "b.yaml", "id: b\nrules:\n  - id: b1\n  - id: b2\n")
    a = write(tmp_path / "p", "a.yaml", "id: a\nrules:\n  - id: a1\n")
    ps = load_policies([b, a], registry, TOOLS)
    assert [r.id for r in ps.rules] == ["a1", "b1", "b2"]
    assert ps.policy_ids == ("a", "b")


def test_digest_changes_with_any_rule_field(tmp_path: Path, registry: GuardRegistry) -> None:
    body = "id: t\nrules:\n  - id: r\n    guard: check_reason_not_empty\n    enforcement: {e}\n"
    write(tmp_path / "x", "t.yaml", body.format(e="warn"))
    warn = load_policies(tmp_path / "x", registry, TOOLS).digest
    write(tmp_path / "x", "t.yaml", body.format(e="block"))
    block = load_policies(tmp_path / "x", registry, TOOLS).digest
    assert warn != block
