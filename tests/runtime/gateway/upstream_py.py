"""A Python MCP server built with the official SDK: the gateway's tests' own upstream.

Run as ``python upstream_py.py FOLDER stdio`` or ``python upstream_py.py FOLDER http``. It
serves two tools:

- ``lookup`` (read-only): answers ``key`` with ``value-of-<key>``; its description is read from
  ``FOLDER/description.txt`` when the server starts (a test changes that file between
  sessions: a "rug pull");
- ``record`` (unannotated, so a write): appends ``note`` to ``FOLDER/notes.txt`` (the mark a
  call that reached the server leaves); its description is ``FOLDER/record_description.txt``
  when that file exists (a rug pull of a tool with an effect);
- ``stall`` (unannotated): appends ``note`` to ``FOLDER/notes.txt``, then never answers (a write
  that was applied and whose answer never came).

Over HTTP it binds a free loopback port, prints ``PORT <n>`` on stdout, and appends one JSON
line per HTTP request to ``FOLDER/requests.jsonl``: the JSON-RPC method, the tool called and
the ``Authorization`` header (to prove what was, or was not, sent and with which credential).
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

FOLDER = Path(sys.argv[1])


def build() -> MCPServer:
    server = MCPServer("test-upstream")
    description = (FOLDER / "description.txt").read_text(encoding="utf-8").strip()

    @server.tool(description=description, annotations=ToolAnnotations(readOnlyHint=True))
    def lookup(key: str) -> str:
        return f"value-of-{key}"

    told = FOLDER / "record_description.txt"
    record_text = "Append a note to the notes file."
    if told.exists():
        record_text = told.read_text(encoding="utf-8").strip()

    @server.tool(description=record_text)
    def record(note: str) -> str:
        with open(FOLDER / "notes.txt", "a", encoding="utf-8") as f:
            f.write(note + "\n")
        return "recorded"

    @server.tool(description="Append a note, then never answer.")
    async def stall(note: str) -> str:
        import anyio

        with open(FOLDER / "notes.txt", "a", encoding="utf-8") as f:
            f.write(note + "\n")
        await anyio.Event().wait()  # never set: the answer never comes
        return "not reached"

    return server


def _logged(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            doc = {}
        entry = {
            "http": scope["method"],
            "method": doc.get("method") if isinstance(doc, dict) else None,
            "tool": (doc.get("params") or {}).get("name") if isinstance(doc, dict) else None,
            "authorization": headers.get("authorization"),
        }
        with open(FOLDER / "requests.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


def main() -> None:
    server = build()
    if sys.argv[2] == "stdio":
        server.run("stdio")
        return
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
    port = sock.getsockname()[1]
    app = _logged(server.streamable_http_app(json_response=True))
    config = uvicorn.Config(app, log_level="error", lifespan="on")
    print(f"PORT {port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
