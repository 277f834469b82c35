"""Benchmark ``proctor mcp --transport http`` throughput against the same runs in process.

    .venv/bin/python bench/mcp_http.py [--calls 192] [--clients 1,16] [--rounds 6] [--workers N]

For each client count C, in one run, the two sides taking turns (``--rounds`` each, so both
see the same load on a shared machine):

- in process (the yardstick): C threads, each with a session made as the MCP server makes its
  pool's (managed, the sandbox required, one signing key), run hello-world's ``greet`` back
  to back; calls per second over all of them, and the CPU per call of this process;
- http: C official-SDK clients, each on its own connection, call ``hello-world__greet`` against
  ``proctor mcp --transport http`` on a free loopback port, as a user starts it (the
  command's default number of processes: one per core) unless ``--workers`` is given; calls
  per second, and the CPU per call of the server's processes (every worker, from ``/proc``).
  Before it, every process has started (the others start after the first one listens) and
  serves a few calls through its own Unix socket (a process's start and first call cost
  ~0.5 s of CPU that is not a call's).

Prints both rates, the ratio http / in-process (the issue's targets: at least 0.7x with one
client, 0.9x with sixteen) and the CPU ratio (target: within 1.3x), with the machine's load
average before and after: on a shared machine the figures to trust are the ratios. It also
prints the SDK clients' own CPU per call (this process's during the http rounds) and, with
one client, what that alone allows: T / (T + client CPU), the throughput ratio a transport
costing nothing would reach, with T the in-process time a call in this run and, for runs
that never wait (a quiet machine, a fast disk), its CPU (one client waits for each answer, so
its CPU is on every call's path; the in-process side has no client).
"""

from __future__ import annotations

import argparse
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
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[1]
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
        self.clients: list[Any] = []

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

    async def round(self, per: int) -> tuple[float, float, int, float]:
        """Seconds, server CPU seconds, calls, and the clients' CPU seconds (this process's:
        the in-process sessions are idle meanwhile) of one round of ``per`` a client."""
        cpu = _tree_cpu(self.proc.pid)
        mine = time.process_time()
        start = time.perf_counter()

        async def one(n: int, client: Any) -> None:
            for i in range(per):
                result = await client.call_tool("hello-world__greet", {"message": f"{n}-{i}"})
                assert result.structured_content["outcome"] == "completed", result

        async with anyio.create_task_group() as group:
            for n, client in enumerate(self.clients):
                group.start_soon(one, n, client)
        elapsed = time.perf_counter() - start
        clients = time.process_time() - mine
        return elapsed, _tree_cpu(self.proc.pid) - cpu, per * len(self.clients), clients

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


async def measure(clients: int, calls: int, rounds: int, workers: int | None) -> dict[str, Any]:
    """In-process and HTTP rounds taken in turns (so both see the same load), summed."""
    from contextlib import AsyncExitStack

    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    per = max(1, calls // clients // rounds)
    totals = {"in": [0.0, 0.0, 0, 0.0], "http": [0.0, 0.0, 0, 0.0]}
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        local = InProcess(Path(a), clients)
        server = OverHttp(Path(b), workers)
        try:
            async with AsyncExitStack() as stack:
                headers = {"Authorization": f"Bearer {KEY}"}
                for _ in range(clients):
                    http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
                    client = await stack.enter_async_context(
                        Client(streamable_http_client(server.url, http_client=http))
                    )
                    server.clients.append(client)
                server.wait_started()
                await server.warm_each()  # every worker has loaded what a call needs
                await server.round(2)
                processes = server.processes()
                for n in range(rounds):
                    sides = ["in", "http"] if n % 2 == 0 else ["http", "in"]
                    for side in sides:
                        if side == "in":
                            took = (*await anyio.to_thread.run_sync(local.round, per), 0.0)
                        else:
                            took = await server.round(per)
                        for i in range(4):
                            totals[side][i] += took[i]
        finally:
            server.close()
            local.close()
    return {"totals": totals, "processes": processes}


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=192, help="calls a side")
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--rounds", type=int, default=6, help="turns each side takes")
    parser.add_argument(
        "--workers", type=int, help="server processes (default: the command's, one per core)"
    )
    options = parser.parse_args()
    targets = {1: 0.7, 16: 0.9}
    print(f"hello-world#greet, {options.calls} calls a side in {options.rounds} turns each;"
          f" {os.cpu_count()} cores")  # fmt: skip
    for clients in (int(c) for c in options.clients.split(",")):
        load = os.getloadavg()[0]
        got = anyio.run(measure, clients, options.calls, options.rounds, options.workers)
        (t_in, cpu_in, n_in, _), (t_http, cpu_http, n_http, cpu_clients) = (
            got["totals"]["in"],
            got["totals"]["http"],
        )
        rate_in, rate_http = n_in / t_in, n_http / t_http
        cpu_in, cpu_http, cpu_client = cpu_in / n_in, cpu_http / n_http, cpu_clients / n_http
        target = targets.get(clients)
        print(f"{clients:3d} client(s), load average {load:.2f} -> {os.getloadavg()[0]:.2f}:")
        print(f"  in process  {rate_in:7.1f} calls/s   CPU {cpu_in * 1e3:6.2f} ms/call")
        print(
            f"  http        {rate_http:7.1f} calls/s   CPU {cpu_http * 1e3:6.2f} ms/call"
            f"   ({got['processes']} server processes)"
        )
        print(
            f"  ratio http / in process: throughput {rate_http / rate_in:5.2f}x"
            + (f" (target >= {target}x)" if target else "")
            + f", CPU per call {cpu_http / cpu_in:5.2f}x (target <= 1.3x)"
        )
        print(f"  SDK client(s) CPU {cpu_client * 1e3:6.2f} ms/call (this process)")
        if clients == 1:
            # One client waits for each answer: its own CPU is on every call's path. With a
            # server that cost nothing beyond the in-process run, the ratio would be at most
            # T / (T + c): T the in-process time a call (this run's, or its CPU alone when
            # nothing waits, as on a quiet machine with a fast disk), c the client's CPU.
            wall = 1 / rate_in
            print(
                f"  one client's ceiling with a free transport: {wall / (wall + cpu_client):5.2f}x"
                f" (this run), {cpu_in / (cpu_in + cpu_client):5.2f}x (runs that never wait)"
            )


if __name__ == "__main__":
    main()
