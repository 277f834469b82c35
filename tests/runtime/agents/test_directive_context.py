"""What a directive's model and the router are shown beside their task: the reference kernel's
policy rules (its ``default.yaml`` and the ten advisory rules of ``router.yaml``, read unchanged
from its wheel) as labelled context, and ``response_format`` for the router where the dialect
has one. A stub model on loopback records each request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from proctor.runtime.agents import ManagedAgent
from proctor.runtime.agents.sessions import ROUTE_FORMAT, DirectiveSession
from proctor.runtime.boundary.workspace import Workspace
from tests.runtime.agent_stub import DIALECTS, StubModel, answer, config

pytestmark = pytest.mark.network_fetch

MEMBER_DIR = "auro_runtime/resources/policies/"


@pytest.fixture(scope="module")
def reference_policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    from tests.reference_wheel import reference_members

    files = reference_members(tmp_path_factory.mktemp("auro-wheel"), MEMBER_DIR, ".yaml")
    assert {"default.yaml", "credential_proxy.yaml", "router.yaml"} <= set(files)
    return files


@pytest.fixture
def ws(tmp_path: Path, reference_policies: dict[str, bytes]) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    (root / "policies").mkdir()
    for name, data in reference_policies.items():
        (root / "policies" / name).write_bytes(data)
    (root / "notes.txt").write_text("alpha\n", encoding="utf-8")
    return root


def _rules(data: bytes) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = yaml.safe_load(data)["rules"]
    return rules


def _system(dialect: str, body: dict[str, Any]) -> str:
    if dialect == "anthropic_messages":
        system = body["system"]
        return system if isinstance(system, str) else " ".join(b["text"] for b in system)
    if dialect == "openai_responses":
        return str(body.get("instructions") or body["input"][0]["content"])
    return str(body["messages"][0]["content"])


def _session(ws: Path, agent: ManagedAgent) -> DirectiveSession:
    return DirectiveSession(
        Workspace(ws), environ={"PROCTOR_HOME": str(ws / ".home")}, agent_driver=agent
    )


def test_a_directive_model_is_shown_the_policy_rules_labelled(
    ws: Path, reference_policies: dict[str, bytes]
) -> None:
    script = [answer("chat_completions", text='{"done": true, "summary": "ok"}')]
    with StubModel(script) as stub:  # type: ignore[arg-type]
        agent = ManagedAgent(config(stub, "chat_completions"), view="reference")
        session = _session(ws, agent)
        try:
            doc = session.run_directive("file_summary", "notes.txt").to_json()
        finally:
            session.close()
            agent.close()
        system = _system("chat_completions", stub.seen[0].body)
    assert doc["outcome"] == "completed", doc
    assert "## Policy rules (context" in system
    router = _rules(reference_policies["router.yaml"])
    assert len(router) == 10
    for rule in router:  # advisory: text only, said so
        assert f"- **{rule['id']}** (advisory): {rule['description']}" in system
    for rule in _rules(reference_policies["default.yaml"]):
        kind = "enforced" if rule.get("guard") and rule.get("enforcement") != "advisory" else ""
        assert f"- **{rule['id']}** ({kind or 'advisory'}): " in system
        assert " ".join(str(rule["description"]).split()) in " ".join(system.split())


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_router_is_shown_the_router_rules_and_asked_for_its_format(
    ws: Path, reference_policies: dict[str, bytes], dialect: str
) -> None:
    decision = '{"decision": "single", "directive_id": "file_summary", "reason": "it reads"}'
    with StubModel([answer(dialect, text=decision)]) as stub:
        agent = ManagedAgent(config(stub, dialect), view="reference")
        session = _session(ws, agent)
        try:
            route = session.route("summarise notes.txt", agent)
        finally:
            session.close()
            agent.close()
        body = stub.seen[0].body
    assert route.decision == "single" and route.directive_id == "file_summary"
    system = _system(dialect, body)
    assert "# Router policy (context" in system
    for rule in _rules(reference_policies["router.yaml"]):
        assert f"- **{rule['id']}**: {rule['description']}" in system
    if dialect == "chat_completions":
        wanted = body["response_format"]
        assert wanted["type"] == "json_schema" and wanted["json_schema"]["schema"] == ROUTE_FORMAT
    elif dialect == "openai_responses":
        assert body["text"]["format"]["schema"] == ROUTE_FORMAT
    else:  # the Messages API has no such field: asked in prose only
        assert "response_format" not in body and "text" not in body
