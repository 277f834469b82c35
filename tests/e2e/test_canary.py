"""The canary claim, end to end: a credential reaches the wire and nothing else.

A unique secret is delivered through each resolution path (``--profile``, a project binding,
the provider default, a host handle through the Python API, the process environment, the
workspace ``.env``) to an ``http.request`` step against a loopback server that echoes the
``Authorization`` header back in its body. The server must really receive the secret, and the
secret must appear in none of: stdout, stderr, the envelope, the audit log, the run store
(the SQLite file and its WAL, as bytes), the receipts.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.e2e.canary_support import PATHS, arrange, leaks, store_profile
from tests.e2e.conftest import Result, Ws
from tests.receipt_files import stored

SKILL_MD = """---
name: canary
description: Sends one request with a declared credential.
---
# canary

Calls a URL with the `api` credential in its Authorization header.
"""

RUN_YAML = """minimum_proctor: 0.1.0
credentials:
  api:
    provider: canary
    auth:
      api_key: {delivery: {env: CANARY_TOKEN}}
methods:
  call:
    description: Call the URL with the credential.
    inputs:
      type: object
      properties:
        url: {type: string}
      required: [url]
      additionalProperties: false
    steps:
      - id: send
        tool: http.request
        credential: api
        reason: prove delivery
        inputs: {method: GET, url: $input.url, auth: {credential: api}}
  paused:
    description: Ask first, then call the URL with the credential.
    inputs:
      type: object
      properties:
        url: {type: string}
      required: [url]
      additionalProperties: false
    steps:
      - id: confirm
        ask: {reason: Send it?}
      - id: send
        tool: http.request
        credential: api
        reason: prove delivery after a pause
        inputs: {method: GET, url: $input.url, auth: {credential: api}}
  raw:
    description: Paste a token into a header (refused).
    inputs:
      type: object
      properties:
        url: {type: string}
      required: [url]
      additionalProperties: false
    steps:
      - id: send
        tool: http.request
        reason: a pasted token
        inputs:
          method: GET
          url: $input.url
          headers: {Authorization: "Bearer pasted-token-0123456789abcdef"}
  raw_key:
    description: Paste a key into an API-key header (refused).
    inputs:
      type: object
      properties:
        url: {type: string}
      required: [url]
      additionalProperties: false
    steps:
      - id: send
        tool: http.request
        reason: a pasted key
        inputs:
          method: GET
          url: $input.url
          headers: {X-Api-Key: "pasted-key"}
"""

HOST_SCRIPT = """
import json, sys
from pathlib import Path
from proctor.runtime.engine.session import Session
from proctor.runtime.boundary.workspace import Workspace

secret = sys.stdin.read()
session = Session(Workspace.discover(Path.cwd()))
try:
    envelope = session.run("canary#call", inputs={"url": sys.argv[1]},
                           request_secrets={"api": secret})
    # while the session is open the run store's WAL file is live: grep it (and all the rest)
    live = {p.name: secret.encode() in p.read_bytes()
            for p in (Path.cwd() / ".proctor").rglob("*") if p.is_file()}
finally:
    session.close()
