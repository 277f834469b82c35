"""The ASGI endpoint of ``proctor mcp --transport http``: the SDK's streamable HTTP session
manager at :data:`MCP_PATH`, and nothing else (:class:`McpEndpoint`).

Proctor's own layers (:class:`~proctor.mcp.http.BearerAuth`, :class:`~proctor.mcp.frames.
StrictFrames`, among several workers :class:`~proctor.mcp.workers.SessionAffinity`) stand in
front of it, a 2026-07-28 request is answered by proctor's own entry in front of the manager
(:mod:`proctor.mcp.exchange`), and a handshake-era request by proctor's own sessions
(:mod:`proctor.mcp.sessions`); :func:`proctor.mcp.http.build_app` puts them together.
"""

from __future__ import annotations

import contextlib
import functools
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

MCP_PATH = "/mcp"
"""Where the endpoint serves MCP; any other path gets 404."""

FRAME_KEY = "proctor.frame"
"""The scope key under which :class:`~proctor.mcp.frames.StrictFrames` hands on the POST body
it parsed (the JSON document), so no layer behind it parses the body again."""

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "FRAME_KEY",
    "MCP_PATH",
    "PING_EVERY",
    "Exchange",
    "McpEndpoint",
    "Sessions",
    "is_modern",
    "progress_params",
    "respond",
]

PING_EVERY = 15.0
"""Seconds a handler may work without a word before its answer becomes an event stream, and
between the pings of that stream (the SDK's own transports use the same), on both protocols."""


def progress_params(
    token: str | int, progress: float, total: float | None, message: str | None
) -> dict[str, Any]:
    """The params of a ``notifications/progress`` for ``token`` (``total`` and ``message`` only
    when given), as the SDK's dispatch contexts send them."""
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    return params


_VERSION_HEADER = b"mcp-protocol-version"


@functools.cache
def _handshake_versions() -> frozenset[bytes]:
    """The SDK's handshake-era protocol versions, as a header's bytes (imported on first use)."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return frozenset(v.encode("latin-1") for v in HANDSHAKE_PROTOCOL_VERSIONS)


def is_modern(scope: Scope) -> bool:
    """Whether the SDK's session manager would route this request to its 2026-07-28 entry: an
    ``MCP-Protocol-Version`` header (the first one) naming no handshake-era version."""
    for name, value in scope["headers"]:
        if name == _VERSION_HEADER:
            return value not in _handshake_versions()
    return False


class Exchange(Protocol):
    """What answers a parsed POST in front of the session manager
    (:class:`proctor.mcp.exchange.ModernExchange`): an ASGI app with a lifespan of its own."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    def lifespan(self) -> AbstractAsyncContextManager[None]: ...


class Sessions(Protocol):
    """What answers a handshake-era request in front of the session manager
    (:class:`proctor.mcp.sessions.HandshakeSessions`): an ASGI app run under :meth:`run`."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    def run(self) -> AbstractAsyncContextManager[None]: ...


async def respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes = b"application/json",
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    """Send a whole small response: ``status``, ``body`` with its type and length, and any
    other ``headers`` (the answers proctor's own layers give without the SDK)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                *headers,
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class McpEndpoint:
    """The ASGI app of the SDK's streamable HTTP transport at :data:`MCP_PATH`, and nothing
    else: a request for any other path gets 404, a websocket is closed, and the lifespan runs
    the SDK's session manager.

    It stands where the SDK's ``streamable_http_app()`` would put a Starlette app around the
    same session manager (its public ``handle_request`` and ``run``): a router, an error and
    an exception middleware, each a layer of every request and of every message a response
    sends, for the one route it serves. A request the app fails with is answered 500 by the
    server (uvicorn) as Starlette's error middleware answers it.

    With an ``exchange``, a POST whose body the strict reader parsed goes to it first (it
    answers a 2026-07-28 request itself and hands anything else to the manager), and the
    lifespan runs its lifespan beside the manager's. With ``sessions``, a request the manager
    would serve as the handshake era's (no 2026-07-28 version header) goes to them instead,
    and the lifespan runs them too.
    """

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        exchange: Exchange | None = None,
        sessions: Sessions | None = None,
    ) -> None:
        self.manager = manager
        self.exchange = exchange
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if scope["path"] == MCP_PATH:
                # a POST whose body was parsed: perhaps a 2026-07-28 request proctor serves
                # itself (proctor.mcp.exchange), which hands anything else to the manager
                app: ASGIApp = self.manager.handle_request
                if self.sessions is not None and not is_modern(scope):
                    app = self.sessions  # the handshake era: proctor's sessions
                elif self.exchange is not None and FRAME_KEY in scope:
                    app = self.exchange
                await app(scope, receive, send)
                return
            await respond(send, 404, b"Not Found", b"text/plain; charset=utf-8")
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1000})
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        started = False
        try:
            exchange = (
                contextlib.nullcontext() if self.exchange is None else self.exchange.lifespan()
            )
            sessions = contextlib.nullcontext() if self.sessions is None else self.sessions.run()
            async with self.manager.run(), exchange, sessions:
                started = True
                await send({"type": "lifespan.startup.complete"})
                await receive()  # lifespan.shutdown
        except BaseException as exc:
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": failed, "message": repr(exc)})
            raise
        await send({"type": "lifespan.shutdown.complete"})
