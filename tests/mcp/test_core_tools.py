"""``proctor mcp --tool fs.read``: proctor's own tools served over real stdio to the official SDK
client, each call a governed call of the client session's one run.

A read answers the file; every call is admitted, recorded under the session's run and audited;
the session seals one receipt when the client goes. The containment attacks (``..``, an
absolute path, a symlink out, a hard link to a file outside, a folder swapped for a symlink
between two calls of one session) are refused with their codes and the target's bytes never
reach the client; a secret in a file read is redacted; a write under the default authority
waits for a person and changes nothing; a killed server's session run is sealed by the next
``proctor mcp``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, recorder_for, stdio_params

# the http_server fixture's pipes are closed by the garbage collector
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
CANARY = "CANARY-5be1c0"
TOKEN = "ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3"


def _cli(ws: Ws, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _data(ws: Ws) -> None:
    (ws.root / "data").mkdir()
    (ws.root / "data" / "a.txt").write_text("hello\n")


def _session_runs(ws: Ws) -> list[dict[str, Any]]:
    runs = json.loads(_cli(ws, "history", "--json").stdout)["runs"]
    return [r for r in runs if r.get("skill") == "mcp-tools"]


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def test_reads_are_calls_of_one_session_run_sealed_with_one_receipt(ws: Ws) -> None:
    from mcp.client import Client

    _data(ws)

    async def main() -> tuple[list[Any], list[Any]]:
        async with Client(stdio_params(ws, "--tool", "fs.read", "--tool", "fs.list")) as client:
            tools = (await client.list_tools()).tools
            results = [await client.call_tool("fs_read", {"path": "data/a.txt"}) for _ in range(3)]
            results.append(await client.call_tool("fs_list", {"path": "data"}))
            return tools, results

    tools, results = anyio.run(main)
    read = next(t for t in tools if t.name == "fs_read")
    assert read.title == "fs.read" and read.annotations is not None
    assert read.annotations.read_only_hint is True and read.input_schema["required"] == ["path"]
    assert not any(r.is_error for r in results), results
    assert results[0].structured_content["content"] == "hello\n"
    assert json.loads(results[0].content[0].text)["content"] == "hello\n"
    assert [e["path"] for e in results[3].structured_content["entries"]] == ["data/a.txt"]
    (run,) = _session_runs(ws)  # one session, one run
    assert run["outcome"] == "completed" and run["receipt_id"].startswith("sha256:")
    audit = ws.audit()
    settled = [e for e in audit if e.get("run_id") == run["run_id"] and e.get("call_id")]
    assert {e["call_id"] for e in settled} == {f"serve/turn/c{n}" for n in range(1, 5)}
    assert [e.get("tool") for e in audit if e.get("event") == "mcp_request" and e.get("tool")] == [
        "fs_read",
        "fs_read",
        "fs_read",
        "fs_list",
    ]
    assert not (ws.root / ".proctor" / "mcp-sessions" / run["run_id"]).exists()
    verified = _cli(ws, "verify", run["receipt_id"])
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _attacks(ws: Ws) -> dict[str, tuple[str, str]]:
    """Each attack's path argument and the code it is refused with."""
    outside = ws.root.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"outside {CANARY}\n")
    os.symlink(outside / "secret.txt", ws.root / "data" / "link.txt")
    os.link(outside / "secret.txt", ws.root / "data" / "hard.txt")
    return {
        "dotdot": ("../outside/secret.txt", "path_outside_workspace"),
        "absolute": (str(outside / "secret.txt"), "path_absolute"),
        "symlink": ("data/link.txt", "path_outside_workspace"),
        "hard_link": ("data/hard.txt", "hard_link"),
    }


def test_containment_attacks_are_refused_and_nothing_outside_is_read(ws: Ws) -> None:
    from mcp.client import Client

    _data(ws)
    attacks = _attacks(ws)
    (ws.root / "d").mkdir()
    (ws.root / "d" / "a.txt").write_text("inside\n")
    (ws.root.parent / "elsewhere").mkdir()
    (ws.root.parent / "elsewhere" / "a.txt").write_text(f"elsewhere {CANARY}\n")

    async def main() -> tuple[dict[str, Any], Any, Any]:
        async with Client(stdio_params(ws, "--tool", "fs.read")) as client:
            refused = {
                name: await client.call_tool("fs_read", {"path": path})
                for name, (path, _code) in attacks.items()
            }
            before = await client.call_tool("fs_read", {"path": "d/a.txt"})
            # the folder swapped for a symlink out between two calls of the same session
            os.rename(ws.root / "d", ws.root / "d-moved")
            os.symlink(ws.root.parent / "elsewhere", ws.root / "d")
            after = await client.call_tool("fs_read", {"path": "d/a.txt"})
            return refused, before, after

    refused, before, after = anyio.run(main)
    for name, (_path, code) in attacks.items():
        result = refused[name]
        assert result.is_error and _text(result).startswith(f"error[{code}]"), (name, result)
        assert CANARY not in _text(result) and str(ws.root) not in _text(result)
    assert before.structured_content["content"] == "inside\n"
    assert after.is_error and _text(after).startswith("error[path_outside_workspace]"), after
    assert CANARY not in _text(after)
    (run,) = _session_runs(ws)
    audit = ws.audit()
    refusals = [e for e in audit if e.get("run_id") == run["run_id"] and e.get("call_id")]
    assert CANARY not in json.dumps(audit)
    assert {e["call_id"] for e in refusals} >= {f"serve/turn/c{n}" for n in range(1, 7)}


