"""``proctor mcp --transport http --workers N``: one listening socket served by N processes.

The first process binds the socket, then starts N-1 more ``proctor mcp`` processes with the
same arguments, handing each the socket (an inherited descriptor) and, over a pipe, what they
share: the API key, the key that seals request state, the worker folder. The kernel gives each
new connection to whichever process accepts it first, so calls run on every core; every process
opens its own sessions on the same workspace (the run store, the audit log and the receipts are
shared across processes as they are between any two proctor commands).

What one process cannot see in another is made not to matter:

- a handshake-era session (``Mcp-Session-Id``) lives in the process that opened it. Each
  process names its sessions ``w<index>-<id>`` on the way out (:class:`SessionAffinity`); a
  request that reaches another process with such a name is forwarded, body and streamed
  answer, to its owner over the owner's private Unix socket in the worker folder (mode 0700);
  the owner checks the bearer key again. Server-to-client requests of a session (elicitation,
  progress on its stream) thus stay in the process that holds it;
- 2026-07-28 requests carry no session; the request state an approval relay hands a client
  (``input_required``) is sealed with a key every process shares, so a retry may reach any;
- the runs the turn tools may work (``turn_list``) are the ones any process opened
  (:class:`SharedRuns`, a file in the worker folder).

A worker whose first process has gone (its end of the pipe closed) stops serving.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError, UsageError
from proctor.mcp.endpoint import respond

if TYPE_CHECKING:
    import httpx
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "HANDOFF_OPTION",
    "MAX_DEFAULT_WORKERS",
    "SessionAffinity",
    "SharedRuns",
    "WorkerSeat",
    "default_workers",
    "read_handoff",
    "start_workers",
]

HANDOFF_OPTION = "--worker-handoff"
SESSION_HEADER = b"mcp-session-id"
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer", b"upgrade",
     b"proxy-authenticate", b"proxy-authorization", b"host", b"content-length"}
)  # fmt: skip
_MAX_HANDOFF = 64 * 1024
_MAX_SOCKET_PATH = 100


MAX_DEFAULT_WORKERS = 8


def default_workers() -> int:
    """One process per core this one may run on (a call holds one interpreter's lock), at most
    :data:`MAX_DEFAULT_WORKERS`: each holds its own sessions (~60 MiB), and all commit to one
    run store and audit log, which past a few bound the rate rather than the cores."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS))


@dataclass
class WorkerSeat:
    """One process's place among the workers.

    Attributes:
        index: this process's number (0: the one that started the others).
        count: how many processes serve the socket.
        folder: the worker folder (the Unix sockets, the shared run list).
        state_key: the key every process seals request state with.
        parent_fd: (a started worker) the read end of the pipe from the first process; its
            end means that process is gone.
    """

    index: int
    count: int
    folder: Path
    state_key: bytes
    parent_fd: int | None = None

    def socket_path(self, index: int) -> Path:
        """Where worker ``index`` listens for requests forwarded to it."""
        return self.folder / f"w{index}.sock"

    def listen_unix(self) -> socket.socket:
        """This worker's private socket for forwarded requests.

        Raises:
            ConfigError: ``mcp_bind_failed`` (the socket cannot be made there).
        """
        path = self.socket_path(self.index)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"cannot listen for the other workers in {self.folder}: {exc}",
                code="mcp_bind_failed",
            ) from exc
        return sock


@dataclass
class Workers:
    """The processes the first one started, and its own seat."""

    seat: WorkerSeat
    children: list[subprocess.Popen[bytes]]
    pipes: list[int]

    def stop(self, timeout: float = 10.0) -> None:
        """End every started worker (SIGTERM, then SIGKILL after ``timeout``) and remove the
        worker folder."""
        for child in self.children:
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
        for child in self.children:
            try:
                child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for fd in self.pipes:
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.seat.folder, ignore_errors=True)


