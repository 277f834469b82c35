"""Upstream MCP tools in skill steps, through the real CLI: a read step completes and its run
seals with a receipt that verifies; a write step under ``effects: ask`` pauses with the exact
arguments, and declined it never reaches the filesystem server (the file stays absent)."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from tests.e2e.conftest import Ws
from tests.runtime.gateway.support import filesystem_server, make_workspace

RUN_YAML = """\
minimum_proctor: 0.1.0
default_method: read
methods:
  read:
    description: Read a file upstream.
    inputs: {type: object, properties: {path: {type: string}}, required: [path]}
    steps:
      - id: get
        tool: mcp:fs/read_text_file
        inputs: {path: $input.path}
  write:
    description: Write a file upstream.
    inputs:
      type: object
      properties: {path: {type: string}, content: {type: string}}
      required: [path, content]
    steps:
      - id: put
        tool: mcp:fs/write_file
        inputs: {path: $input.path, content: $input.content}
"""


def test_upstream_tools_in_steps_read_and_a_declined_write(ws: Ws) -> None:
    data = ws.root / "data"
    data.mkdir()
    (data / "a.txt").write_text("hello\n")
    make_workspace(ws.root, {"fs": filesystem_server(data)})
    pkg = ws.root / "skills" / "files"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text("---\nname: files\ndescription: Upstream files.\n---\n")
    (pkg / "run.yaml").write_text(textwrap.dedent(RUN_YAML))
    pinned = ws.proctor("mcp", "pin", "fs", "--json")
    assert pinned.code == 0, pinned.stderr
    assert "write_file" in pinned.json()["pinned"]["fs"]

    read = ws.proctor("run", "skills/files", "-i", f"path={data / 'a.txt'}", "--json")
    assert read.code == 0, read.stderr
    doc = read.json()
    assert doc["outcome"] == "completed"
    assert doc["result"]["content"][0]["text"] == "hello\n"
    assert ws.proctor("verify", doc["receipt_id"]).code == 0

    target = data / "b.txt"
    write = ws.proctor(
        "run", "skills/files#write", "-i", f"path={target}", "-i", "content=NEW",
        "--run-authority", '{"effects": "ask"}', "--json",
    )  # fmt: skip
    assert write.code == 10, write.stderr
    (request,) = write.json()["requests"]
    assert request["payload"] == {
        "call": {"tool": "mcp:fs/write_file", "args": {"path": str(target), "content": "NEW"}}
    }
    declined = ws.proctor(
        "decline", write.json()["run_id"], "--yes", "--digest", request["request_digest"]
    )
    assert declined.code in (0, 1), declined.stderr
    assert not target.exists()  # the upstream never got the call


def test_a_standing_approval_names_upstream_tools_as_operations(ws: Ws) -> None:
    data = ws.root / "data"
    data.mkdir()
    make_workspace(ws.root, {"fs": filesystem_server(data)})
    pkg = ws.root / "skills" / "files"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text("---\nname: files\ndescription: Upstream files.\n---\n")
    (pkg / "run.yaml").write_text(textwrap.dedent(RUN_YAML))
    assert ws.proctor("mcp", "pin", "fs").code == 0
    target = data / "c.txt"

    def write(names: list[str]) -> Any:
        authority = {"effects": "ask", "standing_approvals": [{"operations": {"names": names}}]}
        return ws.proctor(
            "run", "skills/files#write", "-i", f"path={target}", "-i", "content=S",
            "--run-authority", json.dumps(authority), "--json",
        )  # fmt: skip

    other = write(["mcp:fs/edit_file"])  # covers another tool: the write still waits
    assert other.code == 10, other.stderr
    assert not target.exists()
    covered = write(["mcp:fs/*"])
    assert covered.code == 0, covered.stderr
    assert target.read_text() == "S"
