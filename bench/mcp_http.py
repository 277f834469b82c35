"""Benchmark ``proctor mcp --transport http`` throughput against the same runs in process.

    .venv/bin/python bench/mcp_http.py [--calls 192] [--clients 1,16] [--rounds 6] [--workers N]
                                       [--client both|sdk|raw] [--protocol both|modern|legacy]
                                       [--src PATH]

For each client count C, in one run, the sides taking turns (``--rounds`` each, the order
turning every round, so all see the same load on a shared machine):

- in process (the yardstick): C threads, each with a session made as the MCP server makes its
  pool's (managed, the sandbox required, one signing key), run hello-world's ``greet`` back
  to back; calls per second over all of them, and the CPU per call of this process;
- http, SDK client: C official-SDK clients (``mcp.client.Client``, what users run), each on
  its own connection, call ``hello-world__greet`` against ``proctor mcp --transport http`` on
  a free loopback port, as a user starts it (the command's default number of processes: one
  per core) unless ``--workers`` is given; calls per second, and the CPU per call of the
  server's processes (every worker, from ``/proc``);
- http, raw client: the same against the same server with C lean clients (:class:`RawClient`,
  each on its own thread and keep-alive connection): the streamable HTTP protocol done
  correctly (envelope or handshake, session and version headers, the answer read as JSON or
  SSE and checked) with none of the SDK's layers. The SDK client costs ~3 ms of CPU a call,
  on the same cores as the server and, with one client, on every call's path; the raw one
  ~0.2 ms (a socket, the head split by hand), so its figures are the server's.

Each client kind is a side per protocol (``--protocol``): ``modern``, 2026-07-28 (what the
SDK client speaks by default: each request self-contained, its envelope in ``_meta`` and the
routing headers), and ``legacy``, the handshake protocol (2025-11-25: ``initialize``, then a
session). ``--src`` runs another checkout's proctor on both sides (the server and the
in-process sessions).

Before the rounds, every server process has started (the others start after the first one
listens) and serves a few calls through its own Unix socket (a process's start and first call
cost ~0.5 s of CPU that is not a call's).

Prints the rates, each client's ratio http / in process (the issue's targets: at least 0.7x
with one client, 0.9x with sixteen) and server CPU ratio (target: within 1.3x), with the
machine's load average before and after: on a shared machine the figures to trust are the
ratios. It also prints each client's own CPU per call (this process's during its rounds) and,
with one client, what that alone allows: T / (T + client CPU), the throughput ratio a transport
costing nothing would reach, with T the in-process time a call in this run and, for runs that
never wait (a quiet machine, a fast disk), its CPU (one client waits for each answer, so its
CPU is on every call's path; the in-process side has no client).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
KEY = "bench-key-0123456789abcdef"
SRC = [REPO / "src"]  # the proctor both sides run (--src)


def _workspace(tmp: Path) -> tuple[Path, dict[str, str]]:
    root = tmp / "work"
    (root / ".proctor").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "hello-world", root / "skills" / "hello-world")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(tmp / "home")
    env["PYTHONPATH"] = str(SRC[0])
    return root, env


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (user and system)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        fields = stats.get(p)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
        todo.extend(children.get(p, []))
    return total / os.sysconf("SC_CLK_TCK")


class InProcess:
    """``clients`` sessions made as the MCP server makes its pool's (managed, the sandbox
    required, one signing key), each on its own thread in a round."""

    def __init__(self, tmp: Path, clients: int) -> None:
        from proctor.runtime.boundary.workspace import Workspace
        from proctor.runtime.engine.session import Session

        self.root, env = _workspace(tmp)
        os.environ["PROCTOR_HOME"] = env["PROCTOR_HOME"]
        self.ref = f"{self.root / 'skills' / 'hello-world'}#greet"
        first = Session(Workspace(self.root), environ=env, sandbox_default="required", managed=True)
        signer = first.signer
        self.sessions = [first] + [
            Session(
                Workspace(self.root), environ=env, signer=signer, sandbox_default="required",
                managed=True,
            )
            for _ in range(clients - 1)
        ]  # fmt: skip
        for s in self.sessions:
            s.run(self.ref, inputs={"message": "warm up"}, cwd=self.root)

    def round(self, per: int) -> tuple[float, float, int]:
        """Seconds, CPU seconds of this process, and calls of one round of ``per`` a client."""
        go = threading.Barrier(len(self.sessions) + 1)

        def work(n: int) -> None:
            session = self.sessions[n]
            go.wait()
            for i in range(per):
                envelope = session.run(self.ref, inputs={"message": f"{n}-{i}"}, cwd=self.root)
                assert envelope.outcome == "completed", envelope

        threads = [threading.Thread(target=work, args=(n,)) for n in range(len(self.sessions))]
        for t in threads:
            t.start()
        cpu = time.process_time()
        go.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        return time.perf_counter() - start, time.process_time() - cpu, per * len(threads)

    def close(self) -> None:
        for s in self.sessions:
            s.close()


class HttpConnection:
    """One keep-alive HTTP/1.1 connection over a socket (``TCP_NODELAY``): a request written
    whole, its response read by its ``Content-Length``, its chunks (an event stream) or to the
    connection's end. The standard library's ``http.client`` parses each response's head with
    the e-mail parser, about 0.15 ms of CPU a call on this client's path; this reads the same
    bytes with a split."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.sock: Any = None
        self.buf = b""

    def connect(self) -> None:
        import socket

        self.close()
        self.sock = socket.create_connection((self.host, self.port), timeout=300)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.buf = None, b""

    def request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """The status, headers (names lower-cased) and body of ``method path``."""
        if self.sock is None:
            self.connect()
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self.sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b""))
        head = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        got: dict[str, str] = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            got[name.strip().lower()] = value.strip()
        if "content-length" in got:
            data = self._exactly(int(got["content-length"]))
        elif got.get("transfer-encoding", "").lower() == "chunked":
            data = self._chunks()
        elif status < 200 or status in (204, 304):
            data = b""
        else:  # to the end: the connection is done
            data, self.buf = self.buf + self._rest(), b""
            got["connection"] = "close"
        if got.get("connection", "").lower() == "close":
            self.close()
        return status, got, data

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        self.buf += chunk

    def _until(self, mark: bytes) -> bytes:
        while (at := self.buf.find(mark)) < 0:
            self._more()
        out, self.buf = self.buf[:at], self.buf[at + len(mark) :]
        return out

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _chunks(self) -> bytes:
        parts = []
        while size := int(self._until(b"\r\n").split(b";", 1)[0], 16):
            parts.append(self._exactly(size))
            self._until(b"\r\n")
        while self._until(b"\r\n"):  # the trailer, up to its empty line
            pass
        return b"".join(parts)

    def _rest(self) -> bytes:
        parts = []
        while chunk := self.sock.recv(65536):
            parts.append(chunk)
        return b"".join(parts)


