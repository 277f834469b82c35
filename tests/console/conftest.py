"""A real console on a loopback port, over a real workspace with paused runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from proctor.core.authority import parse_authority

SKILL = """---
name: pages
description: Write a page once a person approves; ask which colour.
---
"""

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  write:
    description: Write the page.
    inputs:
      type: object
      properties: {text: {type: string}}
      required: [text]
    steps:
      - id: read
        tool: fs.read
        inputs: {path: page.txt}
      - id: put
        tool: fs.write
        reason: Write the page.
        inputs: {path: page.txt, content: $input.text, expected_digest: $steps.read.content_digest}
  tools:
    description: Run a command and post a note.
    steps:
      - id: run
        tool: command.execute
        reason: List the folder.
        inputs: {argv: [ls, -la, "<b>not markup</b>"], timeout_seconds: 30}
  post:
    description: Post a note.
    steps:
      - id: send
        tool: http.request
        reason: Post the note.
        inputs:
          method: POST
          url: http://127.0.0.1:9/notes
          json: {note: "hello <script>x</script>"}
  pick:
    description: Ask which colour, then say it.
    steps:
      - id: colour
        ask:
          questions:
            - {id: colour, prompt: Which colour?, choices: [red, blue]}
      - id: say
        tool: echo
        inputs: {text: $steps.colour.answers.colour.option}
"""


@dataclass
class Console:
    """A served console: its URL, its workspace, a signed-up person and their token."""

    url: str
    root: Path
    home: Path
    environ: dict[str, str]
    token: str
    config: Any
    now: list[float]

    def session(self) -> Any:
        from proctor.runtime.boundary.workspace import Workspace
        from proctor.runtime.engine.session import Session

        return Session(Workspace.discover(self.root), environ=self.environ)

    def paused(self, text: str = "new line\n") -> dict[str, Any]:
        """A run of pages#write paused on the approval of its write."""
        session = self.session()
        try:
            env = session.run(
                str(self.root / "skills" / "pages") + "#write",
                inputs={"text": text},
                authority=parse_authority({"effects": "ask"}),
            )
        finally:
            session.close()
        doc = env.to_json()
        assert doc["status"] == "needs_approval", doc
        return doc

    def paused_on(self, method: str) -> dict[str, Any]:
        session = self.session()
        try:
            doc = session.run(
                str(self.root / "skills" / "pages") + "#" + method,
                authority=parse_authority({"effects": "ask"}),
            ).to_json()
        finally:
            session.close()
        assert doc["status"] == "needs_approval", doc
        return doc

    def question(self) -> dict[str, Any]:
        session = self.session()
        try:
            doc = session.run(str(self.root / "skills" / "pages") + "#pick").to_json()
        finally:
            session.close()
        assert doc["status"] == "needs_approval", doc
        return doc

    def state_bytes(self) -> bytes:
        return b"\n".join(
            p.read_bytes() for p in sorted((self.root / ".proctor").rglob("*")) if p.is_file()
        )


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    import uvicorn

    from proctor.console.app import ConsoleConfig, build_app
    from proctor.console.serve import bind_socket
    from proctor.console.sessions import SessionBook
    from proctor.console.users import UserBook

    root, home = tmp_path / "ws", tmp_path / "home"
    (root / ".proctor").mkdir(parents=True)
    pkg = root / "skills" / "pages"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text(SKILL)
    (pkg / "run.yaml").write_text(RUN_YAML)
    (root / "page.txt").write_text("old line\n")
    environ = {"PROCTOR_HOME": str(home)}
    token = UserBook(home).add("alice")
    now = [1000.0]
    sessions = SessionBook(clock=lambda: now[0])
    config = ConsoleConfig(root=root, home=home, environ=environ, sessions=sessions)
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(build_app(config), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        started = threading.Event()
        for _ in range(2000):
            if server.started:
                started.set()
                break
            thread.join(0.01)
        assert started.is_set(), "the console did not start"
        yield Console(f"http://127.0.0.1:{port}", root, home, environ, token, config, now)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
