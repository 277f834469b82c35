"""Benchmark ``proctor mcp``: round trips over stdio and throughput over streamable HTTP.

    .venv/bin/python bench/mcp.py [--calls 1000] [--http-calls 400] [--clients 8]
        [--interleave [--baseline OTHER_CHECKOUT/src]]

Prints, for the hello-world skill's ``greet`` method (two native tool steps, receipts signed
and written, audit lines appended):

- stdio: median and p95 round trip of one ``tools/call`` through ``proctor mcp`` (a real
  subprocess, the official SDK client), over ``--calls`` sequential calls; beside it, in the
  same run, the same method through ``Session.run`` in-process (no MCP: the peer that shows
  what MCP adds) and a bare ``tools/list`` round trip (protocol cost alone). The peer runs
  exactly what a served call runs: the same reference (the package folder and method), in a
  session made as the server makes its sessions (managed: ``effects: ask``; sandbox
  required), so the difference is MCP's alone. The same calls from a bare client (JSON lines
  over the server's pipes in a plain loop, no SDK) split that difference into the host's
  client and the server with its transport;
- http: calls per second with ``--clients`` concurrent SDK clients, each on its own session,
  against ``proctor mcp --transport http`` on a free loopback port.

Each measurement runs in a fresh temporary workspace and home.

Beside the medians, the CPU time per call (user and system, every thread): of the client and
the server together for stdio (the server's read from ``/proc`` over all the timed calls), of
the run for in-process. On a shared machine it is the figure to compare: wall time then also
counts the waits for a CPU, and a round trip has four wake-ups where a run in-process has none.

On a loaded machine the stdio and in-process medians, taken one after the other, drift apart
with the load. ``--interleave`` takes them in turns instead (one ``tools/call`` from the SDK
client, one from the bare client and one in-process run, ``--calls`` times; each takes every
place in the turn in its turn, so none always runs in another's wake), so all see the same
load; ``--baseline SRC`` adds, in the same turns, a second server running another checkout's
``src`` (the code before a change).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[1]
# Run as a script, this file's folder leads sys.path and its name would shadow the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
KEY = "bench-key-0123456789abcdef"


def _workspace(tmp: Path) -> tuple[Path, dict[str, str]]:
    root = tmp / "work"
    (root / ".proctor").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "hello-world", root / "skills" / "hello-world")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(tmp / "home")
    env["PYTHONPATH"] = str(REPO / "src")
    return root, env


def _peer(root: Path, env: dict[str, str]) -> tuple[Any, str]:
    """The in-process peer: a session made as ``proctor mcp`` makes its pool's, and the
    reference a served ``hello-world__greet`` runs (the package folder and method)."""
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    session = Session(Workspace(root), environ=env, sandbox_default="required", managed=True)
    return session, f"{root / 'skills' / 'hello-world'}#greet"


@dataclass
class Side:
    """One side's samples: wall time per call, and its CPU seconds over all the calls."""

    wall: list[float] = field(default_factory=list)
    client_cpu: float = 0.0
    server_cpu: float = 0.0
    server_pid: int | None = None

    def cpu(self) -> str:
        calls = max(len(self.wall), 1)
        total = (self.client_cpu + self.server_cpu) / calls * 1e3
        if self.server_pid is None:
            return f"{total:6.2f} ms"
        client, server = self.client_cpu / calls * 1e3, self.server_cpu / calls * 1e3
        return f"{total:6.2f} ms (client {client:.2f}, server {server:.2f})"

    def cpu_total(self) -> float:
        return self.client_cpu + self.server_cpu


def _server_pid(root: Path) -> int | None:
    """The ``proctor mcp`` child serving ``root`` (read from ``/proc``), or ``None``."""
    want = os.path.realpath(root)
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == os.getpid() and os.readlink(f"/proc/{entry}/cwd") == want:
                return int(entry)
        except (OSError, ValueError, IndexError):
            continue
    return None


def _cpu_of(pid: int | None) -> float:
    """CPU seconds (user and system, every thread, ended ones too) of ``pid`` so far."""
    if pid is None:
        return math.nan
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ratio(samples: list[float], peer: list[float]) -> float:
    return statistics.median(samples) / statistics.median(peer)


def _stats(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"median {statistics.median(ordered) * 1e3:7.2f} ms   p95 {p95 * 1e3:7.2f} ms"


async def _stdio(root: Path, env: dict[str, str], calls: int) -> tuple[Side, list[float]]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "proctor", "mcp", "hello-world"],
        cwd=str(root),
        env=env,
    )
    async with Client(params) as client:
        await client.call_tool("hello-world__greet", {"message": "warm up"})
        lists = []
        for _ in range(min(calls, 200)):
            start = time.perf_counter()
            await client.list_tools()
            lists.append(time.perf_counter() - start)
        rounds = Side(server_pid=_server_pid(root))
        served = _cpu_of(rounds.server_pid)
        for n in range(calls):
            start, cpu = time.perf_counter(), time.process_time()
            result = await client.call_tool("hello-world__greet", {"message": f"m{n}"})
            rounds.wall.append(time.perf_counter() - start)
            rounds.client_cpu += time.process_time() - cpu
            assert result.structured_content["outcome"] == "completed"
        rounds.server_cpu = _cpu_of(rounds.server_pid) - served
    return rounds, lists