class RawClient:
    """A lean MCP client of the streamable HTTP transport: one keep-alive HTTP/1.1 connection
    (:class:`HttpConnection`), the protocol, nothing else.

    ``legacy`` (the handshake protocol, 2025-11-25): it opens a session as the protocol says
    (``initialize``, then the ``initialized`` notification, answered 202) and sends
    ``Mcp-Session-Id`` and ``Mcp-Protocol-Version`` with every request after it.

    ``modern`` (2026-07-28, what the official SDK client speaks by default): no handshake and
    no session; it probes ``server/discover`` as the SDK client does (and checks the server
    lists the version), and every request carries the protocol's envelope in ``params._meta``
    (the protocol version, the client's capabilities and its info) and the routing headers
    (``MCP-Protocol-Version``, ``Mcp-Method``, and ``Mcp-Name`` for a ``tools/call``).

    Either way it posts each ``tools/call`` accepting ``application/json`` and
    ``text/event-stream``, reads the answer in whichever form the server chose (JSON, or the
    SSE events up to the one that answers the request) and checks it: a JSON-RPC result, not
    an error, not ``isError``, the run completed, the greeting echoed. No schema validation,
    no JSON-RPC dispatch layer: what a call costs a client that only has to be correct.
    """

    VERSION = "2025-11-25"
    MODERN = "2026-07-28"
    INFO: ClassVar[dict[str, str]] = {"name": "bench-raw", "version": "1"}

    def __init__(self, url: str, key: str, protocol: str = "legacy") -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.path = parts.path
        assert parts.hostname is not None and parts.port is not None
        self.conn = HttpConnection(parts.hostname, parts.port)
        self.reconnects = 0
        self.conn.connect()
        self.headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self.ids = 0
        self.protocol = protocol
        if protocol == "modern":
            self.headers["Mcp-Protocol-Version"] = self.MODERN
            result, _ = self._request("server/discover", {})
            if self.MODERN not in result.get("supportedVersions", []):
                raise AssertionError(f"server/discover: {result!r}")
            return
        if protocol != "legacy":
            raise ValueError(f"protocol: legacy or modern, not {protocol!r}")
        result, session = self._request(
            "initialize",
            {"protocolVersion": self.VERSION, "capabilities": {},
             "clientInfo": self.INFO},
        )  # fmt: skip
        if session is None or result.get("protocolVersion") != self.VERSION:
            raise AssertionError(f"initialize: session {session!r}, result {result!r}")
        self.headers["Mcp-Session-Id"] = session
        self.headers["Mcp-Protocol-Version"] = self.VERSION
        status, _ = self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status != 202:
            raise AssertionError(f"notifications/initialized answered {status}")

    def _post(self, message: dict[str, Any]) -> tuple[int, tuple[dict[str, str], bytes]]:
        payload = json.dumps(message).encode()
        for attempt in (1, 2):
            try:
                status, headers, body = self.conn.request("POST", self.path, payload, self.headers)
                return status, (headers, body)
            except (BrokenPipeError, ConnectionResetError):
                # the server closed the connection while it was idle (uvicorn's keep-alive
                # timeout, 5 s): a new one, as any HTTP client does; the session goes on
                if attempt == 2:
                    raise
                self.reconnects += 1
                self.conn.connect()
        raise AssertionError("unreachable")

    def _request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The result of one JSON-RPC request, and the session id the answer carried."""
        self.ids += 1
        if self.protocol == "modern":
            envelope = {
                "io.modelcontextprotocol/protocolVersion": self.MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": self.INFO,
            }
            params = {**params, "_meta": envelope}
            self.headers["Mcp-Method"] = method
            if method == "tools/call":
                self.headers["Mcp-Name"] = params["name"]
            else:
                self.headers.pop("Mcp-Name", None)
        status, (headers, body) = self._post(
            {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        )
        if status != 200:
            raise AssertionError(f"{method} answered HTTP {status}: {body[:300]!r}")
        kind = headers.get("content-type", "").split(";")[0].strip()
        if kind == "application/json":
            messages = [json.loads(body)]
        elif kind == "text/event-stream":
            messages = _sse_messages(body)
        else:
            raise AssertionError(f"{method} answered {kind!r}")
        answer = next((m for m in messages if m.get("id") == self.ids), None)
        if answer is None or "result" not in answer:
            raise AssertionError(f"{method}: no result for request {self.ids}: {messages!r}")
        return answer["result"], headers.get("mcp-session-id")

    def greet(self, message: str) -> None:
        """Call ``hello-world__greet`` and check the answer is the greeting."""
        result, _ = self._request(
            "tools/call", {"name": "hello-world__greet", "arguments": {"message": message}}
        )
        run = result.get("structuredContent") or {}
        if (
            result.get("isError")
            or run.get("outcome") != "completed"
            or run.get("result", {}).get("greet") != {"text": message}
        ):
            raise AssertionError(f"not the greeting: {result!r}")

    def close(self) -> None:
        if self.protocol == "legacy":  # the session ends (the modern protocol has none)
            with contextlib.suppress(Exception):
                headers = {k: v for k, v in self.headers.items() if k != "Content-Type"}
                self.conn.request("DELETE", self.path, None, headers)
        self.conn.close()


def _sse_messages(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an event stream's ``message`` events (events without data,
    such as a priming event, skipped)."""
    out = []
    for event in body.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        kind, data = "message", []
        for line in event.split("\n"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                kind = value
            elif field == "data":
                data.append(value)
        if kind == "message" and data and "".join(data).strip():
            out.append(json.loads("\n".join(data)))
    return out


class OverHttp:
    """``proctor mcp --transport http`` and ``clients`` SDK clients connected to it."""

    def __init__(self, tmp: Path, workers: int | None) -> None:
        root, env = _workspace(tmp)
        env["PROCTOR_MCP_API_KEY"] = KEY
        # the worker folder (each process's Unix socket) where warm_each() finds it
        self.folder = Path(tempfile.mkdtemp(prefix="mh-", dir="/tmp"))
        env["TMPDIR"] = str(self.folder)
        argv = [sys.executable, "-m", "proctor", "mcp", "skills/hello-world", "--transport",
                "http", "--port", "0"]  # fmt: skip
        if workers is not None:
            argv += ["--workers", str(workers)]
        self.proc = subprocess.Popen(argv, cwd=root, env=env, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        match = re.search(r"serving (http://\S+)", line)
        if match is None:
            raise SystemExit(f"server did not start: {line}{self.proc.stderr.read()}")
        self.url = match.group(1)
        self.audit = root / ".proctor" / "audit.jsonl"
        self.clients: dict[str, list[Any]] = {}  # SDK clients by protocol
        self.raw: dict[str, list[RawClient]] = {}  # raw clients by protocol

    def wait_started(self, timeout: float = 120.0) -> None:
        """Until every process has written ``mcp_server_started`` (with ``workers``: how many)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.audit.read_text().splitlines() if self.audit.exists() else []
            events = [json.loads(line) for line in lines if "mcp_server_started" in line]
            started = [e for e in events if e.get("event") == "mcp_server_started"]
            if started and len(started) >= max(e.get("workers", 1) for e in started):
                return
            time.sleep(0.1)
        raise SystemExit("the server's processes did not all start")

    async def warm_each(self) -> None:
        """A few calls served by each process, through its own socket (none: one process)."""
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        for sock in sorted(self.folder.glob("proctor-mcp-workers-*/w*.sock")):
            transport = httpx2.AsyncHTTPTransport(uds=str(sock))
            headers = {"Authorization": f"Bearer {KEY}"}
            async with (
                httpx2.AsyncClient(transport=transport, headers=headers, timeout=300) as http,
                Client(streamable_http_client(self.url, http_client=http)) as client,
            ):
                for i in range(3):
                    await client.call_tool("hello-world__greet", {"message": f"warm {i}"})

    def processes(self) -> int:
        return 1 + sum(
            1 for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == self.proc.pid
        )

    async def round(self, per: int, protocol: str) -> tuple[float, float, int, float]:
        """Seconds, server CPU seconds, calls, and the clients' CPU seconds (this process's:
        the in-process sessions are idle meanwhile) of one round of ``per`` a client (the SDK
        clients of ``protocol``)."""
        clients = self.clients[protocol]
        cpu = _tree_cpu(self.proc.pid)
        mine = time.process_time()
        start = time.perf_counter()

        async def one(n: int, client: Any) -> None:
            for i in range(per):
                result = await client.call_tool("hello-world__greet", {"message": f"{n}-{i}"})
                assert result.structured_content["outcome"] == "completed", result

        async with anyio.create_task_group() as group:
            for n, client in enumerate(clients):
                group.start_soon(one, n, client)
        elapsed = time.perf_counter() - start
        mine = time.process_time() - mine
        return elapsed, _tree_cpu(self.proc.pid) - cpu, per * len(clients), mine

    def round_raw(self, per: int, protocol: str) -> tuple[float, float, int, float]:
        """:meth:`round` with the lean clients of ``protocol``, each on its own thread."""
        raw = self.raw[protocol]
        go = threading.Barrier(len(raw) + 1)
        failed: list[BaseException] = []

        def work(n: int) -> None:
            client = raw[n]
            go.wait()
            try:
                for i in range(per):
                    client.greet(f"{n}-{i}")
            except BaseException as exc:  # raised again once every thread has ended
                failed.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(len(raw))]
        for t in threads:
            t.start()
        cpu = _tree_cpu(self.proc.pid)
        mine = time.process_time()
        go.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        clients = time.process_time() - mine
        if failed:
            raise failed[0]
        return elapsed, _tree_cpu(self.proc.pid) - cpu, per * len(raw), clients

    def close(self) -> None:
        for client in (c for made in self.raw.values() for c in made):
            client.close()
        self.proc.terminate()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


async def measure(
    clients: int, calls: int, rounds: int, workers: int | None, sides_http: list[str]
) -> dict[str, Any]:
    """In-process and HTTP rounds (one side per client kind and protocol, ``sdk-modern``,
    ``raw-legacy``...) taken in turns, the order turning each round (so every side sees the
    same load), summed."""
    from contextlib import AsyncExitStack

    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    per = max(1, calls // clients // rounds)
    sides = ["in", *sides_http]
    totals = {side: [0.0, 0.0, 0, 0.0] for side in sides}
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        local = InProcess(Path(a), clients)
        server = OverHttp(Path(b), workers)
        try:
            async with AsyncExitStack() as stack:
                headers = {"Authorization": f"Bearer {KEY}"}
                for side in sides_http:
                    kind, protocol = side.split("-")
                    if kind != "sdk":
                        continue
                    made = server.clients[protocol] = []
                    for _ in range(clients):
                        http = await stack.enter_async_context(
                            create_mcp_http_client(headers=headers)
                        )
                        # the default mode ('auto') speaks the modern protocol to this server
                        mode = "legacy" if protocol == "legacy" else "auto"
                        client = await stack.enter_async_context(
                            Client(streamable_http_client(server.url, http_client=http), mode=mode)
                        )
                        made.append(client)
                server.wait_started()
                await server.warm_each()  # every worker has loaded what a call needs
                for side in sides_http:  # after the warm-up, which may outlast the keep-alive
                    kind, protocol = side.split("-")
                    if kind == "raw":
                        server.raw[protocol] = [
                            RawClient(server.url, KEY, protocol) for _ in range(clients)
                        ]
                for side in sides_http:
                    kind, protocol = side.split("-")
                    if kind == "sdk":
                        await server.round(2, protocol)
                    else:
                        server.round_raw(2, protocol)
                processes = server.processes()
                for n in range(rounds):
                    for side in sides[n % len(sides) :] + sides[: n % len(sides)]:
                        if side == "in":
                            took = (*await anyio.to_thread.run_sync(local.round, per), 0.0)
                        elif side.startswith("sdk-"):
                            took = await server.round(per, side[4:])
                        else:
                            took = await anyio.to_thread.run_sync(server.round_raw, per, side[4:])
                        for i in range(4):
                            totals[side][i] += took[i]
            reconnects = sum(c.reconnects for made in server.raw.values() for c in made)
        finally:
            server.close()
            local.close()
    return {"totals": totals, "processes": processes, "reconnects": reconnects}


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


CLIENTS = {
    "sdk": "SDK client",  # what users run: the official Python SDK's Client
    "raw": "raw client",  # RawClient: the protocol and nothing else
}
PROTOCOLS = {
    "modern": "2026-07-28",  # the SDK client's default ('auto' mode)
    "legacy": "2025-11-25, handshake",  # initialize and a session
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=192, help="calls a side")
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--rounds", type=int, default=6, help="turns each side takes")
    parser.add_argument(
        "--workers", type=int, help="server processes (default: the command's, one per core)"
    )
    parser.add_argument(
        "--client",
        choices=["both", "sdk", "raw"],
        default="both",
        help="the MCP clients over http: the official SDK's, the lean raw one, or both",
    )
    parser.add_argument(
        "--protocol",
        choices=["both", "modern", "legacy"],
        default="both",
        help="what the clients speak: 2026-07-28 (the SDK client's default), the handshake"
        " protocol (2025-11-25, a session), or both (each its own side)",
    )
    parser.add_argument("--src", type=Path, help="the proctor source both sides run")
    options = parser.parse_args()
    if options.src is not None:
        SRC[0] = options.src.resolve()
        sys.path.insert(0, str(SRC[0]))
    kinds = ["sdk", "raw"] if options.client == "both" else [options.client]
    protocols = ["modern", "legacy"] if options.protocol == "both" else [options.protocol]
    sides = [f"{kind}-{protocol}" for kind in kinds for protocol in protocols]
    targets = {1: 0.7, 16: 0.9}
    print(f"hello-world#greet, {options.calls} calls a side in {options.rounds} turns each;"
          f" {os.cpu_count()} cores; proctor from {SRC[0]}")  # fmt: skip
    print(
        "  SDK client: the official Python SDK's (what users run); raw client: a minimal"
        " keep-alive HTTP/1.1 client of the same protocol (the server's own figures)"
    )
    for clients in (int(c) for c in options.clients.split(",")):
        load = os.getloadavg()[0]
        got = anyio.run(measure, clients, options.calls, options.rounds, options.workers, sides)
        t_in, cpu_in, n_in, _ = got["totals"]["in"]
        rate_in, cpu_in = n_in / t_in, cpu_in / n_in
        target = targets.get(clients)
        print(f"{clients:3d} client(s), load average {load:.2f} -> {os.getloadavg()[0]:.2f},"
              f" {got['processes']} server processes:")  # fmt: skip
        print(
            f"  {'in process':34s} {rate_in:7.1f} calls/s   server CPU {cpu_in * 1e3:6.2f} ms/call"
        )
        for side in sides:
            kind, protocol = side.split("-")
            t_http, cpu_http, n_http, cpu_clients = got["totals"][side]
            rate_http, cpu_http, cpu_client = (
                n_http / t_http,
                cpu_http / n_http,
                cpu_clients / n_http,
            )
            name = f"http, {CLIENTS[kind]}, {PROTOCOLS[protocol]}"
            print(
                f"  {name:34s} {rate_http:7.1f} calls/s   server CPU"
                f" {cpu_http * 1e3:6.2f} ms/call   client CPU {cpu_client * 1e3:5.2f} ms/call"
            )
            print(
                f"    ratio to in process: throughput {rate_http / rate_in:5.2f}x"
                + (f" (target >= {target}x)" if target else "")
                + f", server CPU per call {cpu_http / cpu_in:5.2f}x (target <= 1.3x)"
            )
            if clients == 1:
                # One client waits for each answer: its own CPU is on every call's path. With
                # a server that cost nothing beyond the in-process run, the ratio would be at
                # most T / (T + c): T the in-process time a call (this run's, or its CPU alone
                # when nothing waits, as on a quiet machine with a fast disk), c the client's CPU.
                wall = 1 / rate_in
                print(
                    f"    this client's ceiling with a free transport:"
                    f" {wall / (wall + cpu_client):5.2f}x (this run),"
                    f" {cpu_in / (cpu_in + cpu_client):5.2f}x (runs that never wait)"
                )
        if got["reconnects"]:
            print(
                f"  (raw clients reconnected {got['reconnects']} times after the server"
                " closed an idle connection; a session's calls may then be forwarded)"
            )


if __name__ == "__main__":
    main()
