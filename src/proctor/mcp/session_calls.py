"""One request a handshake-era session answers itself (:mod:`proctor.mcp.sessions`): the
dispatch context a handler is given (:class:`Call`: its notifications, its progress, the
server-to-client requests it may not send) and the event stream the SDK's transport would
write for it, byte for byte (:func:`event`, :func:`error_message`), pinged while it works
(:func:`pinger`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCRequest
from starlette.requests import Request

from proctor.mcp.endpoint import PING_EVERY, progress_params

if TYPE_CHECKING:
    from mcp.shared.dispatcher import CallOptions
    from starlette.types import Send

__all__ = ["PING_EVERY", "Call", "error_message", "event", "pinger"]


_PING = b": ping\r\n\r\n"


def event(message: Mapping[str, Any]) -> bytes:
    """One ``message`` event, as the transport frames one (pydantic's JSON of the message)."""
    return b"event: message\r\ndata: " + pydantic_core.to_json(message) + b"\r\n\r\n"


class Call:
    """One request's dispatch context (what the dispatcher gives a handler) and its event
    stream: the head goes with the first event, the response is the last."""

    def __init__(
        self, send: Send, head: list[tuple[bytes, bytes]], request: Request, req: JSONRPCRequest
    ) -> None:
        self._send = send
        self._head = head
        self._request_id = req.id
        self._progress_token = progress_token_from_params(req.params)
        self.transport = TransportContext(kind="jsonrpc", can_send_request=True)
        self.message_metadata = ServerMessageMetadata(request_context=request)
        self.cancel_requested = anyio.Event()
        self.scope = anyio.CancelScope()
        self.started = False
        self.ended = False  # its session ended: the stream closes without an answer
        self.pings: list[asyncio.Task[None]] = []
        self._closed = False  # the handler is done: nothing more on its behalf

    @property
    def request_id(self) -> str | int:
        return self._request_id

    @property
    def can_send_request(self) -> bool:
        return not self._closed

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        # Only a client that declared no capability a request needs is served here (the
        # others go to the SDK's transport); ``ping`` is the one request left, and proctor's
        # handlers never send it.
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        if self._closed:
            return
        if params is not None:
            message = JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params))
        else:
            message = JSONRPCNotification(jsonrpc="2.0", method=method)
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        await self.write(b"event: message\r\ndata: " + data + b"\r\n\r\n")

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self._progress_token is None:
            return
        params = progress_params(self._progress_token, progress, total, message)
        await self.notify("notifications/progress", params)

    def close(self) -> None:
        self._closed = True

    async def write(self, data: bytes, last: bool = False) -> None:
        """Send one event (or ping), the stream's head first if it has not gone yet."""
        if not self.started:
            self.started = True
            await self._send({"type": "http.response.start", "status": 200, "headers": self._head})
        await self._send({"type": "http.response.body", "body": data, "more_body": not last})


def error_message(request_id: str | int, error: ErrorData) -> dict[str, Any]:
    """The JSON-RPC error answering ``request_id``, as the dispatcher writes one."""
    message = JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    return message.model_dump(mode="json", by_alias=True, exclude_unset=True)


def pinger(call: Call) -> None:
    """A request past :data:`PING_EVERY` seconds: its stream opens and is pinged until the
    answer."""

    async def ping() -> None:
        with contextlib.suppress(OSError):
            while True:
                await call.write(_PING)
                await asyncio.sleep(PING_EVERY)

    call.pings.append(asyncio.get_running_loop().create_task(ping()))