async def _interleaved(tmp: Path, calls: int, baseline: Path | None) -> list[Side]:
    """Samples taken in turns: a call to this checkout's server, one to the baseline's (when
    given) and one in-process run, each in every place of the turn in its turn."""
    from contextlib import AsyncExitStack

    from mcp import Client, StdioServerParameters

    async with AsyncExitStack() as stack:
        clients, sides = [], []
        for label, src in (("this", REPO / "src"), ("baseline", baseline)):
            if src is None:
                continue
            root, env = _workspace(tmp / label)
            env["PYTHONPATH"] = str(src)
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "proctor", "mcp", "hello-world"],
                cwd=str(root),
                env=env,
            )
            client = await stack.enter_async_context(Client(params))
            await client.list_tools()  # as a client that validates results knows the schema
            await client.call_tool("hello-world__greet", {"message": "warm up"})
            clients.append(client)
            sides.append(Side(server_pid=_server_pid(root)))
        root, env = _workspace(tmp / "bare")
        bare = BareClient(root, env)
        stack.callback(bare.close)
        clients.append(bare)
        sides.append(Side(server_pid=bare.proc.pid))
        root, env = _workspace(tmp / "in-process")
        os.environ["PROCTOR_HOME"] = env["PROCTOR_HOME"]
        session, ref = _peer(root, env)
        stack.callback(session.close)
        session.run(ref, inputs={"message": "warm up"}, cwd=root)
        sides.append(Side())
        turn: list[Any] = [*clients, session]
        served = [_cpu_of(side.server_pid) for side in sides]
        for n in range(calls):
            # each side takes every place in the turn in its turn: none always runs first, or
            # always in the wake of the same other side
            at = n % len(turn)
            for peer in turn[at:] + turn[:at]:
                into = sides[turn.index(peer)]
                start, cpu = time.perf_counter(), time.process_time()
                if peer is session:
                    envelope = session.run(ref, inputs={"message": f"m{n}"}, cwd=root)
                    assert envelope.outcome == "completed"
                elif peer is bare:
                    bare.call(f"m{n}")
                else:
                    result = await peer.call_tool("hello-world__greet", {"message": f"m{n}"})
                    assert result.structured_content["outcome"] == "completed"
                into.wall.append(time.perf_counter() - start)
                into.client_cpu += time.process_time() - cpu
        for side, before in zip(sides, served, strict=True):
            if side.server_pid is not None:
                side.server_cpu = _cpu_of(side.server_pid) - before
    return sides


class BareClient:
    """A bare MCP client: JSON lines written to and read from a ``proctor mcp`` child's pipes,
    no SDK. Beside the SDK client's figure it splits what a call costs over MCP into the
    host's client and the server with its transport."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "proctor", "mcp", "hello-world"],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,  # buffered: a line takes a read or two, not one a byte
        )
        self.asked = 0
        hello = {"name": "bench-bare", "version": "0"}
        self.ask(
            "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": hello}
        )
        self._send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.call("warm up")

    def _send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request and its answer."""
        assert self.proc.stdout is not None
        self.asked += 1
        request = {"jsonrpc": "2.0", "id": self.asked, "method": method, "params": params}
        self._send(json.dumps(request).encode() + b"\n")
        while True:
            answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
            if answer.get("id") == self.asked:
                return answer

    def call(self, message: str) -> None:
        """``tools/call`` of hello-world's greet; it must complete."""
        params = {"name": "hello-world__greet", "arguments": {"message": message}}
        answer = self.ask("tools/call", params)
        assert answer["result"]["structuredContent"]["outcome"] == "completed"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _bare(root: Path, env: dict[str, str], calls: int) -> Side:
    client = BareClient(root, env)
    try:
        samples = Side(server_pid=client.proc.pid)
        served = _cpu_of(client.proc.pid)
        for n in range(calls):
            start, cpu = time.perf_counter(), time.process_time()
            client.call(f"m{n}")
            samples.wall.append(time.perf_counter() - start)
            samples.client_cpu += time.process_time() - cpu
        samples.server_cpu = _cpu_of(client.proc.pid) - served
    finally:
        client.close()
    return samples


def _in_process(root: Path, env: dict[str, str], calls: int) -> Side:
    session, ref = _peer(root, env)
    try:
        session.run(ref, inputs={"message": "warm up"}, cwd=root)
        samples = Side()
        for n in range(calls):
            start, cpu = time.perf_counter(), time.process_time()
            envelope = session.run(ref, inputs={"message": f"m{n}"}, cwd=root)
            samples.wall.append(time.perf_counter() - start)
            samples.client_cpu += time.process_time() - cpu
            assert envelope.outcome == "completed"
    finally:
        session.close()
    return samples


