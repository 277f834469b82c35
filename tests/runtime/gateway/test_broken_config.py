"""A workspace whose upstream configuration stops loading (a malformed ``.mcp.json``, a lock
proctor did not write) loses its upstream tools, and only them: a run that uses none completes;
a call of an upstream tool, or of a connector operation over MCP, is refused with the
configuration's code, before any person is asked, and nothing reaches the server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.gateway.pins import LOCK_FILE
from proctor.runtime.gateway.review import pin_servers
from proctor.runtime.gateway.upstreams import Upstreams, load_upstreams
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    session,
)
from tests.runtime.gateway.support import make_workspace, python_stdio_server

RUN_YAML = """minimum_proctor: 0.1.0
default_method: hello
methods:
  hello:
    description: Use no upstream at all.
    steps:
      - id: say
        tool: echo
        inputs: {text: hi}
  record:
    description: Record a note upstream.
    steps:
      - id: put
        tool: mcp:py/record
        inputs: {note: lost}
  op:
    description: Record a note through a connector over MCP.
    steps:
      - id: put
        operation: notes/note.record
        idempotency_key: k1
        inputs: {note: lost}
"""

CONNECTOR = """name: notes
mcp: py
operations:
  note.record:
    verb: write
    mcp: {tool: record, arguments: {note: $input.note}}
    inputs: {type: object, properties: {note: {type: string}}, required: [note]}
"""


@pytest.fixture
def pinned(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    root = tmp_path / "ws"
    state = root / "upstream"
    state.mkdir(parents=True)
    (state / "description.txt").write_text("Look up a key.")
    make_workspace(root, {"py": python_stdio_server(state)})
    folder = make_skill(root, "jot", RUN_YAML)
    (folder / "connectors" / "notes").mkdir(parents=True)
    (folder / "connectors" / "notes" / "connector.yaml").write_text(CONNECTOR)
    environ = {**os.environ, "PROCTOR_HOME": str(tmp_path / "home")}
    config = load_upstreams(root, environ)
    assert config is not None
    upstreams = Upstreams(config, Workspace.discover(root), environ)
    try:
        pin_servers(upstreams, ["py"])
    finally:
        upstreams.close()
    yield root, state / "notes.txt", environ


@pytest.mark.parametrize(
    ("broken", "code"),
    [
        ('{"mcpServers": {', "mcp_config_invalid"),
        ('{"mcpServers": {"py": {"command": "x", "url": "https://a.example"}}}',
         "mcp_server_transport_invalid"),
    ],
)  # fmt: skip
def test_a_malformed_mcp_json_breaks_only_mcp_use(
    pinned: tuple[Path, Path, dict[str, str]], broken: str, code: str
) -> None:
    root, notes, environ = pinned
    (root / ".mcp.json").write_text(broken)
    ok = session(root, environ=environ).run("jot", cwd=root)
    assert ok.outcome == "completed", ok.refusal
    # under effects: ask the write would wait on a person: the refusal comes first
    tool = session(root, environ=environ).run(
        "jot#record", cwd=root, authority=authority(effects="ask")
    )
    assert tool.status == "sealed" and tool.refusal is not None, tool.status
    assert tool.refusal.code == code
    assert ".mcp.json" in tool.refusal.message
    op = session(root, environ=environ).run(
        "jot#op", cwd=root, authority=authority(effects="allow")
    )
    assert op.refusal is not None and op.refusal.code == code, op.refusal
    assert not notes.exists()  # the server never got a call


@pytest.mark.parametrize("unreadable", ["text", "folder"])
def test_a_lock_that_cannot_be_read_breaks_only_mcp_use(
    pinned: tuple[Path, Path, dict[str, str]], unreadable: str
) -> None:
    root, notes, environ = pinned
    lock = root / LOCK_FILE
    if unreadable == "text":
        lock.write_text("not a lock")
    else:  # no file to read at all: which tools were pinned is unknown
        lock.unlink()
        lock.mkdir()
    ok = session(root, environ=environ).run("jot", cwd=root)
    assert ok.outcome == "completed", ok.refusal
    op = session(root, environ=environ).run(
        "jot#op", cwd=root, authority=authority(effects="allow")
    )
    assert op.refusal is not None and op.refusal.code == "mcp_lock_invalid", op.refusal
    # an mcp: tool step is refused for the lock too (not tool_unknown), before a person is
    # asked for the write it would be under effects: ask
    tool = session(root, environ=environ).run(
        "jot#record", cwd=root, authority=authority(effects="ask")
    )
    assert tool.status == "sealed" and not tool.requests, tool.status
    assert tool.refusal is not None and tool.refusal.code == "mcp_lock_invalid", tool.refusal
    assert LOCK_FILE in tool.refusal.message
    assert not notes.exists()
