"""What an MCP client sees of proctor's tools: argument refusals with a code (never a protocol
error or a traceback), tool annotations from each method's effects, the whole run envelope as
text beside the summary, and ``turn_complete`` letting the host retry an output that fails the
turn's schema.

Spoken as raw JSON-RPC frames over stdio, with the server's stderr captured, so a traceback
anywhere shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.mcp.conftest import Ws
from tests.mcp.test_frames import INITIALIZE, _Lines
from tests.mcp.test_turns import DRAFTER

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

READER = """\
minimum_proctor: 0.1.0
methods:
  look:
    description: List the workspace.
    steps:
      - id: list
        tool: fs.list
        inputs: {path: .}
"""

MALFORMED: dict[str, dict[str, Any]] = {
    "no call_id": {"turn": "write", "tool": "fs.read", "args": {}},
    "no turn": {"tool": "fs.read", "args": {}, "call_id": "c1"},
    "args a string": {"turn": "write", "tool": "fs.read", "args": "x", "call_id": "c1"},
    "long call_id": {"turn": "write", "tool": "fs.read", "args": {}, "call_id": "c" * 100_000},
    "empty tool": {"turn": "write", "tool": "", "args": {}, "call_id": "c1"},
}


def _call(request_id: int, name: str, arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def test_tools_annotations_arguments_results_and_output_retries(ws: Ws) -> None:
    ws.add_skill("drafter", DRAFTER)
    ws.add_skill("reader", READER)
    (ws.root / "note.txt").write_text("Friday?\n", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "mcp", "drafter", "reader"],
        cwd=ws.root, env=ws.env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stderr is not None
    replies: dict[str, dict[str, Any]] = {}
    try:
        lines = _Lines(proc)

        def ask(key: str, frame: dict[str, Any]) -> dict[str, Any]:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(frame) + "\n")
            proc.stdin.flush()
            replies[key] = lines.reply_to(frame["id"])
            return replies[key]

        ask("init", INITIALIZE)
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        proc.stdin.write("\n")
        ask("list", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        ask("look", _call(3, "reader__look", {}))
        ask("paused", _call(4, "drafter__reply", {"file": "note.txt"}))
        for n, (key, arguments) in enumerate(MALFORMED.items()):
            ask(key, _call(10 + n, "turn_call", arguments))
        ask(
            "negative offset",
            _call(20, "turn_read", {"turn": "write", "locator": "x", "offset": -5}),
        )
        ask("bad output 1", _call(21, "turn_complete", {"turn": "write", "output": {"r": 1}}))
        ask("bad output 2", _call(22, "turn_complete", {"turn": "write", "output": {"r": 1}}))
        ask("good output", _call(23, "turn_complete", {"turn": "write", "output": {"reply": "ok"}}))
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    stderr = proc.stderr.read()
    assert "Traceback" not in stderr and "TaskGroup" not in stderr

    tools = {t["name"]: t for t in replies["list"]["result"]["tools"]}
    assert tools["reader__look"]["annotations"] == {
        "readOnlyHint": True, "destructiveHint": False,
        "idempotentHint": True, "openWorldHint": False,
    }  # fmt: skip
    # drafter's last step echoes and its turn only reads: read-only too; turn_call may change
    assert tools["drafter__reply"]["annotations"]["readOnlyHint"] is True
    assert tools["turn_call"]["annotations"]["destructiveHint"] is True
    assert tools["turn_status"]["annotations"]["readOnlyHint"] is True

    look = replies["look"]["result"]
    summary, envelope = (part["text"] for part in look["content"])
    assert json.loads(envelope) == look["structuredContent"]
    assert "completed" in summary
    paused = replies["paused"]["result"]
    assert json.loads(paused["content"][1]["text"])["requests"][0]["request_digest"]
    assert "turn_status" in paused["content"][0]["text"]  # an agent turn: the turn tools

    for key in [*MALFORMED, "negative offset"]:
        result = replies[key].get("result")
        assert result is not None, (key, replies[key])
        assert result["isError"] is True
        assert "error[arguments_invalid]" in result["content"][0]["text"], key
    assert "c" * 200 not in json.dumps(ws.audit())

    for key in ("bad output 1", "bad output 2"):
        result = replies[key]["result"]
        assert result["isError"] is True
        assert "error[agent_output_invalid]" in result["content"][0]["text"]
        assert "still open" in result["content"][0]["text"]
    good = replies["good output"]["result"]
    assert good["structuredContent"]["status"] == "needs_approval"
