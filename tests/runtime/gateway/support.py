"""Real upstream MCP servers for the gateway's tests, in a temporary workspace.

The npm reference servers (``@modelcontextprotocol/server-filesystem`` and
``server-everything``, pinned) are found in ``.ci/node`` where ``.ci/run`` installs them; without
them the tests skip, unless ``PROCTOR_REQUIRE_MCP_SERVERS=1`` (CI) makes that a failure. The
Python upstream is :mod:`tests.runtime.gateway.upstream_py` (the official SDK), run over stdio
in the sandbox or over streamable HTTP on a loopback port.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
NODE = (REPO / ".ci" / "node").resolve()  # a link there (a worktree) is read where it leads
MODULES = NODE / "node_modules" / "@modelcontextprotocol"
UPSTREAM_PY = Path(__file__).with_name("upstream_py.py")


def node_server(name: str) -> Path:
    """The entry script of an npm reference server, or skip (fail under CI)."""
    script = MODULES / name / "dist" / "index.js"
    if script.is_file() and shutil.which("node"):
        # .ci/node may be a link to another checkout's: the sandbox shows the folder it
        # resolves to (make_workspace's [sandbox] read), not the link
        return script.resolve()
    message = f"@modelcontextprotocol/{name} is not installed (.ci/run installs it into .ci/node)"
    if os.environ.get("PROCTOR_REQUIRE_MCP_SERVERS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def make_workspace(root: Path, servers: dict[str, Any], toml: str = "") -> Path:
    """A workspace at ``root`` with ``.mcp.json`` holding ``servers`` and a ``proctor.toml``
    that lets sandboxed servers read the node modules and the Python upstream."""
    (root / ".proctor").mkdir(parents=True, exist_ok=True)
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    reads = [str(NODE.resolve()), str(UPSTREAM_PY.parent.resolve())]
    (root / "proctor.toml").write_text(f"[sandbox]\nread = {json.dumps(reads)}\n{toml}")
    return root


def filesystem_server(folder: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``mcpServers`` entry of the filesystem server serving ``folder``."""
    entry: dict[str, Any] = {
        "command": "node",
        "args": [str(node_server("server-filesystem")), str(folder)],
    }
    if env:
        entry["env"] = env
    return entry


def everything_server(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``mcpServers`` entry of the everything server over stdio."""
    entry: dict[str, Any] = {"command": "node", "args": [str(node_server("server-everything"))]}
    if env:
        entry["env"] = env
    return entry


def python_stdio_server(folder: Path) -> dict[str, Any]:
    """The ``mcpServers`` entry of the Python upstream over stdio, its state in ``folder``."""
    return {"command": sys.executable, "args": [str(UPSTREAM_PY), str(folder), "stdio"]}


@dataclass
class HttpUpstream:
    """The Python upstream over streamable HTTP: its URL and the requests it received."""

    url: str
    folder: Path
    proc: subprocess.Popen[str]

    def requests(self) -> list[dict[str, Any]]:
        path = self.folder / "requests.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def calls(self) -> list[str]:
        return [r["tool"] for r in self.requests() if r["method"] == "tools/call"]


@pytest.fixture
def http_upstream(tmp_path: Path) -> Iterator[HttpUpstream]:
    folder = tmp_path / "http-upstream"
    folder.mkdir()
    (folder / "description.txt").write_text("Look up a key.")
    proc = subprocess.Popen(
        [sys.executable, str(UPSTREAM_PY), str(folder), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the port is bound (or the server died)
        assert line.startswith("PORT "), line
        yield HttpUpstream(f"http://127.0.0.1:{line.split()[1]}/mcp", folder, proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
