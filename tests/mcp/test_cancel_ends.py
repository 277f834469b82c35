"""A cancelled call ends, it is not left in doubt (issue 31, item 6).

The official MCP Python SDK client (stdio) calls a skill whose command takes 20 s, cancels the
call after 4 s and closes (its transport closes stdin, then sends SIGTERM, then SIGKILL). The
run is recorded ``stopped``, its command's call is settled ``cancelled``, no process of it is
left, and resuming it asks no retry question: the step runs again and the run completes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import anyio
import psutil

from tests.mcp.conftest import Ws, stdio_params

SKILL = """\
minimum_proctor: 0.1.0
methods:
  slow:
    description: Run a command that takes 20 s the first time, then echo.
    inputs: {type: object, properties: {}}
    steps:
      - id: work
        tool: command.execute
        inputs:
          argv: [PYTHON, tools/slow.py, MARKER]
          timeout_seconds: 60
      - id: after
        tool: echo
        inputs: {text: after}
"""

SLOW = """import pathlib, sys, time
count = pathlib.Path("count.txt")
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
pathlib.Path(f"started{n}").touch()
if n == 1:
    time.sleep(20)
"""


def _left(marker: str) -> list[int]:
    """The host processes still running with ``marker`` in their argv."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if marker in (proc.info["cmdline"] or []):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def _proctor(ws: Ws, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws.root, env=ws.env, input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_cancelled_command_call_is_killed_settled_and_resumable_without_a_question(
    ws: Ws,
) -> None:
    from mcp.client.stdio import stdio_client

    from mcp import Client

    marker = f"proctor-cancel-{uuid.uuid4().hex}"
    (ws.root / "tools").mkdir()
    (ws.root / "tools" / "slow.py").write_text(SLOW)
    text = SKILL.replace("PYTHON", json.dumps(sys.executable)).replace("MARKER", marker)
    ws.add_skill("slow", text)
    allow = ws.allow()
    seen: dict[str, Any] = {}

    async def go() -> None:
        with anyio.fail_after(60):
            async with Client(stdio_client(stdio_params(ws, "slow", *allow))) as client:
                async with anyio.create_task_group() as group:

                    async def call() -> None:
                        seen["result"] = await client.call_tool("slow__slow", {})

                    began = time.monotonic()
                    group.start_soon(call)
                    # polls: the command has started and 4 s have passed since the call
                    while not (ws.root / "started1").exists() or time.monotonic() - began < 4:
                        await anyio.sleep(0.05)
                    assert _left(marker), "the command should be running now"
                    group.cancel_scope.cancel()
                seen["cancelled_at"] = time.monotonic()
            seen["closed_at"] = time.monotonic()  # the client closed the server (EOF, signals)

    anyio.run(go)
    print(f"\ncancel to server gone: {seen['closed_at'] - seen['cancelled_at']:.2f} s")
    assert "result" not in seen
    assert _left(marker) == []  # no process of the run is left
    assert seen["closed_at"] - seen["cancelled_at"] < 15  # not the 20 s the command wanted

    events = ws.audit()
    (started,) = [e for e in events if e["event"] == "run_started"]
    run_id = started["run_id"]
    run_events = [e for e in events if e.get("run_id") == run_id]
    calls = [e for e in run_events if e["event"] == "tool_call"]
    assert [(c["tool"], c["outcome"]) for c in calls] == [("command.execute", "cancelled")]
    assert any(e["event"] == "run_stopped" for e in run_events)
    assert not any(e["event"] == "run_sealed" for e in run_events)

    record = json.loads(_proctor(ws, "history", run_id, "--json").stdout)
    assert record["status"] == "stopped", record
    assert not (ws.root / "started2").exists()

    # resumable without a retry question: nothing waits on a person, the step runs again
    pending = json.loads(_proctor(ws, "pending", "--json").stdout)
    assert pending.get("requests", []) == [], pending
    out = _proctor(ws, "resume", run_id, "-", "--json", stdin="{}")
    assert out.returncode == 0, (out.stdout, out.stderr)
    doc = json.loads(out.stdout)
    assert (doc["status"], doc["outcome"]) == ("sealed", "completed"), doc
    assert (ws.root / "count.txt").read_text() == "2"
    out = _proctor(ws, "verify", doc["receipt_id"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert _proctor(ws, "audit", "verify").returncode == 0
