"""The event stream of ``proctor mcp --transport http``: one answer, three tasks fewer.

The SDK's streamable HTTP transport answers every POST (and the GET stream) with
sse_starlette's ``EventSourceResponse``, which starts five tasks per response (the stream, a
ping, a shutdown listener, a disconnect listener, the SDK's writer), each under a wrapper
that cancels the others when it ends. On a ``tools/call`` that was the largest share of the
event loop's work the transport adds. :func:`install` has the transport module use
:class:`EventStream` instead, which keeps what the response does with two tasks:

- the SDK's writer (its events reach the stream through a memory stream without a buffer,
  so it runs beside it);
- one watcher that waits for the client to go (``http.disconnect``: the response ends and the
  SDK's writer is cancelled, so a call whose client left is cancelled as before) and, every
  :data:`PING_SECONDS` the stream stays open, sends a comment line (the keep-alive ping).

The stream itself runs in the response's own task. The server's shutdown ends every open
stream (:func:`close_all`, which the HTTP server calls before uvicorn's graceful wait) with the
end of the chunked body, as sse_starlette's shutdown listener did. Events are framed by
sse_starlette's own encoder; a HEAD request gets the headers and an empty body. The JSON
response mode and the stateless mode are not used: the back-channel (approvals asked during
a call, progress, pings, cancel on disconnect) needs the stream.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterable, Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
from sse_starlette.event import ServerSentEvent, ensure_bytes

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = ["PING_SECONDS", "EventStream", "close_all", "install"]

PING_SECONDS = 15.0
"""How often an open stream sends a comment line (sse_starlette's default)."""
SEP = "\r\n"

_OPEN: weakref.WeakSet[EventStream] = weakref.WeakSet()


class EventStream:
    """A ``text/event-stream`` response of SSE events from ``content``, with the SDK's
    ``data_sender_callable`` running beside it (the arguments the SDK's transport gives
    sse_starlette's ``EventSourceResponse``)."""

    def __init__(
        self,
        content: AsyncIterable[Any],
        data_sender_callable: Callable[[], Coroutine[Any, Any, None]] | None = None,
        headers: Mapping[str, str] | None = None,
        status_code: int = 200,
    ) -> None:
        self.content = content
        self.sender = data_sender_callable
        self.status_code = status_code
        given = {k.lower(): v for k, v in (headers or {}).items()}
        given.setdefault("cache-control", "no-store")
        given["connection"] = "keep-alive"
        given.setdefault("content-type", "text/event-stream")
        given["x-accel-buffering"] = "no"
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in given.items()]
        self._scope: anyio.CancelScope | None = None
        self._pinging: anyio.Event | None = None
        self._started = self._ending = self._complete = self._gone = self._interrupted = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code,
                 "headers": self.raw_headers}  # fmt: skip
        if scope.get("method", "").upper() == "HEAD":
            await send(start)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        try:
            async with anyio.create_task_group() as group:
                self._scope = group.cancel_scope
                _OPEN.add(self)
                try:
                    if self.sender is not None:
                        group.start_soon(self.sender)
                    group.start_soon(self._watch, receive, send)
                    await self._stream(start, send)
                finally:
                    _OPEN.discard(self)
                group.cancel_scope.cancel()
        except BaseExceptionGroup as failed:
            # a single failure raised bare (as sse_starlette and Starlette do), so the SDK's
            # handlers around the response see the exception, not a group of one
            exc: BaseException = failed
            while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            raise exc from exc.__cause__
        if self._started and not (self._ending or self._gone or self._interrupted):
            # ended by the server's shutdown: the chunked body is closed properly
            try:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                self._complete = True
            except OSError:
                pass

    async def _stream(self, start: dict[str, Any], send: Send) -> None:
        await self._send(send, start)
        self._started = True
        # No lock against the ping on the way: a send writes its whole chunk at once (after
        # waiting for the socket to drain, if it must), so chunks never interleave. The end
        # waits for a ping in flight, and no ping starts after it.
        async for data in self.content:
            chunk = ensure_bytes(data, SEP)
            await self._send(send, {"type": "http.response.body", "body": chunk,
                                    "more_body": True})  # fmt: skip
        self._ending = True
        if self._pinging is not None:
            await self._pinging.wait()
        await self._send(send, {"type": "http.response.body", "body": b"", "more_body": False})
        self._complete = True

    async def _send(self, send: Send, message: dict[str, Any]) -> None:
        try:
            await send(message)
        except BaseException:
            self._interrupted = True  # the transport's state is unknown: nothing more is sent
            raise

    async def _watch(self, receive: Receive, send: Send) -> None:
        """Until the client goes (the response then ends); a ping every :data:`PING_SECONDS`."""
        while not self._complete:
            message = None
            with anyio.move_on_after(PING_SECONDS):
                message = await receive()
            if message is None:  # no word from the client for a while: ping
                ping = ServerSentEvent(comment=f"ping - {datetime.now(UTC)}", sep=SEP)
                if self._started and not self._ending:
                    self._pinging = pinging = anyio.Event()
                    try:
                        await self._send(send, {"type": "http.response.body",
                                                "body": ensure_bytes(ping, SEP),
                                                "more_body": True})  # fmt: skip
                    finally:
                        self._pinging = None
                        pinging.set()
            elif message["type"] == "http.disconnect":
                if not self._complete:
                    self._gone = True
                if self._scope is not None:
                    self._scope.cancel()
                return

    def close(self) -> None:
        """End the response (the server is shutting down)."""
        if self._scope is not None:
            self._scope.cancel()


def close_all() -> None:
    """End every open stream of this process (from the event loop's thread)."""
    for stream in list(_OPEN):
        stream.close()


def install() -> None:
    """Have the SDK's streamable HTTP transport answer with :class:`EventStream`."""
    import mcp.server.streamable_http as transport

    setattr(transport, "EventSourceResponse", EventStream)  # noqa: B010  (a module of the SDK)
