"""A 2026-07-28 request over HTTP, served by proctor in front of the SDK's own entry.

The 2026-07-28 protocol has no session: each POST is one JSON-RPC request (its envelope in
``params._meta``) answered by one JSON-RPC reply. The SDK serves it as its session manager's
single-exchange entry; :class:`ModernExchange` serves the same requests with the same SDK
pieces (its transport security check, its inbound classification and ``Mcp-Param-*`` header
check, a ``ServerRunner`` on a born-ready ``Connection`` as :func:`mcp.server.runner.serve_one`
drives it, the SDK's error mapping), without what that entry spends on every request besides:
a second JSON parse of the body (:class:`~proctor.mcp.frames.StrictFrames` has parsed it
strictly and hands the document on), a task for the handler with a memory stream to the
response, a transport security object built per request, the reply validated as a model again
before it is written, and the connection's empty teardown unwound under a timed scope.

It takes only the request it answers as the SDK would: a POST whose body the strict reader
parsed, a JSON-RPC request (not a notification, a batch or a ``subscriptions/listen``) that
passes every check. Anything else, or any check that fails, goes to the SDK's entry as it
came (the body replayed), which then answers it, rejection and all, as it always has.

The answer is JSON unless the handler emits a notification (progress) or has run
:data:`PING_EVERY` seconds: the response then becomes an event stream, pinged while the
handler works, and the reply is its last event. A client that goes away cancels the handler
(a call's run is stopped and recorded before the cancellation completes). The server cannot
send the client a request on this protocol (``NoBackChannelError``): approvals travel as
``input_required`` results.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, aclose_shielded, modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest
from pydantic import ValidationError
from starlette.requests import Request

from proctor.mcp.endpoint import FRAME_KEY, PING_EVERY, is_modern, progress_params, respond
from proctor.receipts.jsontext import reusable_encoder

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.shared.dispatcher import CallOptions
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["PING_EVERY", "ModernExchange", "is_modern"]


_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
_PING = b": ping\r\n\r\n"


def _event(message: Mapping[str, Any]) -> bytes:
    """One SSE ``message`` event carrying ``message`` (as the SDK's entry frames it)."""
    return b"event: message\r\ndata: " + _json(message) + b"\r\n\r\n"


_text = reusable_encoder(sort_keys=False, separators=(",", ":"), ascii=True)


def _json(message: Mapping[str, Any]) -> bytes:
    """``json.dumps(message, separators=(",", ":"))``, from one encoder built once."""
    return _text(message).encode()


class _Reply:
    """One request's dispatch context (the SDK's ``DispatchContext``) and its response: JSON
    until the first event, an event stream from then on."""

    can_send_request = False  # no server-to-client request on this protocol

    def __init__(
        self,
        send: Send,
        request: Request,
        request_id: str | int,
        progress_token: str | int | None,
    ) -> None:
        self._send = send
        self.request_id = request_id
        self.progress_token = progress_token
        self.transport = TransportContext(
            kind="streamable-http", can_send_request=False, headers=request.headers
        )
        self.message_metadata = ServerMessageMetadata(request_context=request)
        self.streaming = False  # the event stream's head has been sent
        self.closed = False  # the reply is being written: no more events
        self._cancel: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        """Never set: this protocol cancels by closing the response (the handler is cancelled)."""
        if self._cancel is None:
            self._cancel = anyio.Event()
        return self._cancel

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        body = None if params is None else dict(params)
        message = JSONRPCNotification(jsonrpc="2.0", method=method, params=body)
        await self.event(_event(message.model_dump(mode="json", by_alias=True, exclude_none=True)))

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self.progress_token is None:
            return
        params = progress_params(self.progress_token, progress, total, message)
        await self.notify("notifications/progress", params)

    async def event(self, data: bytes) -> None:
        """Send one event (or ping), the stream's head first if it has not gone yet. A send
        that awaits nothing runs whole: two of them never interleave."""
        if self.closed:
            return
        if not self.streaming:
            self.streaming = True
            start = {"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS}
            await self._send(start)
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def finish(self, message: Mapping[str, Any], status: int) -> None:
        """Send the reply: the stream's last event, or the whole JSON response."""
        self.closed = True
        if self.streaming:
            last = {"type": "http.response.body", "body": _event(message), "more_body": False}
            await self._send(last)
        else:
            await respond(self._send, status, _json(message))


def _progress_token(params: Mapping[str, Any] | None) -> str | int | None:
    meta = params.get("_meta") if params is not None else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, str) or (isinstance(token, int) and not isinstance(token, bool)):
        return token
    return None


async def _serve_one(
    server: Server[Any],
    reply: _Reply,
    method: str,
    params: Mapping[str, Any] | None,
    connection: Connection,
    state: Any,
) -> dict[str, Any]:
    """What the SDK's ``serve_one`` does (one request through a ``ServerRunner`` on a
    born-ready connection, then the connection's teardown), with the teardown only when a
    handler or middleware pushed one: the SDK's unwinds the empty stack under a shielded,
    timed scope on every request."""
    try:
        return await ServerRunner(server, connection, state).on_request(reply, method, params)
    finally:
        # an interpreter whose stack keeps its callbacks elsewhere: always unwound
        if getattr(connection.exit_stack, "_exit_callbacks", True):
            await aclose_shielded(connection)


class _Watch:
    """What a request's reply watches while its handler works: the client going away (the
    handler is then cancelled) and the silence that turns the answer into an event stream,
    pinged every :data:`PING_EVERY` seconds. Runs as its own task, cancelled once the handler
    is done."""

    def __init__(self, receive: Receive, reply: _Reply, handler: anyio.CancelScope) -> None:
        self._receive = receive
        self._reply = reply
        self._handler = handler
        self.gone = False  # the client went away: no answer is written

    async def run(self) -> None:
        try:
            # the body first: StrictFrames replays it, at once (no timer for it)
            if (await self._receive())["type"] == "http.disconnect":
                return self._went()
            while True:
                try:
                    async with asyncio.timeout(PING_EVERY):
                        message = await self._receive()
                except TimeoutError:
                    await self._reply.event(_PING)
                    continue
                if message["type"] == "http.disconnect":
                    return self._went()
        except Exception:  # the connection failed under the reply: as if the client left
            self._went()

    def _went(self) -> None:
        self.gone = True
        self._handler.cancel()


class ModernExchange:
    """Serves a 2026-07-28 POST with the SDK's pieces, or hands it to the SDK's entry (see the
    module). ``fallback`` is that entry (the session manager's ASGI handler); ``server`` the
    SDK server it serves, whose lifespan state ``state`` is."""

    def __init__(
        self,
        server: Server[Any],
        security: TransportSecuritySettings,
        fallback: ASGIApp,
        state: Any = None,
    ) -> None:
        self.server = server
        self.state = state
        self._security = TransportSecurityMiddleware(security)
        self._fallback = fallback

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """The SDK server's lifespan, entered for the requests served here as the session
        manager enters it for its own (proctor's server has the SDK's default one, which
        holds nothing)."""
        async with self.server.lifespan(self.server) as state:
            self.state = state
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_modern(scope):
            await self._fallback(scope, receive, send)
            return
        request = Request(scope, receive)
        taken = await self._take(request, scope.get(FRAME_KEY))
        if taken is None:
            await self._fallback(scope, receive, send)
            return
        req, protocol, info, capabilities = taken
        connection = Connection.from_envelope(protocol, info, capabilities)
        reply = _Reply(send, request, req.id, _progress_token(req.params))
        answer: dict[str, Any] | None = None
        handler = anyio.CancelScope()
        watch = _Watch(receive, reply, handler)
        # a plain task of the loop, ended by a plain cancel: an anyio task group and its
        # scope's cancel (which formats the task's repr) cost more than the rest of this
        # method together
        watching = asyncio.get_running_loop().create_task(watch.run())
        try:
            with handler:
                try:
                    result = await _serve_one(
                        self.server, reply, req.method, req.params, connection, self.state
                    )
                    answer = {"jsonrpc": "2.0", "id": req.id, "result": result}
                except Exception as exc:  # the SDK's entry maps it the same way
                    error = JSONRPCError(jsonrpc="2.0", id=req.id, error=modern_error_data(exc))
                    answer = error.model_dump(mode="json", by_alias=True, exclude_none=True)
        finally:
            watching.cancel()
        if watch.gone or answer is None:
            return
        if reply.streaming:  # a ping may be half sent: the last event follows it
            await asyncio.wait((watching,))
        status = 200
        if "error" in answer:
            status = ERROR_CODE_HTTP_STATUS.get(answer["error"]["code"], 200)
        await reply.finish(answer, status)

    async def _take(
        self, request: Request, doc: Any
    ) -> tuple[JSONRPCRequest, str, Any, Any] | None:
        """The request and its envelope (version, client info, capabilities) when this
        exchange answers it; ``None`` leaves it to the SDK's entry."""
        if not isinstance(doc, dict) or "id" not in doc:
            return None  # not parsed strictly, a notification, a batch, not an object
        if await self._security.validate_request(request, is_post=True) is not None:
            return None  # Host, Origin or Content-Type refused
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            return None
        try:
            req = JSONRPCRequest.model_validate(doc)
        except ValidationError:
            return None
        headers = request.headers
        if req.method == "subscriptions/listen" or find_duplicated_routing_header(headers.items()):
            return None
        verdict = classify_inbound_request(doc, headers=dict(headers))
        if isinstance(verdict, InboundLadderRejection):
            return None
        if self._param_headers_refused(req, request) is not False:
            return None
        return req, verdict.protocol_version, verdict.client_info, verdict.client_capabilities

    def _param_headers_refused(self, req: JSONRPCRequest, request: Request) -> bool | None:
        """Whether a ``tools/call``'s ``Mcp-Param-*`` headers disagree with the tool's declared
        ones, as the SDK's entry checks them (``None``: it could not tell, and answers)."""
        lookup = self.server.get_tool_input_schema
        if req.method != "tools/call" or lookup is None:
            return False if req.method != "tools/call" else None
        params = req.params or {}
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or (
            arguments is not None and not isinstance(arguments, Mapping)
        ):
            return False
        if not arguments and not any(h.startswith(_PARAM_PREFIX) for h in request.headers):
            return False
        try:
            schema = lookup(name)
        except Exception:
            return None
        if schema is None:
            return False
        return validate_mcp_param_headers(schema, arguments or {}, request.headers) is not None