def test_a_secret_in_a_file_read_is_redacted_in_the_answer(ws: Ws) -> None:
    from mcp.client import Client

    (ws.root / "notes.txt").write_text(f"deploy with {TOKEN} today\n")

    async def main() -> Any:
        async with Client(stdio_params(ws, "--tool", "fs.read")) as client:
            return await client.call_tool("fs_read", {"path": "notes.txt"})

    result = anyio.run(main)
    whole = _text(result) + json.dumps(result.structured_content)
    assert TOKEN not in whole and "[REDACTED:github_token]" in whole, whole
    assert TOKEN not in (ws.root / ".proctor" / "audit.jsonl").read_text()


async def _pending(ws: Ws) -> dict[str, Any]:
    """The one open approval, once the call has opened it (polled, with a deadline)."""
    with anyio.fail_after(60):
        while True:
            out = await anyio.to_thread.run_sync(lambda: _cli(ws, "pending", "--json"))
            requests = [r for r in json.loads(out.stdout)["requests"] if r["kind"] == "approval"]
            if requests:
                (request,) = requests
                return dict(request)
            await anyio.sleep(0.2)


async def _decide(ws: Ws, decision: str, request: dict[str, Any]) -> Any:
    """``proctor approve|decline`` of ``request``, tried again while the call holds the run."""
    argv = (decision, request["run_id"], "--yes", "--digest", request["request_digest"])
    with anyio.fail_after(60):
        while True:
            done = await anyio.to_thread.run_sync(lambda: _cli(ws, *argv))
            if "run_busy" not in done.stderr:
                return done
            await anyio.sleep(0.2)


@pytest.mark.parametrize("decision", ["approve", "decline"])
def test_a_write_waits_for_a_person_and_runs_once_only_when_approved(ws: Ws, decision: str) -> None:
    from mcp.client import Client

    _data(ws)
    args = {"path": "data/new.txt", "content": "written by the client\n", "create": True}

    async def main() -> tuple[Any, dict[str, Any]]:
        async with Client(stdio_params(ws, "--tool", "fs.write")) as client:
            box: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    box.append(await client.call_tool("fs_write", args))

                tg.start_soon(call)
                request = await _pending(ws)
                assert not (ws.root / "data" / "new.txt").exists()  # nothing done while it waits
                done = await _decide(ws, decision, request)
                assert done.returncode == 10, done.stderr  # the run waits on: the session goes on
            return box[0], request

    result, request = anyio.run(main)
    # the person saw exactly what executes
    assert request["summary"] == "fs.write create data/new.txt"
    (change,) = request["payload"]["files"]
    assert "+written by the client" in change["diff"] and change["op"] == "create"
    target = ws.root / "data" / "new.txt"
    if decision == "approve":
        assert not result.is_error, result
        assert target.read_text() == "written by the client\n"
    else:
        assert result.is_error and "approval_declined" in _text(result), result
        assert not target.exists()
    (run,) = _session_runs(ws)
    assert run["outcome"] == "completed" and run["receipt_id"].startswith("sha256:")


