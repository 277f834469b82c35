""":class:`proctor.mcp.endpoint.McpEndpoint`: the SDK's session manager at ``/mcp`` and nothing
else, without a Starlette app around it (an ASGI-level check, no server started)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from proctor.mcp.endpoint import MCP_PATH, McpEndpoint


class FakeManager:
    """Stands for the SDK's ``StreamableHTTPSessionManager``: records what reaches it."""

    def __init__(self, fail_start: bool = False) -> None:
        self.handled: list[str] = []
        self.running = False
        self.ran = False
        self._fail = fail_start

    async def handle_request(self, scope: Any, receive: Any, send: Any) -> None:
        assert self.running, "a request before the lifespan started the manager"
        self.handled.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"mcp"})

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        if self._fail:
            raise RuntimeError("the manager cannot start")
        self.running = self.ran = True
        try:
            yield
        finally:
            self.running = False


def _drive(
    app: McpEndpoint,
    scope: dict[str, Any],
    inbox: list[dict[str, Any]],
    sent: list[dict[str, Any]] | None = None,
) -> list[Any]:
    sent = [] if sent is None else sent

    async def receive() -> dict[str, Any]:
        return inbox.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def go() -> None:
        with anyio.fail_after(5):
            await app(scope, receive, send)

    anyio.run(go)
    return sent


def _lifespan(manager: FakeManager, sent: list[dict[str, Any]]) -> None:
    inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    _drive(McpEndpoint(manager), {"type": "lifespan"}, inbox, sent)  # type: ignore[arg-type]


def test_the_lifespan_runs_the_session_manager() -> None:
    manager = FakeManager()
    sent: list[dict[str, Any]] = []
    _lifespan(manager, sent)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert manager.ran and not manager.running


def test_a_manager_that_cannot_start_fails_the_startup() -> None:
    sent: list[dict[str, Any]] = []
    with pytest.raises(RuntimeError):
        _lifespan(FakeManager(fail_start=True), sent)
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]


def _request(path: str) -> tuple[FakeManager, list[dict[str, Any]]]:
    manager = FakeManager()
    manager.running = True
    scope = {"type": "http", "method": "POST", "path": path, "headers": []}
    inbox = [{"type": "http.request", "body": b"{}", "more_body": False}]
    return manager, _drive(McpEndpoint(manager), scope, inbox)  # type: ignore[arg-type]


def test_only_the_mcp_path_reaches_the_session_manager() -> None:
    manager, sent = _request(MCP_PATH)
    assert manager.handled == [MCP_PATH] and sent[0]["status"] == 200
    for other in ("/", "/mcp/", "/mcpx", "/other", "/mcp/../mcp"):
        manager, sent = _request(other)
        assert manager.handled == [], other
        assert sent[0]["status"] == 404 and sent[1]["body"] == b"Not Found"
        length = dict(sent[0]["headers"])[b"content-length"]
        assert int(length) == len(sent[1]["body"])


def test_a_websocket_is_closed() -> None:
    manager = FakeManager()
    manager.running = True
    scope = {"type": "websocket", "path": MCP_PATH, "headers": []}
    sent = _drive(McpEndpoint(manager), scope, [{"type": "websocket.connect"}])  # type: ignore[arg-type]
    assert [m["type"] for m in sent] == ["websocket.close"] and manager.handled == []
