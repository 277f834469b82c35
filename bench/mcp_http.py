"""Benchmark ``proctor mcp --transport http`` throughput against the same runs in process.

    .venv/bin/python bench/mcp_http.py [--calls 160] [--clients 1,16] [--workers 0]

For each client count C, in one run:

- in process (the yardstick): C threads, each with a session made as the MCP server makes its
  pool's (managed, the sandbox required), run hello-world's ``greet`` back to back; calls per
  second over all of them, and the CPU per call of this process;
- http: C official-SDK clients, each on its own connection, call ``hello-world__greet`` against
  ``proctor mcp --transport http --workers W`` on a free loopback port (``--workers 0``: the
  server's default, one per core); calls per second, and the CPU per call of the server's
  processes (every worker, from ``/proc``).

Prints both rates, the ratio http / in-process (the issue's targets: at least 0.7x with one
client, 0.9x with sixteen) and the CPU ratio (target: within 1.3x). Each side runs in a fresh
workspace and home. The machine's load average is printed beside: on a shared machine the
figures to trust are the ratios.
"""

from __future__ import annotations

import argparse
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


def in_process(clients: int, calls: int) -> tuple[float, float]:
    """Calls per second and CPU seconds per call of ``clients`` threads running greet."""
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    with tempfile.TemporaryDirectory() as tmp:
        root, env = _workspace(Path(tmp))
        os.environ["PROCTOR_HOME"] = env["PROCTOR_HOME"]
        ref = f"{root / 'skills' / 'hello-world'}#greet"
        first = Session(Workspace(root), environ=env, sandbox_default="required", managed=True)
        signer = first.signer  # one key, made once, as the server makes it
        sessions = [first] + [
            Session(
                Workspace(root),
                environ=env,
                signer=signer,
                sandbox_default="required",
                managed=True,
            )
            for _ in range(clients - 1)
        ]
        for s in sessions:
            s.run(ref, inputs={"message": "warm up"}, cwd=root)
        per = calls // clients
        go = threading.Barrier(clients + 1)

        def work(session: Session, n: int) -> None:
            go.wait()
            for i in range(per):
                envelope = session.run(ref, inputs={"message": f"{n}-{i}"}, cwd=root)
                assert envelope.outcome == "completed", envelope

        threads = [threading.Thread(target=work, args=(s, n)) for n, s in enumerate(sessions)]
        for t in threads:
            t.start()
        cpu = time.process_time()
        go.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        for s in sessions:
            s.close()
    return per * clients / elapsed, cpu / (per * clients)


async def _clients(url: str, clients: int, calls: int) -> float:
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    per = calls // clients
    ready, go = anyio.Event(), anyio.Event()
    warmed: list[int] = []

    async def one(n: int) -> None:
        headers = {"Authorization": f"Bearer {KEY}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            await client.call_tool("hello-world__greet", {"message": "warm up"})
            warmed.append(n)
            if len(warmed) == clients:
                ready.set()
            await go.wait()
            for i in range(per):
                result = await client.call_tool("hello-world__greet", {"message": f"{n}-{i}"})
                assert result.structured_content["outcome"] == "completed", result

    start = 0.0
    async with anyio.create_task_group() as group:
        for n in range(clients):
            group.start_soon(one, n)
        await ready.wait()
        start = time.perf_counter()
        go.set()
    return per * clients / (time.perf_counter() - start)


def over_http(clients: int, calls: int, workers: int) -> tuple[float, float, int]:
    """Calls per second, server CPU seconds per call, and the number of server processes."""
    with tempfile.TemporaryDirectory() as tmp:
        root, env = _workspace(Path(tmp))
        env["PROCTOR_MCP_API_KEY"] = KEY
        argv = [sys.executable, "-m", "proctor", "mcp", "skills/hello-world", "--transport",
                "http", "--port", "0"]  # fmt: skip
        if workers:
            argv += ["--workers", str(workers)]
        proc = subprocess.Popen(argv, cwd=root, env=env, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            match = re.search(r"serving (http://\S+)", line)
            if match is None:
                raise SystemExit(f"server did not start: {line}{proc.stderr.read()}")
            # a warm-up round, so every worker has loaded what a call needs
            anyio.run(_clients, match.group(1), clients, clients * 2)
            processes = 1 + sum(
                1 for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == proc.pid
            )
            cpu = _tree_cpu(proc.pid)
            rate: Any = anyio.run(_clients, match.group(1), clients, calls)
            cpu = _tree_cpu(proc.pid) - cpu
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return rate, cpu / (calls // clients * clients), processes


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=160)
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--workers", type=int, default=0, help="0: the server's default")
    options = parser.parse_args()
    targets = {1: 0.7, 16: 0.9}
    print(f"hello-world#greet, {options.calls} calls a side; {os.cpu_count()} cores")
    for clients in (int(c) for c in options.clients.split(",")):
        load = os.getloadavg()[0]
        rate_in, cpu_in = in_process(clients, options.calls)
        rate_http, cpu_http, processes = over_http(clients, options.calls, options.workers)
        target = targets.get(clients)
        print(f"{clients:3d} client(s), load average {load:.2f}:")
        print(f"  in process  {rate_in:7.1f} calls/s   CPU {cpu_in * 1e3:6.2f} ms/call")
        print(
            f"  http        {rate_http:7.1f} calls/s   CPU {cpu_http * 1e3:6.2f} ms/call"
            f"   ({processes} server processes)"
        )
        print(
            f"  ratio http / in process: throughput {rate_http / rate_in:5.2f}x"
            + (f" (target >= {target}x)" if target else "")
            + f", CPU per call {cpu_http / cpu_in:5.2f}x (target <= 1.3x)"
        )


if __name__ == "__main__":
    main()
