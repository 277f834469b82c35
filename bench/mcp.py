"""Benchmark ``proctor mcp``: round trips over stdio and throughput over streamable HTTP.

    .venv/bin/python bench/mcp.py [--calls 1000] [--http-calls 400] [--clients 8]
        [--interleave [--baseline OTHER_CHECKOUT/src]]

Prints, for the hello-world skill's ``greet`` method (two native tool steps, receipts signed
and written, audit lines appended):

- stdio: median and p95 round trip of one ``tools/call`` through ``proctor mcp`` (a real
  subprocess, the official SDK client), over ``--calls`` sequential calls; beside it, in the
  same run, the same method through ``Session.run`` in-process (no MCP: the peer that shows
  what MCP adds) and a bare ``tools/list`` round trip (protocol cost alone);
- http: calls per second with ``--clients`` concurrent SDK clients, each on its own session,
  against ``proctor mcp --transport http`` on a free loopback port.

Each measurement runs in a fresh temporary workspace and home.

On a loaded machine the stdio and in-process medians, taken one after the other, drift apart
with the load. ``--interleave`` takes them in turns instead (one ``tools/call``, then one
in-process run, ``--calls`` times), so both see the same load; ``--baseline SRC`` adds, in the
same turns, a second server running another checkout's ``src`` (the code before a change).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
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


def _stats(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"median {statistics.median(ordered) * 1e3:7.2f} ms   p95 {p95 * 1e3:7.2f} ms"


async def _stdio(root: Path, env: dict[str, str], calls: int) -> tuple[list[float], list[float]]:
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
        rounds = []
        for n in range(calls):
            start = time.perf_counter()
            result = await client.call_tool("hello-world__greet", {"message": f"m{n}"})
            rounds.append(time.perf_counter() - start)
            assert result.structured_content["outcome"] == "completed"
    return rounds, lists


async def _interleaved(
    tmp: Path, calls: int, baseline: Path | None
) -> tuple[list[float], list[float], list[float]]:
    """Samples taken in turns: a call to this checkout's server and one to the baseline's (when
    given; the two swap places every turn), then one in-process run."""
    from contextlib import AsyncExitStack

    from mcp import Client, StdioServerParameters
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    async with AsyncExitStack() as stack:
        clients = []
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
        root, env = _workspace(tmp / "in-process")
        os.environ["PROCTOR_HOME"] = env["PROCTOR_HOME"]
        session = Session(Workspace(root), environ=env)
        stack.callback(session.close)
        session.run("hello-world", inputs={"message": "warm up"}, cwd=root)
        samples: list[list[float]] = [[] for _ in range(len(clients) + 1)]
        for n in range(calls):
            turn = list(zip(clients, samples, strict=False))
            if n % 2:  # neither server always goes first after the in-process run
                turn.reverse()
            for client, into in turn:
                start = time.perf_counter()
                result = await client.call_tool("hello-world__greet", {"message": f"m{n}"})
                into.append(time.perf_counter() - start)
                assert result.structured_content["outcome"] == "completed"
            start = time.perf_counter()
            envelope = session.run("hello-world", inputs={"message": f"m{n}"}, cwd=root)
            samples[-1].append(time.perf_counter() - start)
            assert envelope.outcome == "completed"
    if baseline is None:
        return samples[0], [], samples[1]
    return samples[0], samples[1], samples[2]


def _in_process(root: Path, env: dict[str, str], calls: int) -> list[float]:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    session = Session(Workspace(root), environ=env)
    try:
        session.run("hello-world", inputs={"message": "warm up"}, cwd=root)
        samples = []
        for n in range(calls):
            start = time.perf_counter()
            envelope = session.run("hello-world", inputs={"message": f"m{n}"}, cwd=root)
            samples.append(time.perf_counter() - start)
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
            rounds, base, direct = anyio.run(
                _interleaved, Path(tmp), options.calls, options.baseline
            )
        print(f"interleaved, {len(rounds)} turns, load average {os.getloadavg()[0]:.2f}:")
        print(f"stdio tools/call hello-world#greet, this checkout: {_stats(rounds)}")
        if base:
            print(f"stdio tools/call hello-world#greet, baseline:      {_stats(base)}")
        print(f"in-process Session.run, no MCP:                   {_stats(direct)}")
        line = "MCP stdio round trip / in-process run (medians): "
        line += f"{statistics.median(rounds) / statistics.median(direct):.2f}x this checkout"
        if base:
            line += f", {statistics.median(base) / statistics.median(direct):.2f}x baseline"
        print(line)
        return

    with tempfile.TemporaryDirectory() as tmp:
        root, env = _workspace(Path(tmp))
        rounds, lists = anyio.run(_stdio, root, env, options.calls)
    with tempfile.TemporaryDirectory() as tmp:
        root, env = _workspace(Path(tmp))
        os.environ["PROCTOR_HOME"] = env["PROCTOR_HOME"]
        direct = _in_process(root, env, min(options.calls, 300))
    print(f"stdio tools/call hello-world#greet ({len(rounds)} calls): {_stats(rounds)}")
    print(f"in-process Session.run, no MCP ({len(direct)} runs):    {_stats(direct)}")
    print(f"stdio tools/list ({len(lists)} calls):                   {_stats(lists)}")
    ratio = statistics.median(rounds) / statistics.median(direct)
    print(f"MCP stdio round trip / in-process run (medians): {ratio:.2f}x")

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