async def _http(url: str, clients: int, total: int) -> float:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from mcp import Client

    per_client = total // clients

    async def one(n: int, ready: anyio.Event, go: anyio.Event, done: list[int]) -> None:
        headers = {"Authorization": f"Bearer {KEY}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            await client.call_tool("hello-world__greet", {"message": "warm up"})
            done.append(0)
            if len(done) == clients:
                ready.set()
            await go.wait()
            for i in range(per_client):
                result = await client.call_tool("hello-world__greet", {"message": f"{n}-{i}"})
                assert result.structured_content["outcome"] == "completed"

    ready, go = anyio.Event(), anyio.Event()
    warmed: list[int] = []
    elapsed = 0.0
    async with anyio.create_task_group() as group:
        for n in range(clients):
            group.start_soon(one, n, ready, go, warmed)
        await ready.wait()
        start = time.perf_counter()
        go.set()
    elapsed = time.perf_counter() - start
    return per_client * clients / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--http-calls", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--interleave", action="store_true", help="take stdio and in-process samples in turns"
    )
    parser.add_argument(
        "--baseline", type=Path, help="with --interleave: another checkout's src, served beside"
    )
    options = parser.parse_args()
    if options.baseline is not None and not options.interleave:
        parser.error("--baseline needs --interleave")

    if options.interleave:
        with tempfile.TemporaryDirectory() as tmp:
            sides = anyio.run(_interleaved, Path(tmp), options.calls, options.baseline)
        rounds, bare, direct = sides[0], sides[-2], sides[-1]
        base = sides[1] if len(sides) == 4 else None
        print(f"interleaved, {len(rounds.wall)} turns, load average {os.getloadavg()[0]:.2f}:")
        print(f"stdio tools/call hello-world#greet, this checkout: {_stats(rounds.wall)}")
        if base:
            print(f"stdio tools/call hello-world#greet, baseline:      {_stats(base.wall)}")
        print(f"stdio tools/call hello-world#greet, bare client:  {_stats(bare.wall)}")
        print(f"in-process Session.run, no MCP:                   {_stats(direct.wall)}")
        print(
            "bare client round trip / in-process run (medians): "
            f"{_ratio(bare.wall, direct.wall):.2f}x; CPU per call {bare.cpu()}"
        )
        line = "MCP stdio round trip / in-process run (medians): "
        line += f"{_ratio(rounds.wall, direct.wall):.2f}x this checkout"
        if base:
            line += f", {_ratio(base.wall, direct.wall):.2f}x baseline"
        print(line)
        print(f"CPU per call, stdio this checkout: {rounds.cpu()}")
        if base:
            print(f"CPU per call, stdio baseline:      {base.cpu()}")
        print(f"CPU per call, in-process:          {direct.cpu()}")
        line = (
            f"CPU stdio / in-process: {rounds.cpu_total() / direct.cpu_total():.2f}x this checkout"
        )
        if base:
            line += f", {base.cpu_total() / direct.cpu_total():.2f}x baseline"
        print(line)
        return

    with tempfile.TemporaryDirectory() as tmp:
        root, env = _workspace(Path(tmp))
        rounds, lists = anyio.run(_stdio, root, env, options.calls)
    with tempfile.TemporaryDirectory() as tmp:
        root, env = _workspace(Path(tmp))
        bare = _bare(root, env, options.calls)
    with tempfile.TemporaryDirectory() as tmp:
        root, env = _workspace(Path(tmp))
        os.environ["PROCTOR_HOME"] = env["PROCTOR_HOME"]
        direct = _in_process(root, env, min(options.calls, 300))
    print(f"stdio tools/call hello-world#greet ({len(rounds.wall)} calls): {_stats(rounds.wall)}")
    print(f"in-process Session.run, no MCP ({len(direct.wall)} runs):    {_stats(direct.wall)}")
    print(f"stdio tools/call, bare client, no SDK:          {_stats(bare.wall)}")
    print(f"stdio tools/list ({len(lists)} calls):                   {_stats(lists)}")
    print(
        f"MCP stdio round trip / in-process run (medians): {_ratio(rounds.wall, direct.wall):.2f}x"
    )
    print(
        "bare client round trip / in-process run (medians): "
        f"{_ratio(bare.wall, direct.wall):.2f}x; CPU per call {bare.cpu()}"
    )
    print(
        f"CPU per call: stdio {rounds.cpu()}, in-process {direct.cpu()}:"
        f" {rounds.cpu_total() / len(rounds.wall) / (direct.cpu_total() / len(direct.wall)):.2f}x"
    )

    with tempfile.TemporaryDirectory() as tmp:
        root, env = _workspace(Path(tmp))
        env["PROCTOR_MCP_API_KEY"] = KEY
        proc = subprocess.Popen(
            [sys.executable, "-m", "proctor", "mcp", "hello-world", "--transport", "http",
             "--port", "0"],
            cwd=root, env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            match = re.search(r"serving (http://\S+)", line)
            if match is None:
                raise SystemExit(f"server did not start: {line}{proc.stderr.read()}")
            rate: Any = anyio.run(_http, match.group(1), options.clients, options.http_calls)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(
        f"http: {rate:.1f} calls/s with {options.clients} concurrent clients"
        f" ({options.http_calls // options.clients * options.clients} calls)"
    )


if __name__ == "__main__":
    main()
