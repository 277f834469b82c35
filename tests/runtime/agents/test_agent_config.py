"""Agent configuration, the pinned model client, and the agent tools."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from proctor.errors import AgentError, ConfigError, EgressRefused
from proctor.runtime.admission.governor import CallSpec
from proctor.runtime.agents import ManagedAgent, ModelClient
from proctor.runtime.agents.chat_completions import ChatCompletions
from proctor.runtime.home.config import (
    agent_config,
    load_config,
    set_agent_value,
    unset_agent_value,
)
from proctor.runtime.home.credentials.store import CredentialStore
from tests.runtime.agent_stub import StubModel, answer, config, governed

# -- configuration -----------------------------------------------------------------------------


def test_set_keeps_the_rest_of_config_json_and_writes_it_private(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"credentials": {"profiles": {}}}))
    set_agent_value("agent.provider", "openai", home=tmp_path)
    set_agent_value("agent.model", "gpt-test", home=tmp_path)
    set_agent_value("agent.timeout_s", "12.5", home=tmp_path)
    document = load_config(tmp_path)
    assert document["credentials"] == {"profiles": {}}
    assert document["agent"] == {"provider": "openai", "model": "gpt-test", "timeout_s": 12.5}
    mode = (tmp_path / "config.json").stat().st_mode
    assert not mode & (stat.S_IRWXG | stat.S_IRWXO)
    unset_agent_value("agent.timeout_s", home=tmp_path)
    assert "timeout_s" not in load_config(tmp_path)["agent"]


@pytest.mark.parametrize(
    ("key", "value", "code"),
    [
        ("agent.color", "blue", "config_key_unknown"),
        ("model", "x", "config_key_unknown"),
        ("agent.dialect", "soap", "agent_dialect_unknown"),
        ("agent.endpoint_url", "ftp://host/v1", "agent_endpoint_invalid"),
        ("agent.endpoint_url", "https://user:pw@host/v1", "config_value_secret"),
        ("agent.endpoint_url", "https://host/v1?key=1", "agent_endpoint_invalid"),
        ("agent.secret", "../../etc", "config_value_invalid"),
        ("agent.max_retries", "99", "config_value_invalid"),
        ("agent.model", "sk-proj-" + "Ab1" * 20, "config_value_secret"),
        ("agent.secret", "ghp_" + "a1B2" * 9, "config_value_secret"),
    ],
)
def test_bad_settings_are_refused_and_nothing_is_written(
    tmp_path: Path, key: str, value: str, code: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        set_agent_value(key, value, home=tmp_path)
    assert caught.value.code == code
    assert not (tmp_path / "config.json").exists()
    if code == "config_value_secret":
        assert value not in caught.value.message


@pytest.mark.parametrize(
    ("section", "code"),
    [
        ({}, "agent_provider_missing"),
        ({"provider": "openai", "secret": "p"}, "agent_model_missing"),
        ({"provider": "ollama", "model": "m"}, "agent_dialect_missing"),
        (
            {"provider": "ollama", "model": "m", "dialect": "chat_completions"},
            "agent_endpoint_missing",
        ),
        ({"provider": "anthropic", "model": "m"}, "agent_secret_missing"),
        (
            {
                "provider": "x",
                "model": "m",
                "dialect": "chat_completions",
                "secret": "p",
                "endpoint_url": "http://models.example.com/v1",
            },
            "agent_endpoint_insecure",
        ),
    ],
)
def test_an_incomplete_configuration_is_refused_naming_what_is_missing(
    section: dict[str, Any], code: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        agent_config(section=section)
    assert caught.value.code == code


def test_known_providers_fill_dialect_and_endpoint_but_never_the_model() -> None:
    cfg = agent_config(section={"provider": "anthropic", "model": "m", "secret": "p"})
    assert (cfg.dialect, cfg.endpoint_url) == ("anthropic_messages", "https://api.anthropic.com/v1")
    cfg = agent_config(section={"provider": "openai", "model": "m", "secret": "p"})
    assert cfg.dialect == "openai_responses"
    local = agent_config(
        section={
            "provider": "ollama",
            "model": "m",
            "dialect": "chat_completions",
            "endpoint_url": "http://127.0.0.1:11434/v1/",
            "secret": "p",
        }
    )
    assert local.endpoint_url == "http://127.0.0.1:11434/v1"


def test_from_home_reads_the_key_from_its_credential_profile(tmp_path: Path) -> None:
    key = "profile-stored-key-31415926"
    CredentialStore(tmp_path).set("local", "model-key", key)
    with StubModel([answer("chat_completions", text='{"ok": true}')]) as stub:
        for k, v in (
            ("agent.provider", "local"),
            ("agent.dialect", "chat_completions"),
            ("agent.endpoint_url", stub.url),
            ("agent.model", "m"),
            ("agent.secret", "model-key"),
        ):
            set_agent_value(k, v, home=tmp_path)
        agent = ManagedAgent.from_home(tmp_path)
        agent.complete("system", "user")
    assert stub.seen[0].headers["authorization"] == f"Bearer {key}"
    assert key not in (tmp_path / "config.json").read_text()


# -- the pinned client -------------------------------------------------------------------------


def test_the_client_refuses_every_origin_but_the_endpoint_and_sends_nothing() -> None:
    with StubModel([answer("chat_completions", text="{}")]) as stub:
        client = ModelClient(stub.url, sleep=lambda s: None)
        for url in (
            f"http://127.0.0.2:{stub.server.server_address[1]}/v1/chat/completions",
            f"{stub.base}/other/chat/completions",
            f"https://127.0.0.1:{stub.server.server_address[1]}/v1/x",
        ):
            with pytest.raises(EgressRefused) as caught:
                client._check_origin(httpx.URL(url))
            assert caught.value.code == "model_endpoint_only"
        assert stub.seen == []


def test_the_endpoint_host_is_resolved_once_and_only_that_address_is_dialled() -> None:
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    with StubModel([answer("chat_completions", text="{}")]) as stub:
        port = stub.server.server_address[1]
        client = ModelClient(f"http://model.test:{port}/v1", resolver=resolver)
        dialect = ChatCompletions("m")
        dialect.begin("s", "u", [])
        for _ in range(3):
            client.post(dialect.path, dialect.body(), {}, dialect.error_message)
    assert lookups == ["model.test"]
    assert [s.headers["host"] for s in stub.seen] == [f"model.test:{port}"] * 3


def test_an_unresolvable_endpoint_fails_before_any_request() -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    with pytest.raises(AgentError) as caught:
        ModelClient("https://nowhere.test/v1", resolver=resolver)
    assert caught.value.code == "provider_unreachable"


def test_the_model_endpoint_exemption_does_not_reach_tools(tmp_path: Path) -> None:
    g = governed(tmp_path)
    with StubModel([answer("chat_completions", text="{}")]) as stub:
        ManagedAgent(config(stub, "chat_completions"))  # built: the endpoint is "allowed"
        outcome = g.call(
            CallSpec(
                tool="http.request",
                args={"method": "GET", "url": stub.url + "/models"},
                allowance=frozenset({"http.request"}),
                step_id="s",
                reason="probe",
            )
        )
    g.session.close()
    assert outcome.status == "refused"
    assert outcome.code == "egress_refused"
    assert stub.seen == []


# -- agent tools -------------------------------------------------------------------------------


def spec(tool: str, **args: Any) -> CallSpec:
    return CallSpec(tool=tool, args=args, allowance=frozenset({tool}), step_id="s", reason="r")


def test_tool_list_and_directive_tools_answer_through_admission(tmp_path: Path) -> None:
    (tmp_path / "directives").mkdir()
    (tmp_path / "directives" / "mine.md").write_text(
        "---\nid: mine\ndescription: Mine\ntools: [read_file]\n---\n# Mine\n## Purpose\n## Steps\n"
    )
    (tmp_path / "directives" / "bad.md").write_text("---\nid: worse\ndescription: d\n---\nb\n")
    g = governed(tmp_path)
    listed = g.call(spec("tool.list", include_args=True))
    names = {t["name"]: t for t in listed.result["tools"]}
    assert {"tool.list", "directive.list", "directive.validate", "credential.resolve"} <= set(names)
    assert "path (string)" in names["fs.read"]["args_summary"]
    directives = g.call(spec("directive.list", category="task")).result
    assert "mine" in [d["id"] for d in directives["directives"]]
    assert {"file": "directives/bad.md", "code": "directive_id_mismatch"} in directives["refused"]
    good = g.call(spec("directive.validate", path="directives/mine.md")).result
    assert good["valid"] is True and good["warnings"] == []
    bad = g.call(spec("directive.validate", path="directives/bad.md")).result
    assert bad["valid"] is False and bad["errors"][0]["code"] == "directive_id_mismatch"
    outside = g.call(spec("directive.validate", path="../elsewhere.md"))
    assert outside.status == "refused"
    g.session.close()


def test_credential_resolve_never_returns_the_value(tmp_path: Path, monkeypatch: Any) -> None:
    home = tmp_path / "home"
    secret = "resolve-me-not-9f8e7d6c5b4a"
    CredentialStore(home).set("github", "gh", secret)
    monkeypatch.setenv("PROCTOR_HOME", str(home))
    g = governed(tmp_path)
    found = g.call(spec("credential.resolve", alias="gh"))
    missing = g.call(spec("credential.resolve", alias="nope"))
    g.session.close()
    assert found.result == {"alias": "gh", "resolved": True, "provider": "github"}
    assert missing.result["resolved"] is False
    audit = (tmp_path / ".proctor" / "audit.jsonl").read_text()
    assert secret not in json.dumps(found.result) + audit
