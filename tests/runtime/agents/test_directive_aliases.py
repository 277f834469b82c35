"""A directive's ``http_request`` with ``auth_alias``: the credential is resolved when the call
is made (``AURO_SECRET_<ALIAS>``, a stored profile, a binding), sent to the API the call names
and nowhere else, and absent from every output, record and receipt.

Two real loopback servers record what reaches them; a stub model on loopback (chat completions)
drives the directive's turn.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.core.authority import parse_authority
from proctor.runtime.agents import ManagedAgent
from proctor.runtime.agents.sessions import DirectiveSession
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.home.credentials import CredentialStore
from proctor.runtime.home.credentials.aliases import resolve_alias
from tests.fuzzing import FUZZ
from tests.runtime.agent_stub import Seen, StubModel, answer, config, tool_results

DIALECT = "chat_completions"
SECRET = "alias-material-5c1e9a77d2"
DIRECTIVE = """---
id: api_call
description: Call the team API and report what it says
tools: [http_request]
category: task
---
# API call

Call the API with the alias `api_token`, then report.
"""


class Recorder:
    """A loopback HTTP server that records the Authorization header of each request."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.seen.append(self.headers.get("Authorization"))
                body = json.dumps({"ok": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/me"


@pytest.fixture
def servers() -> Iterator[tuple[Recorder, Recorder]]:
    pair = (Recorder(), Recorder())
    for server in pair:
        server.thread.start()
    yield pair
    for server in pair:
        server.server.shutdown()
        server.server.server_close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    (root / "directives").mkdir()
    (root / "directives" / "api_call.md").write_text(DIRECTIVE, encoding="utf-8")
    (root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n', encoding="utf-8")
    return root


def _run(
    ws: Path, servers: tuple[Recorder, Recorder], environ: dict[str, str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    api, other = servers

    def calls(seen: Seen) -> Any:
        return answer(
            DIALECT,
            calls=[
                ("http_request", {"url": api.url, "auth_alias": "api_token", "reason": "ask"}),
                ("http_request", {"url": other.url, "reason": "compare"}),
            ],
        )

    script = [calls, answer(DIALECT, text='{"done": true, "summary": "called"}')]
    with StubModel(script) as stub:  # type: ignore[arg-type]
        agent = ManagedAgent(config(stub, DIALECT), view="reference", sleep=lambda s: None)
        session = DirectiveSession(
            Workspace(ws),
            environ={"PROCTOR_HOME": str(ws / ".home"), **environ},
            agent_driver=agent,
        )
        try:
            envelope = session.run_directive(
                "api_call", "call the API", authority=parse_authority({"effects": "allow"})
            )
        finally:
            session.close()
            agent.close()
        results = tool_results(DIALECT, stub.seen[1])
    return envelope.to_json(), results


def _everything(ws: Path) -> str:
    texts = [p.read_bytes().decode("utf-8", "replace") for p in ws.rglob("*") if p.is_file()]
    return "\n".join(texts)


@pytest.mark.parametrize("source", ["env", "profile", "binding"])
def test_the_alias_reaches_only_the_api_the_call_names(
    ws: Path, servers: tuple[Recorder, Recorder], source: str
) -> None:
    environ: dict[str, str] = {}
    if source == "env":
        environ["AURO_SECRET_API_TOKEN"] = f"  {SECRET}\n"  # stripped, as the reference does
    elif source == "profile":
        CredentialStore(ws / ".home").set("team-api", "api_token", SECRET)
    else:
        CredentialStore(ws / ".home").set("team-api", "work", SECRET)
        (ws / ".proctor" / "credentials.json").write_text(
            json.dumps({"providers": {"api_token": "work"}}), encoding="utf-8"
        )
    doc, results = _run(ws, servers, environ)
    api, other = servers
    assert doc["outcome"] == "completed", doc
    assert [r["status"] for r in results] == ["completed", "completed"], results
    assert api.seen == [f"Bearer {SECRET}"]
    assert other.seen == [None]  # the second server got nothing
    # where it came from is recorded with the call, never the value
    expected = {"profile": None, "env": None, "binding": "work"}.get(source)
    shown = {"env": "env", "profile": "profile", "binding": "binding"}[source]
    note = results[0]["result"]["auth_source"]
    assert note["alias"] == "api_token" and note["source"] == shown
    if source != "profile":
        assert note["profile"] == expected
    assert "auth_source" not in results[1]["result"]
    assert SECRET not in json.dumps(doc)
    assert SECRET not in json.dumps(results)
    assert SECRET not in _everything(ws)  # records, receipts, audit log, packages


def test_an_unconfigured_alias_is_refused_and_nothing_is_sent(
    ws: Path, servers: tuple[Recorder, Recorder]
) -> None:
    _doc, results = _run(ws, servers, {})
    api, other = servers
    assert results[0]["status"] == "failed" or results[0]["status"] == "refused", results
    assert results[0]["error"]["code"] == "credential_not_delivered"
    assert "AURO_SECRET_API_TOKEN" in results[0]["error"]["message"]
    assert api.seen == []
    assert other.seen == [None]


def test_alias_names_are_identifiers_and_the_environment_comes_first(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "home")
    store.set("team-api", "api_token", "from-profile")
    common: dict[str, Any] = {"skill": "directive-x", "workspace_root": tmp_path, "store": store}
    for bad in ("../etc", "a b", "", "x" * 65):
        assert resolve_alias(bad, environ={}, **common) is None
    env = {"AURO_SECRET_API_TOKEN": "from-env"}
    found = resolve_alias("api_token", environ=env, **common)
    assert found is not None and found.source == "env" and found.secret.reveal() == "from-env"
    host = resolve_alias("api_token", environ=env, host_secrets={"api_token": "h"}, **common)
    assert host is not None and host.source == "host"
    stored = resolve_alias("api_token", environ={"AURO_SECRET_API_TOKEN": "  "}, **common)
    assert stored is not None and stored.source == "profile"
    assert stored.secret.reveal() == "from-profile"
    assert "from-profile" not in repr(stored)


@pytest.fixture(scope="module")
def empty_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("alias-fuzz")


@FUZZ
@given(alias=st.text(max_size=80))
def test_any_alias_text_resolves_only_as_an_identifier(empty_home: Path, alias: str) -> None:
    """Whatever the model names, nothing but an identifier is looked up, and nothing raises."""
    from proctor.runtime.home.credentials.aliases import ALIAS

    environ = {"AURO_SECRET_" + alias.upper(): "v"} if "\x00" not in alias else {}
    store = CredentialStore(empty_home / "home")
    found = resolve_alias(
        alias, skill="directive-x", workspace_root=empty_home, environ=environ, store=store
    )
    if ALIAS.match(alias):
        assert found is not None and found.source == "env"
    else:
        assert found is None
