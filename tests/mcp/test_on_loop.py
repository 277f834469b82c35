"""A call made on the event loop's thread (``ProctorServer.run_on_loop``) is never cut off by
the signal that ends the server: the signal sets the call's stop, as for a worker's call, and
its interrupt comes once the call has returned."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from tests.mcp.conftest import Ws


def test_a_signal_during_a_call_on_the_loop_is_raised_once_it_returns(ws: Ws) -> None:
    from proctor.mcp.app import _end_calls_on_signals, open_server
    from proctor.runtime.boundary.workspace import Workspace

    server = open_server([], workspace=Workspace(ws.root), tools=("fs.read",), environ=dict(ws.env))
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    steps: list[str] = []

    def call(stop: threading.Event) -> str:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, between two lines
        steps.append("stopped" if stop.is_set() else "running")
        steps.append("returned")
        return "answer"

    try:
        _end_calls_on_signals(server)
        with pytest.raises(KeyboardInterrupt):
            server.run_on_loop(call)
        assert steps == ["stopped", "returned"]
        assert server.hold_interrupt() is False  # no call on the loop: raised at once
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        server.close()


def test_the_stdio_server_runs_its_loop_in_c_and_a_sigterm_still_seals_the_session(
    ws: Ws,
) -> None:
    # what the mcp extra installs is what a stdio call goes through, as over HTTP: uvloop's
    # loop (asyncio's in Python crosses the loop about six times a call); the signal that
    # ends the server is still taken between calls and the session's run sealed
    import json
    import subprocess
    import sys

    (ws.root / "data").mkdir()
    (ws.root / "data" / "a.txt").write_text("hello\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "mcp", "--tool", "fs.read"],
        cwd=ws.root, env=ws.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None

    def ask(n: int, method: str, params: dict[str, object]) -> dict[str, object]:
        message = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        proc.stdin.write(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        answer: dict[str, object] = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        assert answer["id"] == n, answer
        return answer

    try:
        ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}})  # fmt: skip
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        read = ask(2, "tools/call", {"name": "fs_read", "arguments": {"path": "data/a.txt"}})
        result = read["result"]
        assert isinstance(result, dict) and result["structuredContent"]["content"] == "hello\n"
        maps = Path(f"/proc/{proc.pid}/maps").read_text(encoding="utf-8")
        assert "/uvloop/loop." in maps
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    sealed = [e for e in ws.audit() if e["event"] == "run_sealed"]
    assert len(sealed) == 1 and sealed[0]["outcome"] == "completed", sealed
    assert not list((ws.root / ".proctor" / "mcp-sessions").iterdir())
