"""Every MCP message is read strictly before the SDK parses it.

The SDK decodes a JSON-RPC frame with a reader where the last of two equal keys wins and the
tool handler only ever sees the decoded mapping, so a repeated key cannot be told from there.
This module reads the raw frame with the strict JSON reader (:mod:`proctor.contracts.json_strict`)
first, on both transports:

- stdio: :func:`read_line` reads each line of the claimed standard input for the transport
  (:mod:`proctor.mcp.wire`); a refused line never reaches the SDK, and its request is
  answered with a JSON-RPC error on the server's own write stream (one writer: no torn
  frames). Text that is not a JSON-RPC message at all is answered there too (the SDK's own
  stdio transport drops it unanswered);
- streamable HTTP: :class:`StrictFrames`, an ASGI middleware behind the bearer check, answers a
  refused POST body with HTTP 400 and the same JSON-RPC error, and a body longer than
  :data:`MAX_BODY` with HTTP 413 (``frame_too_large``) as soon as it is longer, never holding
  more of it.

Refused: ``duplicate_key`` (a key repeated in one object, at any depth) and ``too_deep``
(nesting deeper than 64). The error carries ``data: {"code": ...}``; the request's ``id`` when it
can be read, else ``null``. Each refusal is audited as ``mcp_frame_refused``. Over HTTP, text
that is not JSON at all is left to the SDK, which answers it as the protocol says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from pydantic import ValidationError

from proctor.contracts import json_strict
from proctor.errors import ParseError
from proctor.mcp.endpoint import FRAME_KEY, respond

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "INVALID_REQUEST",
    "MAX_BODY",
    "MAX_LINE",
    "PARSE_ERROR",
    "StrictFrames",
    "answered",
    "audit_refusal",
    "frame_refusal",
    "id_refusal",
    "read_frame",
    "read_line",
    "refusal",
]

INVALID_REQUEST = -32600
PARSE_ERROR = -32700
MAX_LINE = 16 * 1024 * 1024
"""The longest stdio line read (characters): a longer one is refused, never held whole."""
MAX_BODY = 4 * 1024 * 1024
"""The longest HTTP POST body read (bytes); the SDK's transport is given the same limit."""
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
        return _strict_refusal(raw, exc)
    return None


def id_refusal(raw: bytes | str) -> dict[str, Any] | None:
    """The JSON-RPC error (``-32600``, ``invalid_request``, id ``null``) answering a request
    whose ``id`` is not a string or an integer (``null``, a boolean, a fraction, an array, an
    object), or ``None``.

    The SDK reads such a frame as a notification, which is never answered: the client would
    wait for ever on a request that was dropped without a word.
    """
    try:
        doc = json.loads(raw)
    # RecursionError: far too deep for the parser; the strict reader refuses such a frame
    except (ValueError, RecursionError):
        return None
    return _id_refusal_of(doc)


def refusal(raw: bytes | str) -> dict[str, Any] | None:
    """:func:`frame_refusal`, else :func:`id_refusal`: the answer to a frame refused before
    the SDK reads it, or ``None``. A frame the strict reader takes is parsed once."""
    return read_frame(raw)[0]


def read_frame(raw: bytes | str) -> tuple[dict[str, Any] | None, Any]:
    """:func:`refusal`, and the document when the strict reader took the frame (else
    ``None``: the SDK parses and answers what is not strict JSON)."""
    try:
        doc = json_strict.loads(raw, source="the message")
    except ParseError as exc:
        # not strict JSON (NaN, an unpaired surrogate...): its id is read as id_refusal reads it
        return _strict_refusal(raw, exc) or id_refusal(raw), None
    return _id_refusal_of(doc), doc


def _strict_refusal(raw: bytes | str, exc: ParseError) -> dict[str, Any] | None:
    if exc.code not in _REFUSED_CODES:
        return None
    return _error(_request_id(raw), INVALID_REQUEST, exc.message.partition(": ")[2], exc.code)


def _id_refusal_of(doc: Any) -> dict[str, Any] | None:
    if not isinstance(doc, dict) or "method" not in doc or "id" not in doc:
        return None
    if _usable_id(doc["id"]) is not None:
        return None
    why = "the id of a request is a string or an integer"
    return _error(None, INVALID_REQUEST, why, "invalid_request", "Invalid Request")


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


def audit_refusal(audit: Audit, error: dict[str, Any], transport: str) -> None:
    """Write the ``mcp_frame_refused`` event of a refused frame."""
    audit(
        "mcp_frame_refused",
        code=error["error"]["data"]["code"],
        request_id=None if error["id"] is None else str(error["id"])[:200],
        caller={"transport": transport},
    )


# -- stdio -----------------------------------------------------------------------------------


