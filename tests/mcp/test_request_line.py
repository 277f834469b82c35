"""Each request's ``mcp_request`` audit line: written exactly once, before anything else of the
request, and for a call a worker runs at once by the session that runs it, so that session's
next run start takes the anchor its seal recorded without hashing the log's lines again."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws


def _server(ws: Ws) -> Any:
    from proctor.mcp.catalog import load_catalog
    from proctor.mcp.server import ProctorServer
    from proctor.mcp.shared import ServerConfig
    from proctor.runtime.boundary.workspace import Workspace

    ws.add_example("hello-world")
    refs = ["skills/hello-world"]
    catalog = load_catalog(refs, cwd=ws.root, workspace_root=ws.root, environ=ws.env)
    config = ServerConfig(
        workspace=Workspace(ws.root), catalog=catalog, environ=ws.env, pool_size=1
    )
    return ProctorServer(config)


def test_a_calls_line_is_written_once_by_its_runs_session_and_the_next_run_hashes_nothing(
    ws: Ws, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.client import Client
    from mcp.shared.exceptions import MCPError

    from proctor.runtime.records import audit_breaks
    from proctor.runtime.records.audit import AuditLog

    verified: list[int] = []
    verify = audit_breaks.verify_bytes
    heads: list[int] = []
    head = AuditLog._head

    def counted(*args: Any, **kwargs: Any) -> Any:
        verified.append(1)
        return verify(*args, **kwargs)

    def head_read(log: AuditLog, *args: Any, **kwargs: Any) -> Any:
        heads.append(1)
        return head(log, *args, **kwargs)

    server = _server(ws)

    async def main() -> tuple[list[Any], list[int], Any]:
        async with Client(server.build()) as client:
            # the client lists the tools once, after its first call (another session's line)
            done = [
                await client.call_tool("hello-world__greet", {"message": f"m{n}"}) for n in (0, 1)
            ]
            monkeypatch.setattr(audit_breaks, "verify_bytes", counted)
            monkeypatch.setattr(AuditLog, "_head", head_read)
            for n in (2, 3, 4):
                done.append(await client.call_tool("hello-world__greet", {"message": f"m{n}"}))
            checks = list(verified) + [2 for _ in heads]
            try:
                await client.call_tool("nothing__here", {})
                refused = None
            except MCPError as exc:
                refused = exc
            return done, checks, refused

    try:
        done, checks, refused = anyio.run(main)
    finally:
        server.close()
    assert [r.structured_content["outcome"] for r in done] == ["completed"] * 5
    # each run's start found the lines since its session's last seal to be its own, the seal's
    # anchor among them with the digest taken as they were written: no chain hashed again (1);
    # and each seal found the log ending at its session's own last line, so its head was known
    # without reading the log under the lock (2)
    assert checks == []
    audit = ws.audit()
    calls = [n for n, e in enumerate(audit) if e["event"] == "mcp_request" and e.get("tool")]
    assert [audit[n]["tool"] for n in calls] == ["hello-world__greet"] * 5 + ["nothing__here"]
    runs = [r.structured_content["run_id"] for r in done]
    for n, run_id in zip(calls, runs, strict=False):
        # the call's line comes before any line of its run, and after the previous run's
        assert audit[n + 1].get("run_id") == run_id, audit[n : n + 2]
    # a call refused before any run: its line first, then the refusal, once each
    assert refused is not None
    last = calls[-1]
    assert audit[last + 1]["event"] == "mcp_tool_refused"
    assert [e["event"] for e in audit[last:]].count("mcp_request") == 1


def test_a_call_refused_for_its_arguments_has_its_line_before_the_refusal(ws: Ws) -> None:
    from mcp.client import Client

    server = _server(ws)
    deep: Any = "x"
    for _ in range(70):
        deep = [deep]

    async def main() -> Any:
        async with Client(server.build()) as client:
            return await client.call_tool("hello-world__greet", {"message": deep})

    try:
        result = anyio.run(main)
    finally:
        server.close()
    assert result.is_error
    events = [e["event"] for e in ws.audit() if e["event"].startswith("mcp_")]
    at = events.index("mcp_tool_refused")
    assert events[at - 1] == "mcp_request" and events.count("mcp_request") == 2  # list, call


def test_a_call_no_session_could_run_still_has_its_line(ws: Ws) -> None:
    from mcp.client import Client

    from proctor.errors import StoreError

    server = _server(ws)

    def no_session() -> Any:
        raise StoreError("the store cannot be opened", code="store_unavailable")

    server.pool._factory = no_session

    async def main() -> Any:
        async with Client(server.build()) as client:
            try:
                return await client.call_tool("hello-world__greet", {"message": "m"})
            except Exception as exc:  # the SDK answers the failure as an error
                return exc

    try:
        anyio.run(main)
    finally:
        server.close()
    calls = [e for e in ws.audit() if e["event"] == "mcp_request" and e.get("tool")]
    assert [e["tool"] for e in calls] == ["hello-world__greet"]


def test_a_core_tools_call_has_its_line_written_by_the_session_that_makes_it(
    ws: Ws, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.client import Client

    from proctor.mcp.core_tools import open_core_tools
    from proctor.mcp.server import ProctorServer
    from proctor.mcp.shared import ServerConfig
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records import audit

    (ws.root / "data").mkdir()
    (ws.root / "data" / "a.txt").write_text("hello\n")
    config = ServerConfig(
        workspace=Workspace(ws.root), catalog=_server(ws).config.catalog, environ=ws.env
    )
    server = ProctorServer(config, core=open_core_tools(ws.root, ["fs.read"]))
    read_back: list[int] = []
    last_line = audit._last_line

    def counted(fd: int, size: int) -> bytes | None:
        read_back.append(size)
        return last_line(fd, size)

    async def main() -> list[Any]:
        async with Client(server.build()) as client:
            done = [await client.call_tool("fs_read", {"path": "data/a.txt"}) for _ in range(2)]
            monkeypatch.setattr(audit, "_last_line", counted)
            done += [await client.call_tool("fs_read", {"path": "data/a.txt"}) for _ in range(3)]
            return done

    try:
        done = anyio.run(main)
    finally:
        server.close()
    assert [r.structured_content["content"] for r in done] == ["hello\n"] * 5
    # the request's line and the call's are one log object's: neither reads the log back to
    # chain its line to the other's
    assert read_back == []
    log = ws.audit()
    calls = [n for n, e in enumerate(log) if e["event"] == "mcp_request" and e.get("tool")]
    assert [log[n]["tool"] for n in calls] == ["fs_read"] * 5
    for n, call in zip(calls, range(1, 6), strict=True):
        # each call's line just before its own call's line (the first: before its run opens)
        after = [e for e in log[n + 1 :] if e.get("call_id")]
        assert after[0]["call_id"] == f"serve/turn/c{call}", log[n : n + 3]
    # once each: the server did not write it again when the call returned
    assert len([e for e in log if e["event"] == "mcp_request" and e.get("tool")]) == 5
    assert log[calls[1] + 1].get("call_id") == "serve/turn/c2"
