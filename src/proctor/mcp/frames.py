"""Every MCP message is read strictly before the SDK parses it.

The SDK decodes a JSON-RPC frame with a reader where the last of two equal keys wins and the
tool handler only ever sees the decoded mapping, so a repeated key cannot be told from there.
This module reads the raw frame with the strict JSON reader (:mod:`proctor.contracts.json_strict`)
first, on both transports:

- stdio: :class:`StrictLines` filters the lines of the claimed standard input
  (:func:`proctor.mcp.pipes.claim_stdio`) before the SDK reads them; a refused line never
  reaches the SDK, and its request is answered with a JSON-RPC error on the server's own write
  stream (one writer: no torn frames);
- streamable HTTP: :class:`StrictFrames`, an ASGI middleware behind the bearer check, answers a
  refused POST body with HTTP 400 and the same JSON-RPC error.

Refused: ``duplicate_key`` (a key repeated in one object, at any depth) and ``too_deep``
(nesting deeper than 64). The error carries ``data: {"code": ...}``; the request's ``id`` when it
can be read, else ``null``. Each refusal is audited as ``mcp_frame_refused``. Text that is not
JSON at all is left to the SDK, which answers it as the protocol says.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio

from proctor.contracts import json_strict
from proctor.errors import ParseError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["INVALID_REQUEST", "StrictFrames", "StrictLines", "frame_refusal"]

INVALID_REQUEST = -32600
_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?[0-9]{1,19})')
_ID_SCAN = 64 * 1024  # where a top-level id of a frame too deep to parse is looked for
_REFUSED_CODES = frozenset({"duplicate_key", "too_deep"})

Audit = Callable[..., None]


def frame_refusal(raw: bytes | str) -> dict[str, Any] | None:
    """The JSON-RPC error answering a frame the strict reader refuses, or ``None``.

    ``None`` also for text that is not JSON at all: the SDK answers that itself.
    """
    try:
        json_strict.loads(raw, source="the message")
    except ParseError as exc:
        if exc.code not in _REFUSED_CODES:
            return None
        return {
            "jsonrpc": "2.0",
            "id": _request_id(raw),
            "error": {
                "code": INVALID_REQUEST,
                "message": f"proctor refuses this message: {exc.message.partition(': ')[2]}",
                "data": {"code": exc.code},
            },
        }
    return None


def _request_id(raw: bytes | str) -> str | int | None:
    """The id a refused frame's request carries, read leniently (the frame is refused anyway),
    so the client can match the error to its request."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        doc = json.loads(text)
    # RecursionError: far too deep for the parser; the id is then looked for at the top level
    except RecursionError:
        return _top_level_id(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    return _usable_id(doc.get("id"))


def _usable_id(value: Any) -> str | int | None:
    if isinstance(value, str | int) and not isinstance(value, bool):
        return value
    return None


def _top_level_id(text: str) -> str | int | None:
    for match in _ID.finditer(text, 0, _ID_SCAN):
        if json_strict.open_depth(text[: match.start()]) == 1:
            try:
                return _usable_id(json.loads(match.group(1)))
            except ValueError:
                return None
    return None


def _audit_refusal(audit: Audit, error: dict[str, Any], transport: str) -> None:
    audit(
        "mcp_frame_refused",
        code=error["error"]["data"]["code"],
        request_id=None if error["id"] is None else str(error["id"])[:200],
        caller={"transport": transport},
    )


# -- stdio -----------------------------------------------------------------------------------


class StrictLines:
    """The lines of the stdio stream, less the frames the strict reader refuses.

    A refused request is answered on :attr:`answers` (the server's write stream, set once the
    transport is open); the SDK never sees the frame.
    """

    def __init__(self, lines: AsyncIterable[str], audit: Audit) -> None:
        self._file = lines
        self._audit = audit
        self._ready = anyio.Event()
        self._answers: Any = None

    def answer_on(self, write_stream: Any) -> None:
        """Where refusals are answered: the transport's write stream."""
        self._answers = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._file:
            error = frame_refusal(line)
            if error is None:
                yield line
                continue
            await anyio.to_thread.run_sync(_audit_refusal, self._audit, error, "stdio")
            if error["id"] is not None:
                await self._answer(error)

    async def _answer(self, error: dict[str, Any]) -> None:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        await self._ready.wait()
        message = types.jsonrpc_message_adapter.validate_python(error, by_name=False)
        await self._answers.send(SessionMessage(message))


# -- streamable HTTP -------------------------------------------------------------------------


class StrictFrames:
    """ASGI middleware: a POST body the strict reader refuses gets HTTP 400 and never reaches
    the MCP app; any other request passes with its body as it came."""

    def __init__(self, app: ASGIApp, audit: Audit) -> None:
        self.app = app
        self._audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        error = frame_refusal(body)
        if error is None:
            replayed: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
            await self.app(scope, _replay(replayed, receive), send)
            return
        await anyio.to_thread.run_sync(_audit_refusal, self._audit, error, "http")
        payload = json.dumps(error).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _replay(first: list[Message], receive: Receive) -> Receive:
    async def again() -> Message:
        if first:
            return first.pop(0)
        return await receive()

    return again