def start_workers(count: int, sock: socket.socket, key: str, argv: list[str]) -> Workers:
    """Start ``count - 1`` more processes serving ``sock`` with the command line ``argv`` (this
    process's arguments after the program); this process takes seat 0.

    Raises:
        UsageError: ``mcp_workers_invalid`` (fewer than one).
    """
    if count < 1:
        raise UsageError("--workers takes a number of at least 1", code="mcp_workers_invalid")
    folder = _worker_folder()
    seat = WorkerSeat(0, count, folder, secrets.token_bytes(32))
    children: list[subprocess.Popen[bytes]] = []
    pipes: list[int] = []
    fd = sock.fileno()
    for index in range(1, count):
        read_end, write_end = os.pipe()
        handoff = {
            "index": index,
            "count": count,
            "folder": str(folder),
            "state_key": seat.state_key.hex(),
            "socket_fd": fd,
            "key": key,
        }
        child = subprocess.Popen(
            [sys.executable, "-m", "proctor", *argv, HANDOFF_OPTION, str(read_end)],
            pass_fds=(fd, read_end),
            stdin=subprocess.DEVNULL,
        )
        os.close(read_end)
        # the pipe stays open for the child's life: its end tells the child this one is gone
        os.write(write_end, json.dumps(handoff).encode() + b"\n")
        children.append(child)
        pipes.append(write_end)
    return Workers(seat, children, pipes)


def _worker_folder() -> Path:
    """A new private folder (mode 0700) whose Unix socket paths fit the system's limit (108
    bytes on Linux): in the temporary folder, or in ``/tmp`` when that one's path is long."""
    folder = Path(tempfile.mkdtemp(prefix="proctor-mcp-workers-"))
    if len(os.fsencode(folder / "w0000.sock")) < _MAX_SOCKET_PATH:
        return folder
    folder.rmdir()
    return Path(tempfile.mkdtemp(prefix="proctor-mcp-workers-", dir="/tmp"))


