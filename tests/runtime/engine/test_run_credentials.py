"""Credentials in the driver, in process: host handles across a pause, the session's home."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ResumeRefused
from proctor.runtime.home.credentials import CredentialStore
from tests.runtime.driver_support import (
    approve,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

RUN_YAML = """minimum_proctor: 0.1.0
credentials:
  api:
    provider: canary
    auth:
      api_key: {delivery: {env: CANARY_TOKEN}}
methods:
  main:
    inputs:
      type: object
      properties: {url: {type: string}}
      required: [url]
    steps:
      - id: confirm
        ask: {reason: Send it?}
      - id: send
        tool: http.request
        credential: api
        reason: deliver
        inputs: {method: GET, url: $input.url}
"""


@pytest.fixture
def echo() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "canary", RUN_YAML)
    (root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    return root


def test_host_handles_are_per_command_and_a_resume_needs_them_again(
    ws: Path, echo: tuple[str, list[str]]
) -> None:
    url, seen = echo
    s = session(ws)
    env = s.run("canary", inputs={"url": url}, cwd=ws, request_secrets={"api": "first-handle"})
    assert env.status == "needs_approval"
    before = s.store.get_run(env.run_id or "")
    # without the handle, the resume is refused and nothing is sent; the run still waits
    with pytest.raises(ResumeRefused) as refused:
        session(ws).resume(env.run_id or "", approve(env))
    assert refused.value.code == "needs_credential"
    assert seen == []
    after = s.store.get_run(env.run_id or "")
    assert before is not None and after is not None and after.status == before.status
    assert "first-handle" not in json.dumps(after.data)
    done = session(ws).resume(
        env.run_id or "", approve(env), request_secrets={"api": "second-handle"}
    )
    assert done.outcome == "completed", done.refusal
    assert seen == ["Bearer second-handle"]


def test_profiles_come_from_the_sessions_home(ws: Path, echo: tuple[str, list[str]]) -> None:
    url, seen = echo
    CredentialStore(ws / ".home").set("canary", "work", "home-material")
    CredentialStore(ws / ".home").bind_package("work", "local:skills/canary")
    s = session(ws)  # PROCTOR_HOME=ws/.home in the session's environment only
    env = s.run("canary", inputs={"url": url}, cwd=ws)
    done = s.resume(env.run_id or "", approve(env))
    assert done.outcome == "completed", done.refusal
    assert seen == ["Bearer home-material"]


SEND_ONLY = RUN_YAML.replace(
    """      - id: confirm
        ask: {reason: Send it?}
""",
    "",
)


def test_an_unbound_profile_goes_to_no_package_and_a_bound_one_to_its_own(
    ws: Path, echo: tuple[str, list[str]]
) -> None:
    """A profile stored without an audience: the first package is refused until a person binds
    it; a second package with the same name and provider is refused and nothing reaches the
    server carrying the material."""
    url, seen = echo
    make_skill(ws, "first", SEND_ONLY)
    other = ws / "team" / "first"  # the same frontmatter name, another folder
    other.mkdir(parents=True)
    for name in ("SKILL.md", "run.yaml"):
        (other / name).write_text((ws / "skills" / "first" / name).read_text())
    home = CredentialStore(ws / ".home")
    home.set("canary", "work", "unbound-material-7f3a")
    refused = session(ws).run("first", inputs={"url": url}, cwd=ws)
    assert refused.outcome != "completed"
    assert refused.refusal is not None and refused.refusal.code == "credential_unbound"
    assert "proctor credential bind work local:skills/first" in refused.refusal.message
    assert seen == []
    home.bind_package("work", "local:skills/first")
    done = session(ws).run("first", inputs={"url": url}, cwd=ws)
    assert done.outcome == "completed", done.refusal
    assert seen == ["Bearer unbound-material-7f3a"]
    stolen = session(ws).run(str(other), inputs={"url": url}, cwd=ws)
    assert stolen.refusal is not None and stolen.refusal.code == "credential_unbound"
    # a workspace binding naming the profile for the provider does not widen it either
    (ws / ".proctor" / "credentials.json").write_text('{"providers": {"canary": "work"}}')
    again = session(ws).run(str(other), inputs={"url": url}, cwd=ws)
    assert again.refusal is not None and again.refusal.code == "credential_unbound"
    assert seen == ["Bearer unbound-material-7f3a"]  # one request, from the bound package only
    assert "unbound-material-7f3a" not in json.dumps(stolen.to_json())