print(json.dumps({"envelope": envelope.to_json(), "live": live}))
"""


@dataclass
class Echo:
    """A loopback server that answers with the Authorization header it received."""

    url: str
    seen: list[str] = field(default_factory=list)
    connections: list[int] = field(default_factory=list)


@pytest.fixture
def echo() -> Iterator[Echo]:
    state = Echo(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            value = self.headers.get("Authorization", "")
            state.seen.append(value)
            body = json.dumps({"authorization": value}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def verify_request(self, request: Any, client_address: Any) -> bool:
            state.connections.append(1)
            return True

    server = Server(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/echo"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _workspace(ws: Ws) -> None:
    folder = ws.root / "skills" / "canary"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "run.yaml").write_text(RUN_YAML)
    (ws.root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')


def _run(ws: Ws, echo: Echo, *extra: str, env: dict[str, str] | None = None) -> Result:
    return ws.proctor("run", "canary#call", "-i", f"url={echo.url}", "--json", *extra, env=env)


def _host_run(ws: Ws, echo: Echo, secret: str) -> Result:
    proc = subprocess.run(
        [sys.executable, "-c", HOST_SCRIPT, echo.url],
        cwd=ws.root,
        env=ws.env,
        input=secret,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("path", PATHS)
def test_canary_reaches_the_server_and_no_output(ws: Ws, echo: Echo, path: str) -> None:
    _workspace(ws)
    secret = "canary-" + secrets.token_hex(16)
    decoy = "decoy-" + secrets.token_hex(16)
    env: dict[str, str] = {}
    extra = arrange(ws, path, "canary", secret, decoy, env)
    if path == "host":
        result = _host_run(ws, echo, secret)
        assert result.code == 0, result.stdout + result.stderr
        envelope, live = result.json()["envelope"], result.json()["live"]
        assert "runs.sqlite-wal" in live, sorted(live)
        assert not any(live.values()), live
    else:
        result = _run(ws, echo, *extra, env=env)
        assert result.code == 0, result.stdout + result.stderr
        envelope = result.json()
    assert (envelope["status"], envelope["outcome"]) == ("sealed", "completed")
    # delivery works: the server got exactly this secret, once
    assert echo.seen == [f"Bearer {secret}"]
    # the echoed header came back scrubbed
    assert "[REDACTED:tainted]" in envelope["result"]["body"]
    # ... and the secret is nowhere else
    assert leaks(ws, result, secret) == []
    assert (ws.root / ".proctor" / "runs.sqlite").is_file()
    # the run store names where it came from, never the value
    from proctor.runtime.records.sqlite import SQLiteRunStore

    store = SQLiteRunStore(ws.root / ".proctor" / "runs.sqlite")
    try:
        record = store.get_run(envelope["run_id"])
    finally:
        store.close()
    assert record is not None
    [chosen] = record.data["credentials"]
    expected = {"profile": "chosen", "binding": "bound", "default": "only"}.get(path)
    assert chosen["source"] == path and chosen["profile"] == expected
    # the egress allow-list is part of the recorded authority
    assert record.data["authority"]["egress"] == {"hosts": [], "networks": ["127.0.0.1/32"]}
    verified = ws.proctor("verify", envelope["receipt_id"], "--json")
    assert verified.code == 0, verified.stdout + verified.stderr


def test_missing_credential_needs_setup_and_sends_nothing(ws: Ws, echo: Echo) -> None:
    _workspace(ws)
    result = _run(ws, echo)
    envelope = result.json()
    assert envelope["status"] == "needs_credential"
    assert envelope["outcome"] is None and envelope["receipt_id"] is None
    assert envelope["trace"] == []
    [request] = envelope["requests"]
    command = (
        "printf '%s' \"$CANARY_TOKEN\" | proctor credential set canary --profile api --from-stdin"
    )
    assert request["kind"] == "credential" and request["credential"] == "api"
    assert request["modes"] == {"api_key": "CANARY_TOKEN"}
    assert request["setup"] == [command]
    assert f"run: {command}" in envelope["notes"]
    assert echo.connections == []
    # the run record says no step ran, and nothing was sealed
    from proctor.runtime.records.sqlite import SQLiteRunStore

    store = SQLiteRunStore(ws.root / ".proctor" / "runs.sqlite")
    try:
        record = store.get_run(envelope["run_id"])
        assert record is not None
        assert (record.status, record.outcome, record.receipt_id) == (
            "needs_credential", None, None,
        )  # fmt: skip
        assert record.data["steps_run"] == 0
        assert store.calls(envelope["run_id"]) == []
    finally:
        store.close()
    assert not stored(ws.root / ".proctor" / "receipts")
    # setting it up as told makes the same command work
    secret = "canary-" + secrets.token_hex(16)
    setup = subprocess.run(
        ["sh", "-c", command.replace("proctor", f"{sys.executable} -m proctor", 1)],
        cwd=ws.root,
        env={**ws.env, "CANARY_TOKEN": secret},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert setup.returncode == 0, setup.stderr
    # a profile stored without an audience is given to no package until a person binds it
    unbound = _run(ws, echo).json()
    assert unbound["refusal"]["code"] == "credential_unbound", unbound
    assert "proctor credential bind api local:skills/canary" in unbound["refusal"]["message"]
    assert echo.connections == []
    bound = ws.proctor("credential", "bind", "api", "local:skills/canary", "--yes")
    assert bound.code == 0, bound.stderr
    again = _run(ws, echo)
    assert again.json()["outcome"] == "completed", again.stdout
    assert echo.seen == [f"Bearer {secret}"]


def test_human_output_shows_the_setup_command(ws: Ws, echo: Echo) -> None:
    _workspace(ws)
    result = ws.proctor("run", "canary#call", "-i", f"url={echo.url}")
    assert "needs_credential" in result.stdout
    assert "proctor credential set canary --profile api --from-stdin" in result.stdout
    assert echo.connections == []


@pytest.mark.parametrize(
    ("method", "pasted", "code", "rule"),
    [
        # a bearer token is caught first by its shape, before the header check
        ("raw", "pasted-token-0123456789abcdef", "secret_detected", "proctor.no_secrets_in_args"),
        ("raw_key", "pasted-key", "raw_credential", "proctor.no_raw_credentials"),
    ],
)
def test_raw_token_in_a_header_is_refused_and_nothing_is_sent(
    ws: Ws, echo: Echo, method: str, pasted: str, code: str, rule: str
) -> None:
    _workspace(ws)
    result = ws.proctor("run", f"canary#{method}", "-i", f"url={echo.url}", "--json")
    assert result.code == 1, result.stdout + result.stderr
    envelope = result.json()
    assert envelope["outcome"] == "blocked"
    assert (envelope["refusal"]["code"], envelope["refusal"]["rule_id"]) == (code, rule)
    assert echo.connections == [] and echo.seen == []
    assert leaks(ws, result, pasted) == []


def test_ambiguous_environment_blocks_before_any_step(ws: Ws, echo: Echo) -> None:
    _workspace(ws)
    folder = ws.root / "skills" / "canary"
    text = (
        (folder / "run.yaml")
        .read_text()
        .replace(
            "      api_key: {delivery: {env: CANARY_TOKEN}}\n",
            "      api_key: {delivery: {env: CANARY_TOKEN}}\n"
            "      bearer: {delivery: {env: CANARY_BEARER}}\n",
        )
    )
    (folder / "run.yaml").write_text(text)
    secret = "canary-" + secrets.token_hex(16)
    result = _run(ws, echo, env={"CANARY_TOKEN": secret, "CANARY_BEARER": secret + "b"})
    envelope = result.json()
    assert (envelope["status"], envelope["outcome"]) == ("sealed", "blocked")
    assert envelope["refusal"]["code"] == "credential_ambiguous"
    assert echo.connections == []
    assert leaks(ws, result, secret) == []


def test_skill_inspect_reports_readiness_without_material(ws: Ws, echo: Echo) -> None:
    _workspace(ws)
    missing = ws.proctor("skill", "inspect", "canary", "--json")
    assert missing.code == 0, missing.stderr
    doc = missing.json()
    assert doc["name"] == "canary" and doc["ready"] is False
    assert set(doc["methods"]) == {"call", "paused", "raw", "raw_key"}
    assert doc["methods"]["call"]["inputs"]["required"] == ["url"]
    [entry] = doc["credentials"]
    assert (entry["credential"], entry["ready"], entry["problem"]) == (
        "api", False, "credential_missing",
    )  # fmt: skip
    assert entry["modes"] == {"api_key": "CANARY_TOKEN"}
    assert entry["setup"]
    secret = "canary-" + secrets.token_hex(16)
    store_profile(ws, "work", secret, "canary")
    ready = ws.proctor("skill", "inspect", "canary", "--json")
    [entry] = ready.json()["credentials"]
    assert (entry["ready"], entry["source"], entry["profile"]) == (True, "default", "work")
    human = ws.proctor("skill", "inspect", "canary")
    assert "ready" in human.stdout and "work" in human.stdout
    assert secret not in ready.stdout + human.stdout + ready.stderr + human.stderr


def test_a_pause_keeps_the_profile_name_and_resume_uses_the_rotated_material(
    ws: Ws, echo: Echo
) -> None:
    _workspace(ws)
    old = "canary-" + secrets.token_hex(16)
    new = "canary-" + secrets.token_hex(16)
    store_profile(ws, "chosen", old, "canary")
    store_profile(ws, "other", "decoy-" + secrets.token_hex(16), "canary")  # the default
    paused = ws.proctor(
        "run", "canary#paused", "-i", f"url={echo.url}", "--profile", "chosen", "--json"
    )
    envelope = paused.json()
    assert envelope["status"] == "needs_approval", paused.stdout + paused.stderr
    assert echo.connections == []
    # the checkpoint holds the profile name, never the material
    assert leaks(ws, paused, old) == []
    from proctor.runtime.records.sqlite import SQLiteRunStore

    store = SQLiteRunStore(ws.root / ".proctor" / "runs.sqlite")
    try:
        record = store.get_run(envelope["run_id"])
    finally:
        store.close()
    assert record is not None and record.data["credential_profile"] == "chosen"
    store_profile(ws, "chosen", new, "canary")  # rotate while the run waits
    answers = envelope["answers_template"]
    for entry in answers["approvals"].values():
        entry["approved"] = True
    done = ws.proctor("resume", envelope["run_id"], "-", "--json", stdin=json.dumps(answers))
    assert done.code == 0, done.stdout + done.stderr
    assert done.json()["outcome"] == "completed"
    assert echo.seen == [f"Bearer {new}"]
    assert leaks(ws, done, new) == [] and leaks(ws, done, old) == []