def test_a_session_whose_run_a_person_closed_goes_on_in_a_new_run(ws: Ws) -> None:
    from mcp.client import Client

    _data(ws)

    async def main() -> tuple[Any, Any]:
        async with Client(stdio_params(ws, "--tool", "fs.read")) as client:
            first = await client.call_tool("fs_read", {"path": "data/a.txt"})
            (run,) = _session_runs(ws)
            closed = subprocess.run(
                [sys.executable, "-m", "proctor", "resume", run["run_id"], "-"],
                input='{"close": {"outcome": "superseded"}}',
                cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert closed.returncode == 1, closed.stderr  # sealed superseded
            return first, await client.call_tool("fs_read", {"path": "data/a.txt"})

    first, second = anyio.run(main)
    assert not first.is_error and not second.is_error, second
    outcomes = sorted(r["outcome"] for r in _session_runs(ws))
    assert outcomes == ["completed", "superseded"]
    # each call's request line once, the second's before the new run's first line
    log = ws.audit()
    lines = [n for n, e in enumerate(log) if e["event"] == "mcp_request" and e.get("tool")]
    starts = [n for n, e in enumerate(log) if e["event"] == "run_started"]
    assert len(lines) == 2 and len(starts) == 2
    assert lines[0] < starts[0] < lines[1] < starts[1]


def test_a_read_while_a_person_holds_the_run_waits_off_the_loop_and_then_runs(ws: Ws) -> None:
    """A read is made on the server's event loop only when it need not wait: while a person's
    resume holds the session's run, the read waits on a worker (the loop answers other
    requests meanwhile, and nothing is recorded), then runs once the run is let go."""
    from mcp.client import Client

    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.lease import acquire_lease
    from proctor.runtime.engine.session import Session

    _data(ws)

    async def main() -> tuple[Any, list[Any], int]:
        async with Client(stdio_params(ws, "--tool", "fs.read")) as client:
            first = await client.call_tool("fs_read", {"path": "data/a.txt"})
            (run_id,) = os.listdir(ws.root / ".proctor" / "mcp-sessions")
            person = Session(Workspace.discover(ws.root), environ=ws.env)
            try:
                assert acquire_lease(person.store, run_id, person.holder)
                calls = len(person.store.step_calls(run_id, "serve"))
                box: list[Any] = []
                async with anyio.create_task_group() as tg:

                    async def read() -> None:
                        box.append(await client.call_tool("fs_read", {"path": "data/a.txt"}))

                    tg.start_soon(read)
                    with anyio.fail_after(30):
                        for _ in range(3):  # the loop answers while the read waits
                            assert (await client.list_tools()).tools
                            await anyio.sleep(0.2)
                    assert not box  # still waiting for the run
                    assert len(person.store.step_calls(run_id, "serve")) == calls
                    person.store.release_lease(run_id, person.holder)
            finally:
                person.close()
            return first, box, calls

    first, (second,), calls = anyio.run(main)
    assert not first.is_error and calls == 1
    assert not second.is_error and second.structured_content["content"] == "hello\n", second
    (run,) = _session_runs(ws)
    assert run["outcome"] == "completed"


def test_the_session_package_is_written_only_when_its_text_differs(ws: Ws) -> None:
    """A server started again keeps the package's files as they are (the package its calls
    hold stays valid), and a file that was changed is written back to its text."""
    from proctor.mcp.core_tools import open_core_tools

    folder = open_core_tools(ws.root, ["fs.read"]).sessions.package
    files = [folder / "SKILL.md", folder / "run.yaml"]
    texts = [f.read_bytes() for f in files]
    stats = [(f.stat().st_ino, f.stat().st_mtime_ns, f.stat().st_ctime_ns) for f in files]
    assert open_core_tools(ws.root, ["fs.read"]).sessions.package == folder
    assert [(f.stat().st_ino, f.stat().st_mtime_ns, f.stat().st_ctime_ns) for f in files] == stats
    files[1].write_text(texts[1].decode().replace('"fs.read"', '"fs.write"'))
    open_core_tools(ws.root, ["fs.read"])
    assert [f.read_bytes() for f in files] == texts


def test_an_unknown_tool_name_refuses_to_start(ws: Ws) -> None:
    done = _cli(ws, "mcp", "--tool", "fs.nothing")
    assert done.returncode == 2, done.stderr
    assert "tool_not_found" in done.stderr and "Traceback" not in done.stderr


def test_a_killed_servers_session_run_is_sealed_by_the_next_proctor_mcp(ws: Ws) -> None:
    from mcp.client import Client

    _data(ws)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call = {**request, "params": {"name": "fs_read", "arguments": {"path": "data/a.txt"}}}
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "mcp", "--tool", "fs.read"],
        cwd=ws.root, env=ws.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    for message in (init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert answers[1]["result"]["isError"] is False, answers
    open_runs = os.listdir(ws.root / ".proctor" / "mcp-sessions")
    assert len(open_runs) == 1
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdin.close()
    proc.stdout.close()
    (left,) = _session_runs(ws)
    assert left["status"] != "sealed"

    async def main() -> None:
        async with Client(stdio_params(ws, "--tool", "fs.read")) as client:
            await client.list_tools()

    anyio.run(main)
    runs = {r["run_id"]: r for r in _session_runs(ws)}
    assert runs[open_runs[0]]["outcome"] == "completed", runs
    sealed = [e for e in ws.audit() if e.get("event") == "mcp_session_run_sealed"]
    assert [e["run_id"] for e in sealed] == open_runs and sealed[0]["orphaned"] is True
    assert not os.listdir(ws.root / ".proctor" / "mcp-sessions")


def test_over_http_each_session_is_its_own_run(ws: Ws, http_server: Any) -> None:
    from mcp.client import Client

    _data(ws)
    server = http_server("--tool", "fs.read")

    async def one() -> Any:
        async with Client(recorder_for(server.url)) as client:
            return await client.call_tool("fs_read", {"path": "data/a.txt"})

    async def main() -> list[Any]:
        return [await one(), await one()]

    results = anyio.run(main)
    assert [r.structured_content["content"] for r in results] == ["hello\n", "hello\n"]
    server.proc.terminate()
    server.proc.wait(timeout=30)
    runs = _session_runs(ws)  # a session of the handshake protocol, or a client's name
    assert runs and all(r["outcome"] == "completed" for r in runs), (
        runs,
        server.proc.stderr.read(),
    )
    ids = {r["run_id"] for r in runs}
    calls = {
        (e["run_id"], e["call_id"])
        for e in ws.audit()
        if e.get("run_id") in ids and e.get("call_id")
    }
    assert len(calls) == 2, calls
