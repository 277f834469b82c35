"""Real files no one here wrote: the reference kernel's shipped policies, read unchanged.

The wheel ``auro-runtime==0.1.0`` is downloaded with pip into a temporary folder (never vendored
into this repository); its ``resources/policies/*.yaml`` are copied byte for byte into a
workspace's ``policies/`` and loaded with proctor's loader and the shipped guards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.policy import (
    GuardRegistry,
    check_workspace_policies,
    evaluate,
    load_policies,
    load_workspace_policies,
)
from tests.policy.conftest import TOOLS, ctx
from tests.reference_wheel import reference_members

pytestmark = pytest.mark.network_fetch

MEMBER_DIR = "auro_runtime/resources/policies/"


@pytest.fixture(scope="session")
def reference_policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """``{file name: bytes}`` of the reference wheel's shipped policy files."""
    files = reference_members(tmp_path_factory.mktemp("auro-wheel"), MEMBER_DIR, ".yaml")
    assert set(files) >= {"default.yaml", "credential_proxy.yaml"}, sorted(files)
    return files


@pytest.fixture
def workspace(tmp_path: Path, reference_policies: dict[str, bytes]) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    for name, data in reference_policies.items():
        (folder / name).write_bytes(data)
    return tmp_path


def test_their_files_alone_load_with_their_enforceable_rules(workspace: Path) -> None:
    reg = GuardRegistry.with_shipped()
    ps = load_policies(workspace / "policies", reg, TOOLS)
    assert {"default", "credential_proxy"} <= set(ps.policy_ids)
    assert sorted(r.id for r in ps.enforceable) == [
        "log_actions",
        "no_bulk_writes",
        "no_delete_without_confirm",
        "no_hardcoded_secrets",
        "no_secrets_in_logs",
        "sensitive_paths",
        "write_budget",
    ]
    # their write_file scope covers every tool of ours that writes a file
    bulk = ps.rule("no_bulk_writes")
    assert bulk is not None and bulk.tools == ("fs.write", "fs.edit", "fs.apply_bundle")


def test_their_blocking_rules_refuse_a_sensitive_path(workspace: Path) -> None:
    reg = GuardRegistry.with_shipped()
    ps = load_policies(workspace / "policies", reg, TOOLS)
    env_path = workspace / ".env"
    env_path.write_text("TOKEN=x\n", encoding="utf-8")
    decision = evaluate(ps, ctx("fs.read", {"path": ".env"}), reg)
    assert not decision.allowed
    assert decision.refusal is not None
    assert decision.refusal.rule.id == "sensitive_paths"
    assert decision.refusal.verdict.code == "sensitive_path"
    assert evaluate(ps, ctx("fs.read", {"path": "notes.txt"}), reg).allowed


def test_their_blocking_rules_refuse_a_raw_credential_in_headers(workspace: Path) -> None:
    reg = GuardRegistry.with_shipped()
    ps = load_policies(workspace / "policies", reg, TOOLS)
    call = {"method": "GET", "url": "https://api.example.com/", "headers": {"X-Api-Key": "k1"}}
    decision = evaluate(ps, ctx("http.request", call), reg)
    assert decision.refusal is not None
    assert decision.refusal.rule.id == "no_hardcoded_secrets"
    assert decision.refusal.verdict.code == "raw_credential"
    clean = {"method": "GET", "url": "https://api.example.com/", "auth_alias": "svc"}
    assert evaluate(ps, ctx("http.request", clean), reg).allowed


def test_beside_the_shipped_set_under_the_default_profile(workspace: Path) -> None:
    loaded = load_workspace_policies(workspace, tools=TOOLS, environ={})
    assert loaded.profile == "default" and not loaded.drift.drifted
    assert "sensitive_paths" in loaded.drift.extra
    refused = evaluate(loaded.enforced, ctx("fs.read", {"path": ".env"}), loaded.registry)
    assert refused.refusal is not None and refused.refusal.verdict.code == "sensitive_path"
    findings = check_workspace_policies(workspace, tools=TOOLS, environ={})
    assert [f.code for f in findings if f.severity == "error"] == []