def read_handoff(fd: int) -> tuple[WorkerSeat, socket.socket, str]:
    """What the first process handed this worker: its seat, the listening socket, the key.

    Raises:
        UsageError: ``mcp_worker_handoff_invalid`` (not a handoff from ``start_workers``).
    """
    data = b""
    try:
        while not data.endswith(b"\n") and len(data) < _MAX_HANDOFF:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
        doc = json.loads(data)
        seat = WorkerSeat(
            int(doc["index"]),
            int(doc["count"]),
            Path(doc["folder"]),
            bytes.fromhex(doc["state_key"]),
            fd,
        )
        sock = socket.socket(fileno=int(doc["socket_fd"]))
        return seat, sock, str(doc["key"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"{HANDOFF_OPTION} is how proctor mcp starts its own workers",
            code="mcp_worker_handoff_invalid",
        ) from exc


async def watch_parent(seat: WorkerSeat, stop: Any) -> None:
    """Call ``stop()`` once the first process is gone (its end of the pipe closed)."""
    if seat.parent_fd is None:
        return
    os.set_blocking(seat.parent_fd, False)
    while True:
        await anyio.wait_readable(seat.parent_fd)
        try:
            if not os.read(seat.parent_fd, 4096):
                break
        except BlockingIOError:
            continue
        except OSError:
            break
    stop()


class SharedRuns(dict[str, None]):
    """The runs the turn tools may work, as every worker opened them (one line each in a file
    of the worker folder), in the order they were opened."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._path = path
        self._read = 0

    def __setitem__(self, run_id: str, value: None) -> None:
        self._refresh()
        if run_id not in self.keys():
            # one write of a short line with O_APPEND: lines of two workers never interleave
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, run_id.encode() + b"\n")
            finally:
                os.close(fd)
        self._refresh()

    def _refresh(self) -> None:
        try:
            with self._path.open("rb") as f:
                f.seek(self._read)
                data = f.read()
        except FileNotFoundError:
            return
        whole = data[: data.rfind(b"\n") + 1]
        self._read += len(whole)
        for line in whole.decode("utf-8", "replace").splitlines():
            if line:
                super().__setitem__(line, None)

    def __iter__(self) -> Iterator[str]:
        self._refresh()
        return iter(list(self.keys()))

    def __len__(self) -> int:
        self._refresh()
        return super().__len__()

    def __contains__(self, run_id: object) -> bool:
        self._refresh()
        return super().__contains__(run_id)


class SessionAffinity:
    """ASGI middleware: a handshake-era session answered by the worker that holds it.

    On the way out, a session id the SDK gives (``Mcp-Session-Id``) becomes
    ``w<index>-<id>``. On the way in, a request naming this worker's session has the prefix
    taken off; one naming another worker's is forwarded to that worker's Unix socket, the
    request body streamed there and its answer (a JSON body or an event stream) streamed
    back. Anything else passes as it came (the SDK answers an unknown session 404).
    """

    def __init__(self, app: ASGIApp, seat: WorkerSeat) -> None:
        self.app = app
        self.seat = seat
        self._prefix = f"w{seat.index}-".encode()
        self._clients: dict[int, httpx.AsyncClient] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        owner, headers = self._route(scope)
        if owner is not None and owner != self.seat.index:
            await self._forward(owner, scope, receive, send)
            return
        if headers is not None:
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, self._naming(send))

    def _route(self, scope: Scope) -> tuple[int | None, list[tuple[bytes, bytes]] | None]:
        """The worker a request's session belongs to, and its headers with this worker's
        prefix taken off (``None``: unchanged)."""
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        for n, (name, value) in enumerate(headers):
            if name.lower() != SESSION_HEADER:
                continue
            head, dash, rest = value.partition(b"-")
            if not dash or not head.startswith(b"w") or not head[1:].isdigit():
                return None, None
            owner = int(head[1:])
            if owner >= self.seat.count:
                return None, None
            headers[n] = (name, rest)
            return owner, headers
        return None, None

    def _naming(self, send: Send) -> Send:
        prefix = self._prefix

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, prefix + v if k.lower() == SESSION_HEADER else v)
                    for k, v in message.get("headers", [])
                ]
                message = {**message, "headers": headers}
            await send(message)

        return named

    def _client(self, owner: int) -> httpx.AsyncClient:
        import httpx

        client = self._clients.get(owner)
        if client is None:
            transport = httpx.AsyncHTTPTransport(uds=str(self.seat.socket_path(owner)))
            client = httpx.AsyncClient(transport=transport, timeout=None)
            self._clients[owner] = client
        return client

    async def _forward(self, owner: int, scope: Scope, receive: Receive, send: Send) -> None:
        import httpx

        host = next((v for k, v in scope.get("headers", []) if k.lower() == b"host"), b"")
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() not in _HOP_BY_HOP] + [
            (b"host", host)
        ]
        path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        url = "http://worker" + path.decode("latin-1") + ("?" + query.decode() if query else "")
        gone = anyio.Event()

        async def body() -> Any:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body", False):
                    return

        client = self._client(owner)
        request = client.build_request(scope["method"], url, headers=headers, content=body())
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError:
            await _unavailable(send)
            return
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (k, v) for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP
                    ],
                }
            )
            async with anyio.create_task_group() as group:

                async def client_gone() -> None:
                    if not gone.is_set():
                        while (await receive())["type"] != "http.disconnect":
                            pass
                    group.cancel_scope.cancel()

                group.start_soon(client_gone)
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()
        except* (httpx.HTTPError, OSError):
            pass  # the owner or the client went away mid-answer: the connection ends
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        """Close the connections to the other workers."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


async def _unavailable(send: Send) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None,
         "error": {"code": -32603, "message": "the worker holding this session is not answering"}}
    ).encode()  # fmt: skip
    await respond(send, 503, body)
