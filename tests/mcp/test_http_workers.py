"""``proctor mcp --transport http --workers N``: one socket served by several processes.

A handshake-era session lives in the worker that opened it; a request for it that reaches
another worker is forwarded to its owner (the session's calls, its end, its unknown ids), so a
client never sees which process it reached. The runs the turn tools work are shared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from proctor.errors import UsageError
from proctor.mcp.workers import SharedRuns, read_handoff
from tests.mcp.conftest import API_KEY, Ws

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
HANDSHAKE = "2025-11-25"


def _started(ws: Ws, count: int) -> list[dict[str, Any]]:
    """The ``mcp_server_started`` events of every worker (waited for, with a deadline)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        events = [e for e in ws.audit() if e["event"] == "mcp_server_started"]
        if len(events) >= count:
            return events
        time.sleep(0.2)
    raise AssertionError(f"the workers did not all start: {ws.audit()}")


def _headers(url: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "authorization": f"Bearer {API_KEY}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "host": httpx.URL(url).netloc.decode(),
    }
    if session is not None:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = HANDSHAKE
    return headers


def _message(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an answer (a JSON body, or the last event of a stream)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))


def _post(client: httpx.Client, url: str, body: dict[str, Any], session: str | None) -> Any:
    return client.post(url, json=body, headers=_headers(url, session), timeout=60)


def _call(n: int) -> dict[str, Any]:
    params = {"name": "hello-world__greet", "arguments": {"message": f"m{n}"}}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


def _socket_of(base: Path, index: int) -> Path:
    (found,) = base.glob(f"proctor-mcp-workers-*/w{index}.sock")
    return found


def test_two_workers_serve_one_socket_and_a_session_is_answered_by_its_owner_from_either(
    ws: Ws, http_server: Any, request: pytest.FixtureRequest
) -> None:
    # where the worker folder is made, found by the test (short: a Unix socket's path is)
    base = Path(tempfile.mkdtemp(prefix="pw-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    ws.env["TMPDIR"] = str(base)
    ws.add_example("hello-world")
    server = http_server("skills/hello-world", "--workers", "2", *ws.allow())
    started = _started(ws, 2)
    assert sorted(e["worker"] for e in started) == [0, 1]
    assert all(e["workers"] == 2 for e in started)
    children = subprocess.run(
        ["ps", "--ppid", str(server.proc.pid), "-o", "pid="], capture_output=True, text=True
    ).stdout.split()
    assert len(children) == 1  # the first process and the one it started
    # the key reached the started worker over a pipe: not in its environment nor its arguments
    (child,) = children
    assert API_KEY.encode() not in Path(f"/proc/{child}/environ").read_bytes()
    assert API_KEY.encode() not in Path(f"/proc/{child}/cmdline").read_bytes()

    hello = {"protocolVersion": HANDSHAKE, "capabilities": {},
             "clientInfo": {"name": "workers-test", "version": "0"}}  # fmt: skip
    with httpx.Client() as tcp:
        opened = _post(
            tcp, server.url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
            None,
        )  # fmt: skip
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        owner = int(session.split("-", 1)[0][1:])  # named w<index>-<id> by its worker
        other = 1 - owner
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert _post(tcp, server.url, note, session).status_code == 202
    # the session's calls through each worker's own socket: the other one forwards
    answers = {}
    for index in (owner, other):
        transport = httpx.HTTPTransport(uds=str(_socket_of(base, index)))
        with httpx.Client(transport=transport) as via:
            response = _post(via, server.url, _call(index), session)
            assert response.status_code == 200, response.text
            answers[index] = _message(response)
    for index, answer in answers.items():
        assert answer["id"] == index
        assert answer["result"]["structuredContent"]["outcome"] == "completed", answer
    # a session id no worker holds is unknown wherever it lands
    bogus = f"w{owner}-{'0' * 32}"
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(_socket_of(base, other)))) as via:
        assert _post(via, server.url, _call(9), bogus).status_code == 404
        # without the key the forwarding worker refuses before forwarding anything
        anonymous = {k: v for k, v in _headers(server.url, session).items() if k != "authorization"}
        assert via.post(server.url, json=_call(10), headers=anonymous).status_code == 401
        # the session ends through the other worker too; its owner then no longer knows it
        ended = via.delete(server.url, headers=_headers(server.url, session))
        assert ended.status_code == 200, ended.text
    with httpx.Client() as tcp:
        assert _post(tcp, server.url, _call(11), session).status_code == 404


def test_calls_over_many_connections_complete_with_two_workers(ws: Ws, http_server: Any) -> None:
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    ws.add_example("hello-world")
    server = http_server("skills/hello-world", "--workers", "2")
    _started(ws, 2)

    async def one(n: int, out: list[Any]) -> None:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(server.url, http_client=http)) as client,
        ):
            out.append(await client.call_tool("hello-world__greet", {"message": f"c{n}"}))

    async def main() -> list[Any]:
        out: list[Any] = []
        async with anyio.create_task_group() as group:
            for n in range(6):
                group.start_soon(one, n, out)
        return out

    results = anyio.run(main)
    assert len(results) == 6
    for r in results:
        assert r.structured_content and r.structured_content["outcome"] == "completed", r
    runs = {e["run_id"] for e in ws.audit() if e["event"] == "run_sealed"}
    assert len(runs) >= 6


