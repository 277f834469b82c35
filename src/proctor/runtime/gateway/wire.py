"""Talk to one upstream MCP server: the few JSON-RPC requests a governed call needs.

An upstream is reached from a tool handler, which runs in a worker thread and blocks until its
call is answered; so this client is synchronous and small: ``initialize``, ``tools/list`` and
``tools/call``, over a sandboxed process's pipes (:class:`StdioWire`) or over streamable HTTP
through the egress guard's httpx transport (:class:`HttpWire`). Requests the server sends to
the client are answered: ``ping`` with an empty result, anything else (sampling, roots,
elicitation: proctor offers none of them upstream) with "method not found". Notifications
from the server are dropped.

Each wire serialises its requests (one in flight): a governed call is admitted one at a time
per upstream connection anyway, and the stdio framing has no room for a reader thread's races.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proctor.contracts import json_strict
from proctor.errors import ParseError, ToolFailed

if TYPE_CHECKING:
    import httpx

__all__ = ["PROTOCOL_VERSION", "HttpWire", "StdioWire", "Wire"]

PROTOCOL_VERSION = "2025-11-25"
"""The protocol version proctor asks for in ``initialize`` (servers answer with theirs)."""

_CLIENT_INFO = {"name": "proctor-gateway", "version": "1"}
_MAX_LINE = 16 * 1024 * 1024


def _failed(server: str, message: str, code: str = "mcp_upstream_failed") -> ToolFailed:
    return ToolFailed(f"upstream MCP server '{server}': {message}", code=code)


def _message(server: str, data: bytes | str) -> Any:
    """One JSON-RPC message from an upstream, read strictly; ``None`` for text that is not
    JSON at all (a server's stray log line on stdout is not a message).

    A message that is JSON to a lenient reader but not to the strict one (a key given twice,
    ``NaN``/``Infinity``, nesting too deep) is refused, not skipped: the server sent an answer
    that two readers would take two ways (a repeated ``isError`` or ``id``), and whatever it
    answers is not acted on.

    Raises:
        ToolFailed: ``mcp_upstream_malformed``.
    """
    try:
        return json_strict.loads(data, source="upstream message")
    except ParseError as exc:
        if exc.code == "not_json":
            try:
                json.loads(data)
            except (ValueError, RecursionError):
                return None  # not JSON at all
        raise _failed(
            server,
            f"sent a message proctor does not act on ({exc.code}: {exc}), nothing it said was used",
            "mcp_upstream_malformed",
        ) from None


class Wire(abc.ABC):
    """One connection to an upstream: initialised on first use, closed by :meth:`close`."""

    def __init__(self, server: str, timeout: float) -> None:
        self.server = server
        self.timeout = timeout
        self.sent = 0  # requests sent (tests count them to prove a refused call sent nothing)
        self._next = 0
        self._lock = threading.Lock()
        self._ready = False
        self.server_info: dict[str, Any] = {}

    @abc.abstractmethod
    def _exchange(self, message: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send one request and read its answer (``None`` when it never came in time)."""

    @abc.abstractmethod
    def _notify(self, message: dict[str, Any]) -> None:
        """Send one notification (no answer)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection (a stdio server's process tree ends)."""

    def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request and return its ``result``.

        Raises:
            ToolFailed: ``mcp_upstream_failed`` (the server did not answer in time, closed,
                or sent something that is not JSON-RPC), ``mcp_upstream_error`` (it answered
                with a JSON-RPC error).
        """
        with self._lock:
            if not self._ready:
                self._initialize()
            return self._request(method, params)

    def _request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        deadline = time.monotonic() + self.timeout
        self.sent += 1
        reply = self._exchange(
            {"jsonrpc": "2.0", "id": ident, "method": method, "params": dict(params)}, deadline
        )
        if reply is None or reply.get("id") != ident:
            raise _failed(self.server, f"no answer to {method}")
        error = reply.get("error")
        if isinstance(error, dict):
            raise _failed(
                self.server,
                f"{method} failed: {str(error.get('message') or '')[:500]}",
                "mcp_upstream_error",
            )
        result = reply.get("result")
        if not isinstance(result, dict):
            raise _failed(self.server, f"{method} answered without a result object")
        return result

    def _initialize(self) -> None:
        result = self._request(
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": _CLIENT_INFO},
        )
        info = result.get("serverInfo")
        self.server_info = dict(info) if isinstance(info, dict) else {}
        self._notify({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self._ready = True

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages).

        Raises:
            ToolFailed: as :meth:`request`.
        """
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):
            params = {} if cursor is None else {"cursor": cursor}
            page = self.request("tools/list", params)
            listed = page.get("tools")
            if not isinstance(listed, list):
                raise _failed(self.server, "tools/list answered without a list of tools")
            tools.extend(t for t in listed if isinstance(t, dict))
            nxt = page.get("nextCursor")
            if not isinstance(nxt, str) or not nxt:
                return tools
            cursor = nxt
        raise _failed(self.server, "tools/list did not end after 100 pages")

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Call one tool; its ``CallToolResult`` as the server sent it.

        Raises:
            ToolFailed: as :meth:`request`.
        """
        return self.request("tools/call", {"name": name, "arguments": dict(arguments)})

    def _answer_server_request(self, message: dict[str, Any]) -> dict[str, Any]:
        if message.get("method") == "ping":
            return {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": "proctor offers no client features upstream"},
        }


class StdioWire(Wire):
    """An upstream started as a process (in its sandbox: :mod:`.launch`), newline-delimited
    JSON-RPC on its standard input and output."""

    def __init__(
        self, server: str, proc: subprocess.Popen[bytes], timeout: float, on_close: Any = None
    ) -> None:
        super().__init__(server, timeout)
        self.proc = proc
        self._buffer = b""
        self._on_close = on_close

    def _write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise _failed(self.server, "its process has ended") from exc

    def _notify(self, message: dict[str, Any]) -> None:
        self._write(message)

    def _line(self, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _failed(
                    self.server, f"no answer within {self.timeout:g} s", "mcp_upstream_timeout"
                )
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise _failed(
                    self.server,
                    "its process closed its output (it may have failed"
                    " to start inside the sandbox)",
                )
            self._buffer += chunk
            if len(self._buffer) > _MAX_LINE:
                raise _failed(self.server, "sent a message larger than 16 MiB")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _exchange(self, message: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        self._write(message)
        while True:
            line = self._line(deadline).strip()
            if not line:
                continue
            got = _message(self.server, line)
            if not isinstance(got, dict):  # None: a stray log line on stdout
                continue
            if "method" in got and "id" in got:
                self._write(self._answer_server_request(got))
            elif "method" in got:
                continue
            elif got.get("id") == message["id"]:
                return got

    def close(self) -> None:
        """End the server: close its input, then end its process tree."""
        with self._lock:
            if self.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
            if self._on_close is not None:
                self._on_close()
            else:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()


class HttpWire(Wire):
    """An upstream reached over streamable HTTP with an httpx client (the egress guard's)."""

    def __init__(
        self,
        server: str,
        url: str,
        client: httpx.Client,
        headers: Mapping[str, str],
        timeout: float,
    ) -> None:
        super().__init__(server, timeout)
        self.url = url
        self.client = client
        self.headers = dict(headers)
        self.session_id: str | None = None

    def _post(self, message: dict[str, Any], deadline: float) -> httpx.Response:
        import httpx

        headers = {
            **self.headers,
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": PROTOCOL_VERSION,
        }
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        try:
            return self.client.post(
                self.url,
                content=json.dumps(message).encode(),
                headers=headers,
                timeout=max(0.1, deadline - time.monotonic()),
            )
        except httpx.HTTPError as exc:
            raise _failed(self.server, f"the request failed ({type(exc).__name__})") from exc

    def _notify(self, message: dict[str, Any]) -> None:
        self._post(message, time.monotonic() + self.timeout).close()

    def _exchange(self, message: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        response = self._post(message, deadline)
        if response.status_code >= 400:
            raise _failed(self.server, f"answered HTTP {response.status_code}")
        sid = response.headers.get("mcp-session-id")
        if sid and self.session_id is None:
            self.session_id = sid
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if len(response.content) > _MAX_LINE:
            raise _failed(self.server, "sent a message larger than 16 MiB")
        if kind == "application/json":
            got = _message(self.server, response.content)
            if got is None:
                raise _failed(self.server, "answered with text that is not JSON")
            return got if isinstance(got, dict) else None
        if kind == "text/event-stream":
            for event in _sse_data(response.text):
                got = _message(self.server, event)
                if isinstance(got, dict) and got.get("id") == message["id"] and "method" not in got:
                    return got
            return None
        raise _failed(self.server, f"answered with content type {kind[:60]!r}")

    def close(self) -> None:
        """End the session (a DELETE, as the transport asks) and the client."""
        with self._lock:
            if self.session_id is not None:
                headers = {**self.headers, "mcp-session-id": self.session_id}
                # the session ends with the client either way
                with contextlib.suppress(Exception):
                    self.client.delete(self.url, headers=headers, timeout=5).close()
            self.client.close()


def _sse_data(text: str) -> list[str]:
    events, data = [], []
    for line in text.splitlines():
        if line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif not line and data:
            events.append("\n".join(data))
            data = []
    if data:
        events.append("\n".join(data))
    return events
