"""The official MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``) against
``proctor mcp``: it lists and calls tools over stdio and over streamable HTTP with no protocol
error, and a turn tool called with malformed arguments answers a tool error with its code.

The Inspector is found at ``$PROCTOR_MCP_INSPECTOR`` or in ``.ci/node`` (where ``.ci/run``
installs a pinned version with npm). Without it the test skips, unless
``PROCTOR_REQUIRE_INSPECTOR=1`` (set by ``.ci/run``) makes that a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import API_KEY, REPO, Ws

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _inspector() -> Path:
    named = os.environ.get("PROCTOR_MCP_INSPECTOR")
    found = (
        Path(named) if named else REPO / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"
    )
    if found.is_file() and shutil.which("node"):
        return found
    message = "the MCP Inspector CLI is not installed (.ci/run installs it into .ci/node)"
    if os.environ.get("PROCTOR_REQUIRE_INSPECTOR") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _run(ws: Ws, *args: str) -> tuple[int, Any, str]:
    done = subprocess.run(
        [str(_inspector()), "--cli", *args],
        cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = done.stdout.strip()
    # a tool error is printed as the result, then one line naming it (exit 5)
    first = out.split('\n{"error"', 1)[0]
    assert first, done.stdout + done.stderr
    return done.returncode, json.loads(first), done.stdout + done.stderr


def _stdio(ws: Ws) -> list[str]:
    return [sys.executable, "-m", "proctor", "mcp", "hello-world"]


def _checks(ws: Ws, target: list[str]) -> None:
    code, listed, _ = _run(ws, *target, "--method", "tools/list")
    assert code == 0
    names = {t["name"] for t in listed["tools"]}
    assert {"hello-world__greet", "turn_call", "turn_complete"} <= names
    greet = next(t for t in listed["tools"] if t["name"] == "hello-world__greet")
    assert greet["annotations"]["readOnlyHint"] is True
    code, called, _ = _run(
        ws, *target, "--method", "tools/call", "--tool-name", "hello-world__greet",
        "--tool-arg", "message=hi",
    )  # fmt: skip
    assert code == 0 and called["structuredContent"]["outcome"] == "completed"
    assert json.loads(called["content"][1]["text"]) == called["structuredContent"]
    for args in (["turn=write", "args=x"], ["turn=write", 'tool=""', "args={}", "call_id=c1"]):
        pairs = [p for a in args for p in ("--tool-arg", a)]
        code, bad, text = _run(
            ws, *target, "--method", "tools/call", "--tool-name", "turn_call", *pairs
        )
        assert bad["isError"] is True, text
        assert bad["content"][0]["text"].startswith("error[arguments_invalid]"), text
        assert "tool_is_error" in text and "Traceback" not in text


def test_inspector_over_stdio(ws: Ws) -> None:
    ws.add_example("hello-world")
    _checks(ws, _stdio(ws))


def test_inspector_over_http(ws: Ws, http_server: Any) -> None:
    ws.add_example("hello-world")
    server = http_server("hello-world")
    _checks(
        ws,
        [server.url, "--transport", "http", "--header", f"Authorization: Bearer {API_KEY}"],
    )
