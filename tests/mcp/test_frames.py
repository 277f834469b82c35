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


def test_http_refuses_a_body_over_the_limit_without_holding_it() -> None:
    import anyio

    from proctor.mcp.frames import MAX_BODY, StrictFrames

    chunk = b"x" * (1024 * 1024)
    chunks = MAX_BODY // len(chunk) + 60  # far past the limit if read whole
    audited: list[dict[str, Any]] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the MCP app saw a body over the limit")

    middleware = StrictFrames(inner, lambda event, **fields: audited.append(fields))

    async def post(headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[str, Any], int]:
        pulled = 0
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            nonlocal pulled
            pulled += 1
            return {"type": "http.request", "body": chunk, "more_body": pulled < chunks}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
        with anyio.fail_after(30):
            await middleware(scope, receive, send)
        return sent[0]["status"], json.loads(sent[1]["body"]), pulled

    streamed = anyio.run(post, [])
    declared = anyio.run(post, [(b"content-length", str(chunks * len(chunk)).encode())])
    for status, error, _ in (streamed, declared):
        assert status == 413
        assert error["id"] is None and error["error"]["data"] == {"code": "frame_too_large"}
    assert streamed[2] == MAX_BODY // len(chunk) + 1  # it stopped at the first byte too many
    assert declared[2] == 0  # a declared length over the limit is refused unread
    assert [e["code"] for e in audited] == ["frame_too_large", "frame_too_large"]


def test_http_answers_a_request_whose_id_is_not_a_string_or_an_integer() -> None:
    import anyio

    from proctor.mcp.frames import StrictFrames

    audited: list[dict[str, Any]] = []
    reached: list[bytes] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.append((await receive())["body"])

    middleware = StrictFrames(inner, lambda event, **fields: audited.append(fields))

    async def post(body: bytes) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
        with anyio.fail_after(30):
            await middleware(scope, receive, send)
        return sent

    for request_id in ("null", "true", "1.5", "[7]"):
        sent = anyio.run(
            post, b'{"jsonrpc": "2.0", "id": %b, "method": "ping"}' % request_id.encode()
        )
        assert sent[0]["status"] == 400
        assert json.loads(sent[1]["body"])["error"]["data"] == {"code": "invalid_request"}
    good = b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}'
    assert anyio.run(post, good) == [] and reached == [good]
    assert [e["code"] for e in audited] == ["invalid_request"] * 4
