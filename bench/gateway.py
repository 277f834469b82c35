"""Benchmark the gateway: what a governed upstream call adds over a direct one.

    .venv/bin/python bench/gateway.py [--calls 200] [--interleave]

The upstream is the npm filesystem server (``.ci/node``, as ``.ci/run`` installs it) and the
call its ``read_text_file`` of a small file. Two clients, the official Python SDK's, each over
stdio:

- direct: the client starts the filesystem server itself (as a host configured with
  ``.mcp.json`` does) and calls it;
- governed: the client starts ``proctor mcp --gateway`` in a workspace whose ``.mcp.json`` names
  the same server; proctor runs it in the sandbox, and each call is admitted (scope, schema,
  policy, the floor, budgets, rate windows, the pin's check), recorded in the run store, audited,
  then sent upstream. The session's run seals at the end (not timed).

Prints the median and p95 round trip of each over ``--calls`` sequential calls after a
warm-up, the time the gateway adds (median and p95 of governed minus direct) and the ratio of
the medians (the issue's target: at most 1.5x). ``--interleave`` alternates the two clients
call by call, so both see the same load on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# this folder holds bench/mcp.py, which would shadow the SDK's ``mcp`` package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
SERVER = (
    (REPO / ".ci" / "node").resolve()
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-filesystem"
)


def _workspace(base: Path) -> tuple[Path, Path]:
    root = base / "ws"
    data = root / "data"
    data.mkdir(parents=True)
    (root / ".proctor").mkdir()
    (data / "a.txt").write_text("hello from the bench\n" * 20)
    script = SERVER / "dist" / "index.js"
    servers = {"fs": {"command": "node", "args": [str(script), str(data)]}}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    reads = json.dumps([str((REPO / ".ci" / "node").resolve())])
    (root / "proctor.toml").write_text(f"[sandbox]\nread = {reads}\n")
    return root, data


def _child_of_us(needle: str) -> int | None:
    """The child process of this one whose command line holds ``needle``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and needle in cmdline:
            return int(entry)
    return None


def _cpu(pid: int | None) -> float:
    """CPU seconds (user and system) of ``pid`` so far (NaN when unknown)."""
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stats(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


async def _main(calls: int, interleave: bool) -> None:
    from contextlib import AsyncExitStack

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    base = Path(tempfile.mkdtemp(prefix="proctor-bench-gateway-"))
    try:
        root, data = _workspace(base)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
        env["PROCTOR_HOME"] = str(base / "home")
        env["PYTHONPATH"] = str(REPO / "src")
        direct = StdioServerParameters(
            command="node", args=[str(SERVER / "dist" / "index.js"), str(data)], env=env
        )
        governed = StdioServerParameters(
            command=sys.executable,
            args=["-m", "proctor", "mcp", "--gateway"],
            cwd=str(root),
            env={**env, "PROCTOR_SANDBOX": "required"},
        )
        args = {"path": str(data / "a.txt")}
        async with AsyncExitStack() as stack:
            d = await stack.enter_async_context(Client(direct))
            g = await stack.enter_async_context(Client(governed))

            async def one(client: Any, name: str) -> float:
                start = time.perf_counter()
                result = await client.call_tool(name, args)
                took = time.perf_counter() - start
                assert not result.is_error, result
                return took

            for _ in range(20):  # warm-up: the sandboxed server started, the run opened
                await one(d, "read_text_file")
                await one(g, "fs__read_text_file")
            gateway_pid = _child_of_us("--gateway")
            cpu_before = _cpu(gateway_pid)
            times_d: list[float] = []
            times_g: list[float] = []
            if interleave:
                for _ in range(calls):
                    times_d.append(await one(d, "read_text_file"))
                    times_g.append(await one(g, "fs__read_text_file"))
            else:
                for _ in range(calls):
                    times_d.append(await one(d, "read_text_file"))
                for _ in range(calls):
                    times_g.append(await one(g, "fs__read_text_file"))
            gateway_cpu = (_cpu(gateway_pid) - cpu_before) / calls
        md, pd = _stats(times_d)
        mg, pg = _stats(times_g)
        added = [g - d for g, d in zip(sorted(times_g), sorted(times_d), strict=True)]
        ma, pa = _stats(added)
        print(
            f"filesystem read_text_file, {calls} calls each"
            f" ({'interleaved' if interleave else 'one client after the other'})"
        )
        print(
            f"  direct   client -> upstream           median {md * 1e3:8.2f} ms"
            f"   p95 {pd * 1e3:8.2f} ms"
        )
        print(
            f"  governed client -> proctor -> upstream median {mg * 1e3:8.2f} ms"
            f"   p95 {pg * 1e3:8.2f} ms"
        )
        print(
            f"  added by the gateway                  median {ma * 1e3:8.2f} ms"
            f"   p95 {pa * 1e3:8.2f} ms"
        )
        print(f"  ratio governed / direct (medians)     {mg / md:8.2f}x   (target <= 1.5x)")
        print(
            f"  proctor's CPU per call (not the upstream's) {gateway_cpu * 1e3:6.2f} ms;"
            f" load average {os.getloadavg()[0]:.2f}"
        )
        _in_process(root, data, calls, env)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _in_process(root: Path, data: Path, calls: int, env: dict[str, str]) -> None:
    """Where the time goes, without MCP in front: the sandboxed server through proctor's own
    wire alone (no admission), then one governed turn call (admission, lease, records)."""
    os.environ.update({"PROCTOR_HOME": env["PROCTOR_HOME"], "PROCTOR_SANDBOX": "required"})
    from proctor.mcp.gateway import open_gateway
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    workspace = Workspace.discover(root)
    gateway = open_gateway(workspace, os.environ, None, print)
    session = Session(workspace, managed=True, sandbox_default="required")
    try:
        run_id = session.run(str(gateway.package), inputs={"client": "bench"}).run_id
        assert run_id is not None
        args = {"path": str(data / "a.txt")}
        wire = gateway.upstreams.wire("fs")
        for i in range(20):
            wire.call_tool("read_text_file", args)
            session.turn_call(run_id, "serve", "mcp:fs/read_text_file", args, f"w{i}")
        times_w, times_t = [], []
        for i in range(calls):
            start = time.perf_counter()
            wire.call_tool("read_text_file", args)
            times_w.append(time.perf_counter() - start)
            start = time.perf_counter()
            session.turn_call(run_id, "serve", "mcp:fs/read_text_file", args, f"c{i}")
            times_t.append(time.perf_counter() - start)
        mw, pw = _stats(times_w)
        mt, pt = _stats(times_t)
        print("in process (no MCP client in front):")
        print(
            f"  proctor's wire to the sandboxed server median {mw * 1e3:8.2f} ms"
            f"   p95 {pw * 1e3:8.2f} ms"
        )
        print(
            f"  one governed turn call                 median {mt * 1e3:8.2f} ms"
            f"   p95 {pt * 1e3:8.2f} ms"
        )
    finally:
        session.close()
        gateway.upstreams.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--interleave", action="store_true")
    options = parser.parse_args()
    if not (SERVER / "dist" / "index.js").is_file():
        sys.exit("the filesystem server is not installed (.ci/run installs it into .ci/node)")
    import anyio

    anyio.run(_main, options.calls, options.interleave)


if __name__ == "__main__":
    main()
