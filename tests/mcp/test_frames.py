"""Hostile MCP frames: a repeated key or nesting past 64 is refused before the SDK parses it.

The attack is a ``tools/call`` whose arguments repeat a key (``{"message": "a", "message":
"b"}``): a reader where the last key wins would run the skill with one value while anything
that read the frame another way saw the other. Over stdio and over HTTP the frame is answered
with a JSON-RPC error naming ``duplicate_key`` (or ``too_deep``), audited, and no run starts;
the server goes on answering.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from typing import Any

import httpx
import pytest

from tests.mcp.conftest import API_KEY, Ws

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
DUPLICATE = (
    '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name":'
    ' "hello-world__greet", "arguments": {"message": "shown", "message": "acted on"}}}'
)
DEEP = (
    '{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name":'
    ' "hello-world__greet", "arguments": {"message": "x", "extra": '
    + "[" * 100_000
    + "]" * 100_000
    + "}}}"
)
GOOD = {
    "jsonrpc": "2.0",
    "id": 9,
    "method": "tools/call",
    "params": {"name": "hello-world__greet", "arguments": {"message": "still here"}},
}

BAD_TURN_ARGUMENTS = {
    "jsonrpc": "2.0",
    "id": 10,
    "method": "tools/call",
    "params": {"name": "turn_read", "arguments": {"turn": 5, "locator": "x", "offset": "y"}},
}


class _Lines:
    """The server's stdout lines, read by a thread; each wait has a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._queue: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout
        threading.Thread(target=lambda: [self._queue.put(x) for x in stdout], daemon=True).start()

    def next(self) -> dict[str, Any]:
        """The next message the server wrote."""
        return json.loads(self._queue.get(timeout=60))  # type: ignore[no-any-return]

    def reply_to(self, request_id: int) -> dict[str, Any]:
        while True:
            message = json.loads(self._queue.get(timeout=60))
            if message.get("id") == request_id:
                return message  # type: ignore[no-any-return]


def _stdio(ws: Ws, stderr: int = subprocess.DEVNULL) -> subprocess.Popen[str]:
    """``proctor mcp hello-world`` over pipes (its stderr piped when asked, for a test to read)."""
    return subprocess.Popen(
        [sys.executable, "-m", "proctor", "mcp", "hello-world"],
        cwd=ws.root, env=ws.env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
    )  # fmt: skip


def _send(proc: subprocess.Popen[str], frame: str | dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((frame if isinstance(frame, str) else json.dumps(frame)) + "\n")
    proc.stdin.flush()


def _no_run_for(ws: Ws, value: str) -> None:
    events = ws.audit()
    started = [e for e in events if e["event"] == "run_started"]
    assert len(started) == 1  # the good call's run only
    assert value not in json.dumps(events)


def test_stdio_refuses_a_repeated_key_and_a_deep_frame_and_goes_on(ws: Ws) -> None:
    ws.add_example("hello-world")
    proc = _stdio(ws)
    try:
        lines = _Lines(proc)
        _send(proc, INITIALIZE)
        assert "result" in lines.reply_to(1)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, DUPLICATE)
        refused = lines.reply_to(7)
        _send(proc, DEEP)
        deep = lines.reply_to(8)
        _send(proc, GOOD)
        good = lines.reply_to(9)
        _send(proc, BAD_TURN_ARGUMENTS)
        bad_turn = lines.reply_to(10)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
    assert refused["error"]["data"] == {"code": "duplicate_key"}
    assert deep["error"]["data"] == {"code": "too_deep"}
    assert good["result"]["structuredContent"]["outcome"] == "completed"
    # a turn tool's arguments are checked against its schema before anything is read
    assert bad_turn["result"]["isError"] is True
    assert "arguments_invalid" in bad_turn["result"]["content"][0]["text"]
    codes = [e["code"] for e in ws.audit() if e["event"] == "mcp_frame_refused"]
    assert codes == ["duplicate_key", "too_deep"]
    _no_run_for(ws, "acted on")


def test_http_refuses_a_repeated_key_with_400_and_no_run(ws: Ws, http_server: Any) -> None:
    ws.add_example("hello-world")
    server = http_server("hello-world")
    headers = {**HEADERS, "Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(timeout=60) as client:
        init = client.post(server.url, headers=headers, content=json.dumps(INITIALIZE))
        assert init.status_code == 200
        session = init.headers.get("mcp-session-id")
        if session:
            headers["mcp-session-id"] = session
        refused = client.post(server.url, headers=headers, content=DUPLICATE)
        deep = client.post(server.url, headers=headers, content=DEEP)
        good = client.post(server.url, headers=headers, content=json.dumps(GOOD))
    assert refused.status_code == 400 and deep.status_code == 400
    assert refused.json()["id"] == 7
    assert refused.json()["error"]["data"] == {"code": "duplicate_key"}
    assert deep.json()["error"]["data"] == {"code": "too_deep"}
    assert good.status_code == 200 and "still here" in good.text
    codes = [e["code"] for e in ws.audit() if e["event"] == "mcp_frame_refused"]
    assert codes == ["duplicate_key", "too_deep"]
    _no_run_for(ws, "acted on")