def _children(pid: int) -> list[str]:
    return subprocess.run(
        ["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True, text=True
    ).stdout.split()


def test_by_default_skills_are_served_by_one_process_per_core_and_session_runs_by_one(
    ws: Ws, http_server: Any
) -> None:
    from proctor.mcp.workers import default_workers

    ws.add_example("hello-world")
    server = http_server("skills/hello-world", workers=None)
    count = default_workers()
    # the others are started before the first one serves
    assert len(_children(server.proc.pid)) == count - 1
    started = _started(ws, count)
    assert sorted(e.get("worker", 0) for e in started) == list(range(count))
    hello = {"protocolVersion": HANDSHAKE, "capabilities": {},
             "clientInfo": {"name": "default-workers", "version": "0"}}  # fmt: skip
    with httpx.Client() as tcp:
        opened = _post(
            tcp, server.url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
            None,
        )  # fmt: skip
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert _post(tcp, server.url, note, session).status_code == 202
    # each call on a connection of its own: whichever process accepts it, the session's
    # owner answers (with two processes, all six reaching the owner is a 1-in-64 chance)
    for n in range(6):
        with httpx.Client() as tcp:
            answer = _message(_post(tcp, server.url, _call(n), session))
        assert answer["id"] == n
        assert answer["result"]["structuredContent"]["outcome"] == "completed", answer
    server.proc.terminate()
    server.proc.wait(timeout=60)

    # a stateless client's session run (--tool) lives in one process: one serves it
    tools = http_server("--tool", "fs.read", workers=None)
    assert _children(tools.proc.pid) == []


def test_the_turn_tools_runs_are_shared_between_workers(tmp_path: Path) -> None:
    path = tmp_path / "runs"
    first, second = SharedRuns(path), SharedRuns(path)
    first["run-a"] = None
    second["run-b"] = None
    first["run-a"] = None  # once only
    assert list(first) == ["run-a", "run-b"] == list(second)
    assert "run-b" in first and len(second) == 2


def test_a_handoff_that_is_not_one_is_refused(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"not json\n")
    os.close(write_end)
    with pytest.raises(UsageError) as refused:
        read_handoff(read_end)
    assert refused.value.code == "mcp_worker_handoff_invalid"
    os.close(read_end)


def test_workers_apply_to_http_only(ws: Ws) -> None:
    proc = ws.proctor("mcp", "--directives", "--workers", "2")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "--workers applies to --transport http only" in err
    assert "Traceback" not in err


def test_the_worker_folder_fits_a_unix_socket_path_under_a_long_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.mcp.workers import _worker_folder

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    folder = _worker_folder()
    try:
        assert len(os.fsencode(folder / "w0000.sock")) < 100
        assert folder.stat().st_mode & 0o777 == 0o700
        assert not list(deep.iterdir())  # the long one was not kept
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_approval_elicited_over_http_with_two_workers_runs_the_write_once(
    ws: Ws, http_server: Any, mode: str
) -> None:
    """``auto``: the input_required retry carries request state sealed by whichever worker
    answered, opened by whichever gets the retry; ``legacy``: the session's worker sends the
    elicitation on its stream and takes the answer, however it is reached."""
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp_types import ElicitResult, Implementation

    from tests.mcp.test_elicitation import PAGES

    ws.add_skill("pages", PAGES)
    (ws.root / "page.txt").write_text("old line\n", encoding="utf-8")
    server = http_server("pages", "--trust-client-approvals", "--workers", "2")
    _started(ws, 2)
    seen: list[Any] = []

    async def on_elicit(_context: Any, params: Any) -> Any:
        seen.append(params)
        return ElicitResult(action="accept", content={"approve": True})

    async def go() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        with anyio.fail_after(120):
            async with (
                create_mcp_http_client(headers=headers) as http,
                Client(
                    streamable_http_client(server.url, http_client=http),
                    elicitation_callback=on_elicit,
                    mode=mode,  # type: ignore[arg-type]
                    client_info=Implementation(name="test-client", version="1"),
                ) as client,
            ):
                result = await client.call_tool("pages__write", {"text": "new line\n"})
                assert result.structured_content is not None, result
                return dict(result.structured_content)

    doc = anyio.run(go)
    assert len(seen) == 1
    assert doc["status"] == "sealed" and doc["outcome"] == "completed", doc
    assert (ws.root / "page.txt").read_text() == "new line\n"
    decided = [e["decided_by"] for e in ws.audit() if e["event"] == "decision_recorded"]
    assert decided == ["client-relayed:test-client"]
