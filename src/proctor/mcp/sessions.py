"""Handshake-era sessions over HTTP (``Mcp-Session-Id``), held by proctor around the SDK's
per-session transport.

The handshake protocol (2025-11-25 and earlier) opens a session with ``initialize`` and names
it in every request after. The SDK's session manager holds each session as a
``StreamableHTTPServerTransport`` whose requests travel through memory streams to a
dispatcher's read loop, a task per request, a router task and an event-stream response with
its own task group, ping task and disconnect listener: ~3 M instructions of the loop's thread
a call, twice a 2026-07-28 request's. :class:`HandshakeSessions` does what the manager does
for these sessions (admission under the session limit, the credential a session was opened
with, the 404 of an unknown, expired or ended session, the idle timeout, DELETE) with the
same SDK transport per session, and answers the common request itself, as the dispatcher
would, through the session's own ``ServerRunner`` and ``Connection``:

a POST on a live session carrying one JSON-RPC request (not ``initialize``) that passes every
check the transport makes (Host, Origin, Content-Type, Accept, the message's shape), from a
client that declared no capability a server-to-client request needs (sampling, elicitation,
roots, tasks). Its answer is the event stream the transport writes: the request's
notifications (progress), then the response, byte for byte; a ``notifications/cancelled``
naming it cancels it and the stream ends with the transport's ``Request cancelled`` error.

Everything else goes to the session's SDK transport as it came (the body replayed): the
opening ``initialize``, notifications, a client's responses, GET (the standalone stream) and
DELETE, anything a check refuses, and every request of a client that may be sent a request
back (an elicitation waits on a response the dispatcher correlates, on the request's own
stream). Resumability is not offered (no event store), as proctor's manager never had one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import anyio
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, serve_connection
from mcp.server.streamable_http import (
    CONTENT_TYPE_JSON,
    MCP_SESSION_ID_HEADER,
    REQUEST_CANCELLED,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.streamable_http_manager import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT
from mcp.server.transport_security import (
    RequestBodyLimitMiddleware,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    handler_exception_to_error_data,
)
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from proctor.mcp.endpoint import FRAME_KEY
from proctor.mcp.session_calls import PING_EVERY, Call, error_message, event, pinger

if TYPE_CHECKING:
    from mcp.server import Server
    from starlette.types import Message, Receive, Scope, Send

__all__ = ["HandshakeSessions"]

logger = logging.getLogger(__name__)

_ASKING = ("sampling", "elicitation", "roots", "tasks")


async def _refuse(send: Send, status: int, message: str, code: int = INVALID_REQUEST) -> None:
    """The manager's answer to a request it serves no session for: a JSON-RPC error without
    an id (the same response, headers in the same order)."""
    error = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))
    body = error.model_dump_json(by_alias=True, exclude_unset=True)
    response = Response(body, status_code=status, media_type="application/json")
    await response({"type": "http"}, _nothing, send)


async def _nothing() -> Message:
    raise RuntimeError("a refusal reads nothing")


class _Session:
    """One session: the SDK's transport (and the loop that serves what reaches it), the
    session's ``Connection`` and a runner over it, the requests answered here in flight, and
    the idle countdown (a request in flight, an open GET stream included, holds it)."""

    def __init__(
        self, sid: str, transport: StreamableHTTPServerTransport, idle: float | None
    ) -> None:
        self.sid = sid
        self.transport = transport
        self.idle = idle
        self.idle_scope = anyio.CancelScope()
        self.in_flight = 0
        self.runner: ServerRunner[Any] | None = None
        self.calls: dict[str | int, Call] = {}
        headers = {
            "Cache-Control": "no-cache, no-transform",
            "Connection": "keep-alive",
            "Content-Type": "text/event-stream",
            MCP_SESSION_ID_HEADER: sid,
        }
        # the transport's own event-stream head, byte for byte
        self.head = EventSourceResponse(content=iter(()), headers=headers).raw_headers

    def asks(self) -> bool:
        """Whether the client declared a capability a server-to-client request needs."""
        runner = self.runner
        if runner is None:
            return True
        caps = runner.connection.client_capabilities
        return caps is not None and any(getattr(caps, n, None) is not None for n in _ASKING)


class HandshakeSessions:
    """The handshake era's stateful sessions (see the module): an ASGI app for requests
    without a 2026-07-28 version header, run under :meth:`run`."""

    def __init__(
        self,
        server: Server[Any],
        security: TransportSecuritySettings,
        *,
        max_body: int,
        idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
        max_sessions: int | None = DEFAULT_MAX_SESSIONS,
    ) -> None:
        self.server = server
        self._settings = security
        self._security = TransportSecurityMiddleware(security)
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._app = RequestBodyLimitMiddleware(self._handle, max_body)
        self._sessions: dict[str, _Session] = {}
        self._owners: dict[str, AuthorizationContext] = {}
        self._lock = anyio.Lock()
        self._group: anyio.abc.TaskGroup | None = None
        self._state: Any = None

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The SDK server's lifespan and the task group the sessions' loops run in."""
        async with self.server.lifespan(self.server) as state, anyio.create_task_group() as tg:
            self._state, self._group = state, tg
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                self._group = None
                self._sessions.clear()
                self._owners.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._group is None:
            raise RuntimeError("the sessions are not running (the lifespan has not started)")
        request = Request(scope, receive)
        sid = request.headers.get(MCP_SESSION_ID_HEADER)
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        session = None if sid is None else self._sessions.get(sid)
        if session is not None:
            if requestor != self._owners.get(session.sid):
                # only the credential that opened a session may use it; as if it did not exist
                await _refuse(send, 404, "Session not found")
                return
            await self._serve(session, request, scope, receive, send)
            if session.transport.is_terminated:  # the client ended it (DELETE)
                await self._discard(session)
            return
        if sid is not None:  # unknown, expired or ended
            await _refuse(send, 404, "Session not found")
            return
        async with self._lock:
            session = self._admit(requestor)
        if session is None:
            await _refuse(send, 503, "Too many open sessions", INTERNAL_ERROR)
            return
        await self._open(session, scope, receive, send)

    def _admit(self, requestor: AuthorizationContext | None) -> _Session | None:
        if self.max_sessions is not None and len(self._sessions) >= self.max_sessions:
            return None
        sid = uuid4().hex
        transport = StreamableHTTPServerTransport(
            mcp_session_id=sid, security_settings=self._settings
        )
        session = self._sessions[sid] = _Session(sid, transport, self.idle_timeout)
        if requestor is not None:
            self._owners[sid] = requestor
        return session

    async def _open(self, session: _Session, scope: Scope, receive: Receive, send: Send) -> None:
        """Start the session's loop and let its transport answer the request that opens it;
        a session whose opening request did not succeed is discarded again."""

        async def loop(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            # serve_loop's recipe, with the connection kept for the requests answered here
            async with session.transport.connect() as (read, write):
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read, write, inline_methods=frozenset({"initialize"})
                )
                connection = Connection.for_loop(dispatcher, session_id=session.sid)
                session.runner = ServerRunner(self.server, connection, self._state)
                task_status.started()
                try:
                    with session.idle_scope:
                        await serve_connection(
                            self.server, dispatcher, connection=connection,
                            lifespan_state=self._state,
                        )  # fmt: skip
                except Exception:
                    logger.exception("session %s crashed", session.sid)
                finally:
                    await self._discard(session)

        established = False
        try:
            assert self._group is not None
            await self._group.start(loop)
            status: list[int] = []

            async def watch(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status.append(message["status"])
                await send(message)

            await self._counted(session, session.transport.handle_request, scope, receive, watch)
            established = bool(status) and status[0] < 400
        finally:
            if not established:
                await self._discard(session)

    async def _discard(self, session: _Session) -> None:
        """Forget the session (its id answers 404 from now on) and end its transport."""
        if self._sessions.get(session.sid) is session:
            del self._sessions[session.sid]
            self._owners.pop(session.sid, None)
        for call in list(session.calls.values()):  # as the session's loop cancels its own
            call.ended = True
            call.scope.cancel()
        if not session.transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await session.transport.terminate()

    async def _counted(
        self, session: _Session, app: Any, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serve one request of ``session`` holding its idle countdown, as the transport does
        with its own (``idle_timeout``) when the SDK's manager gives it one."""
        if session.idle is None:
            await app(scope, receive, send)
            return
        if session.idle_scope.cancel_called:  # its time ran out: it is ending
            if not session.transport.is_terminated:
                await session.transport.terminate()
            await session.transport.handle_request(scope, receive, send)
            return
        session.in_flight += 1
        session.idle_scope.deadline = math.inf
        try:
            await app(scope, receive, send)
        finally:
            session.in_flight -= 1
            if not session.in_flight:
                session.idle_scope.deadline = anyio.current_time() + session.idle

    async def _serve(
        self, session: _Session, request: Request, scope: Scope, receive: Receive, send: Send
    ) -> None:
        req = await self._take(session, request, scope.get(FRAME_KEY))
        if req is not None:

            async def answer(scope: Scope, receive: Receive, send: Send) -> None:
                await self._answer(session, request, req, send)

            await self._counted(session, answer, scope, receive, send)
            return
        cancels = _cancelled_id(scope.get(FRAME_KEY))
        if cancels is not None and coerce_request_id(cancels) in session.calls:
            send = _on_accepted(send, lambda: _cancel(session, cancels))
        await self._counted(session, session.transport.handle_request, scope, receive, send)

    async def _take(self, session: _Session, request: Request, doc: Any) -> JSONRPCRequest | None:
        """The request when it is answered here (see the module); ``None`` leaves it to the
        session's transport, which then answers it as it always has."""
        if not isinstance(doc, dict) or "id" not in doc or doc.get("method") == "initialize":
            return None  # not parsed strictly, not a request, a batch, or the handshake
        if request.method != "POST" or session.transport.is_terminated or session.asks():
            return None
        if await self._security.validate_request(request, is_post=True) is not None:
            return None
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            return None
        kind = request.headers.get("content-type", "")
        if not any(p.strip() == CONTENT_TYPE_JSON for p in kind.split(";")[0].split(",")):
            return None
        try:
            message = jsonrpc_message_adapter.validate_python(doc, by_name=False)
        except ValidationError:
            return None
        return message if isinstance(message, JSONRPCRequest) else None

    async def _answer(
        self, session: _Session, request: Request, req: JSONRPCRequest, send: Send
    ) -> None:
        """What the dispatcher does for one request (the handler under a cancel scope, an
        error mapped as it maps one, nothing but the transport's ``Request cancelled`` for a
        request the client cancelled) and what the transport writes for it."""
        assert session.runner is not None
        call = Call(send, session.head, request, req)
        key = coerce_request_id(req.id)
        session.calls[key] = call
        pinging = asyncio.get_running_loop().call_later(PING_EVERY, pinger, call)
        answer: dict[str, Any] | None = None
        try:
            with call.scope:
                try:
                    result = await session.runner.on_request(call, req.method, req.params)
                finally:
                    call.close()
                    if session.calls.get(key) is call:
                        del session.calls[key]
                if not call.cancel_requested.is_set():
                    answer = {"jsonrpc": "2.0", "id": req.id, "result": result}
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                logger.exception("handler for %r raised", req.method)
                error = ErrorData(code=0, message=str(exc))  # the dispatcher's code for it
            if not call.cancel_requested.is_set():
                answer = error_message(req.id, error)
        finally:
            pinging.cancel()
            for task in call.pings:
                task.cancel()
        if call.pings:  # a ping may be half sent: the last event follows it
            await asyncio.wait(call.pings)
        if call.ended:
            last = b""
        elif answer is None:  # cancelled: the transport ends the stream with this
            error = ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
            last = event(error_message(req.id, error))
        else:
            last = event(answer)
        with contextlib.suppress(OSError):  # the client went away: the answer is dropped
            await call.write(last, last=True)


def _cancelled_id(doc: Any) -> str | int | None:
    """The request a ``notifications/cancelled`` names, if ``doc`` is one."""
    if not isinstance(doc, dict) or doc.get("method") != "notifications/cancelled" or "id" in doc:
        return None
    params = doc.get("params")
    rid = params.get("requestId") if isinstance(params, dict) else None
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return rid
    return None


def _cancel(session: _Session, request_id: str | int) -> None:
    """Cancel a request answered here, as the dispatcher cancels one (``interrupt``)."""
    call = session.calls.get(coerce_request_id(request_id))
    if call is not None:
        call.cancel_requested.set()
        call.scope.cancel()


def _on_accepted(send: Send, then: Any) -> Send:
    """``send``, calling ``then()`` once the transport accepts the message (202)."""

    async def watching(message: Message) -> None:
        await send(message)
        if message["type"] == "http.response.start" and message["status"] == 202:
            then()

    return watching
