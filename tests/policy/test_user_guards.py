"""User guards: registered by name from a module the workspace names in its config."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from proctor.errors import ConfigError, PolicyLoadError
from proctor.policy import (
    default_registry,
    evaluate,
    load_workspace_policies,
    read_guard_files,
    trusting,
)
from proctor.policy.user_guards import GuardTrust, guard_modules
from tests.policy.conftest import TOOLS, ctx, write

GUARD_MODULE = """
from proctor.policy import GuardVerdict, register_guard


@register_guard("no_shouting")
def no_shouting(ctx):
    message = ctx.args.get("message", "")
    if message.isupper():
        return GuardVerdict(False, "no shouting", code="shouting")
    return None
"""

RULE = """
id: team
rules:
  - id: team.no_shouting
    guard: no_shouting
    enforcement: block
    on_error: fail_closed
    tools: [echo]
"""


def _trusted(ws: Path) -> GuardTrust:
    """A trust of the guard files as they are now: the test reviewed them."""
    return trusting(read_guard_files(ws).digest)


def _workspace(ws: Path, config_name: str = "proctor.toml", ref: str = "guards/team.py") -> None:
    (ws / "guards").mkdir(parents=True, exist_ok=True)
    (ws / "guards" / "team.py").write_text(textwrap.dedent(GUARD_MODULE), encoding="utf-8")
    config = ws / config_name
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[policy]\nguards = "{ref}"\n', encoding="utf-8")
    write(ws / "policies", "team.yaml", RULE)


@pytest.mark.parametrize(
    ("config_name", "ref"),
    [("proctor.toml", "guards/team.py"), (".proctor/config", "guards.team")],
)
def test_user_guard_loads_and_enforces(tmp_path: Path, config_name: str, ref: str) -> None:
    _workspace(tmp_path, config_name, ref)
    loaded = load_workspace_policies(tmp_path, tools=TOOLS, environ={}, trust=_trusted(tmp_path))
    assert loaded.user_guards == ("no_shouting",)
    refused = evaluate(loaded.enforced, ctx("echo", {"message": "HELLO"}), loaded.registry)
    assert refused.refusal is not None and refused.refusal.verdict.code == "shouting"
    assert evaluate(loaded.enforced, ctx("echo", {"message": "hello"}), loaded.registry).allowed
    # the process-wide registry is untouched
    assert "no_shouting" not in default_registry()


def test_two_loads_do_not_share_guards_through_module_caching(tmp_path: Path) -> None:
    _workspace(tmp_path)
    first = load_workspace_policies(tmp_path, tools=TOOLS, environ={}, trust=_trusted(tmp_path))
    second = load_workspace_policies(tmp_path, tools=TOOLS, environ={}, trust=_trusted(tmp_path))
    assert "no_shouting" in first.registry and "no_shouting" in second.registry
    assert first.registry is not second.registry


def test_rule_naming_a_user_guard_without_the_config_fails_to_load(tmp_path: Path) -> None:
    write(tmp_path / "policies", "team.yaml", RULE)
    with pytest.raises(PolicyLoadError) as info:
        load_workspace_policies(tmp_path, tools=TOOLS, environ={})
    assert info.value.code == "unknown_guard"


def test_user_module_may_not_replace_a_shipped_guard(tmp_path: Path) -> None:
    _workspace(tmp_path)
    (tmp_path / "guards" / "team.py").write_text(
        "from proctor.policy import register_guard\n"
        "@register_guard('check_sensitive_paths')\n"
        "def weaker(ctx):\n    return None\n",
        encoding="utf-8",
    )
    with pytest.raises(PolicyLoadError) as info:
        load_workspace_policies(tmp_path, tools=TOOLS, environ={}, trust=_trusted(tmp_path))
    assert info.value.code == "duplicate_guard"


@pytest.mark.parametrize(
    ("config", "code"),
    [
        ('[policy]\nguards = "../outside.py"\n', "bad_guard_module"),
        ('[policy]\nguards = "missing.py"\n', "bad_guard_module"),
        ('[policy]\nguard = "guards/team.py"\n', "bad_config"),
        ("[policy]\nguards = 3\n", "bad_config"),
        ("[policy\n", "bad_config"),
    ],
)
def test_bad_config_refuses(tmp_path: Path, config: str, code: str) -> None:
    ws = tmp_path / "ws"
    _workspace(ws)
    (tmp_path / "outside.py").write_text("raise SystemExit('must never run')\n", encoding="utf-8")
    (ws / "proctor.toml").write_text(config, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_workspace_policies(ws, tools=TOOLS, environ={})
    assert info.value.code == code


def test_a_module_that_raises_is_a_config_error(tmp_path: Path) -> None:
    _workspace(tmp_path)
    (tmp_path / "guards" / "team.py").write_text("1 / 0\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_workspace_policies(tmp_path, tools=TOOLS, environ={}, trust=_trusted(tmp_path))
    assert info.value.code == "guard_module_failed"


def test_two_config_files_naming_different_modules_refuse(tmp_path: Path) -> None:
    _workspace(tmp_path)
    (tmp_path / ".proctor").mkdir()
    (tmp_path / ".proctor" / "config").write_text('[policy]\nguards = "x.py"\n', encoding="utf-8")
    with pytest.raises(ConfigError):
        guard_modules(tmp_path)