def read_line(line: str | None) -> SessionMessage | dict[str, Any] | None:
    """One stdio line as the server reads it: the message, or the JSON-RPC error that answers
    it (``None``: a blank line, skipped).

    ``None`` in place of the line is a line longer than :data:`MAX_LINE`, which was never held
    whole (:class:`proctor.mcp.pipes.LoopLines`). The message is the one the SDK's stdio
    transport makes of the line, validated from the document the strict reader read (see the
    module), so the line is parsed once; a line the strict reader cannot read is the SDK's to
    parse. What it refuses:

    - ``frame_too_large``: a line longer than :data:`MAX_LINE` characters (``-32600``);
    - ``duplicate_key``, ``too_deep``: as the strict reader refuses them (``-32600``);
    - ``not_json``: text that is not JSON (``-32700``, Parse error);
    - ``invalid_request``: JSON that is not a JSON-RPC message the protocol knows, such as an
      array, a number, an object without ``"jsonrpc": "2.0"``, or a request whose ``id`` is
      not a string or an integer (:func:`id_refusal`) (``-32600``).

    The error carries the request's ``id`` when it can be read, else ``null``.
    """
    from mcp.shared.message import SessionMessage

    if line is None or len(line) > MAX_LINE:
        why = f"longer than {MAX_LINE} characters"
        return _error(None, INVALID_REQUEST, why, "frame_too_large")
    if line.isspace() or not line:
        return None
    refused, doc = read_frame(line)
    if refused is not None:
        return refused
    adapter = types.jsonrpc_message_adapter
    try:
        # the document the strict reader read, not the text parsed a second time: JSON's
        # values validate in Python mode as in JSON mode (the SDK validates each request's
        # params from this document in Python mode either way)
        if doc is not None:
            return SessionMessage(adapter.validate_python(doc, by_name=False))
        return SessionMessage(adapter.validate_json(line, by_name=False))
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors(include_url=False)):
            return _error(None, PARSE_ERROR, "not JSON", "not_json", prefix="Parse error")
        why = "not a JSON-RPC 2.0 message this server reads"
        return _error(_request_id(line), INVALID_REQUEST, why, "invalid_request", "Invalid Request")


def _error(
    request_id: str | int | None, code: int, why: str, name: str, prefix: str = ""
) -> dict[str, Any]:
    message = f"{prefix}: {why}" if prefix else f"proctor refuses this message: {why}"
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": {"code": name}},
    }


def answered(error: dict[str, Any]) -> bool:
    """Whether a refused line gets its error on the wire: always, but for a frame the strict
    reader refuses that carries no ``id`` (a notification, which is never answered)."""
    return error["id"] is not None or error["error"]["data"]["code"] not in _REFUSED_CODES


# -- streamable HTTP -------------------------------------------------------------------------


class StrictFrames:
    """ASGI middleware: a POST body the strict reader refuses, or a request whose ``id`` is
    not a string or an integer (:func:`id_refusal`), gets HTTP 400 and never reaches the MCP
    app; any other request passes with its body as it came.

    A body longer than ``max_body`` bytes (declared in ``Content-Length`` or sent) gets HTTP
    413 with the JSON-RPC error ``frame_too_large`` (``-32600``, id ``null``) as soon as it is
    known to be longer: it is never held whole nor parsed.
    """

    def __init__(self, app: ASGIApp, audit: Audit, max_body: int = MAX_BODY) -> None:
        self.app = app
        self._audit = audit
        self._max = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        too_large = _error(
            None, INVALID_REQUEST, f"a body longer than {self._max} bytes", "frame_too_large"
        )
        declared, body, more = _declared_length(scope), bytearray(), True
        while more and declared <= self._max and len(body) <= self._max:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
        if declared > self._max or len(body) > self._max:
            await anyio.to_thread.run_sync(audit_refusal, self._audit, too_large, "http")
            await _answer(send, 413, too_large)
            return
        error, doc = read_frame(bytes(body))
        if error is None:
            replayed: list[Message] = [
                {"type": "http.request", "body": bytes(body), "more_body": False}
            ]
            if doc is not None:  # the document, for the layers behind (proctor.mcp.exchange)
                scope[FRAME_KEY] = doc
            await self.app(scope, _replay(replayed, receive), send)
            return
        await anyio.to_thread.run_sync(audit_refusal, self._audit, error, "http")
        await _answer(send, 400, error)


def _declared_length(scope: Scope) -> int:
    """The body length a request declares (``Content-Length``), or 0 (none, or not a number:
    the server that read the request refuses that itself); a number of more than 18 digits
    counts as too long without being converted."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length" and value.isdigit():
            return int(value) if len(value) <= 18 else 10**18
    return 0


async def _answer(send: Send, status: int, error: dict[str, Any]) -> None:
    await respond(send, status, json.dumps(error).encode())


def _replay(first: list[Message], receive: Receive) -> Receive:
    async def again() -> Message:
        if first:
            return first.pop(0)
        return await receive()

    return again
