"""Benchmark a governed file read over MCP stdio against the npm filesystem server's read.

    .venv/bin/python bench/mcp_read.py [--calls 200]

Two official-SDK clients over stdio, taking their calls in turns (so both see the same load on
a shared machine):

- yardstick: the npm ``@modelcontextprotocol/server-filesystem`` (``.ci/node``, as ``.ci/run``
  installs it, pinned there) answering ``read_text_file`` of a 4 KiB file;
- session: ``proctor mcp --tool fs.read`` serving proctor's ``fs.read`` directly: each call a
  governed call of the client session's one run (admitted, the read contained and its output
  checked, recorded, one audit line), the session's receipt sealed when the client goes;
- per run: ``proctor mcp`` serving a one-step skill whose step is ``fs.read`` of the same
  file: each call a run (admitted, the read contained and checked, recorded, audited, sealed
  with a signed receipt) in the sandbox a served call requires;
- beside them, in the same turns, the same run through ``Session.run`` in this process (no
  MCP), and the session's call through ``Session.turn_call`` of a session run opened here:
  what each costs alone, so each ratio splits into the engine's part and the MCP layer's.

Prints the median and p95 round trip of each, the ratios of the medians to npm's (the issue's
target: at most 2x), and the CPU per call of each server process (from ``/proc``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# this folder holds bench/mcp.py, which would shadow the SDK's ``mcp`` package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
NODE = (REPO / ".ci" / "node").resolve()
SERVER = NODE / "node_modules" / "@modelcontextprotocol" / "server-filesystem"

SKILL = """\
minimum_proctor: 0.1.0
default_method: read
methods:
  read:
    description: Read one file.
    inputs:
      type: object
      properties: {path: {type: string}}
      required: [path]
      additionalProperties: false
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.path}
    result_from: [read]
"""


def _workspace(base: Path) -> tuple[Path, Path]:
    root = base / "ws"
    data = root / "data"
    data.mkdir(parents=True)
    (root / ".proctor").mkdir()
    line = "The quick brown fox jumps over the lazy dog, and then it reads a file.\n"
    (data / "a.txt").write_text((line * 64)[:4096])
    skill = root / "skills" / "reader"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: reader\ndescription: Reads a file.\n---\n")
    (skill / "run.yaml").write_text(SKILL)
    return root, data


def _stats(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def _child_of_us(needle: str) -> int | None:
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
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _main(calls: int) -> None:
    from contextlib import AsyncExitStack

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    base = Path(tempfile.mkdtemp(prefix="proctor-bench-read-"))
    try:
        root, data = _workspace(base)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
        env["PROCTOR_HOME"] = str(base / "home")
        env["PYTHONPATH"] = str(REPO / "src")
        script = str(SERVER / "dist" / "index.js")
        direct = StdioServerParameters(command="node", args=[script, str(data)], env=env)
        governed = StdioServerParameters(
            command=sys.executable,
            args=["-m", "proctor", "mcp", "skills/reader"],
            cwd=str(root),
            env=env,
        )
        session_run = StdioServerParameters(
            command=sys.executable,
            args=["-m", "proctor", "mcp", "--tool", "fs.read"],
            cwd=str(root),
            env=env,
        )
        path = str(data / "a.txt")
        async with AsyncExitStack() as stack:
            d = await stack.enter_async_context(Client(direct))
            g = await stack.enter_async_context(Client(governed))
            pids = {"direct": _child_of_us(script), "governed": _child_of_us("proctor mcp skills")}
            s = await stack.enter_async_context(Client(session_run))
            pids["session"] = _child_of_us("proctor mcp --tool")

            async def direct_read() -> None:
                result = await d.call_tool("read_text_file", {"path": path})
                assert not result.is_error, result

            async def governed_read() -> None:
                result = await g.call_tool("reader__read", {"path": "data/a.txt"})
                assert not result.is_error, result
                assert result.structured_content["outcome"] == "completed", result

            async def session_read() -> None:
                result = await s.call_tool("fs_read", {"path": "data/a.txt"})
                assert not result.is_error, result
                assert result.structured_content["size"] == 4096, result

            from proctor.runtime.boundary.workspace import Workspace
            from proctor.runtime.engine.session import Session

            os.environ["PROCTOR_HOME"] = env["PROCTOR_HOME"]
            session = Session(
                Workspace(root), environ=env, sandbox_default="required", managed=True
            )
            stack.callback(session.close)
            ref = f"{root / 'skills' / 'reader'}#read"

            async def in_process() -> None:
                envelope = session.run(ref, inputs={"path": "data/a.txt"}, cwd=root)
                assert envelope.outcome == "completed", envelope

            from proctor.mcp.core_tools import open_core_tools
            from proctor.mcp.session_runs import TURN, seal_session_run

            package = open_core_tools(root, ["fs.read"]).sessions.package
            opened = session.run(str(package), inputs={"client": "bench"}, cwd=root)
            assert opened.status == "needs_agent" and opened.run_id is not None, opened
            turn_run = opened.run_id
            stack.callback(lambda: seal_session_run(session, turn_run))
            made = [0]

            async def turn_call() -> None:
                made[0] += 1
                outcome = session.turn_call(
                    turn_run, TURN, "fs.read", {"path": "data/a.txt"}, f"c{made[0]}"
                )
                assert outcome.status == "completed", outcome

            sides = {
                "direct": direct_read,
                "session": session_read,
                "governed": governed_read,
                "in_process": in_process,
                "turn_call": turn_call,
            }
            for _ in range(20):  # warm-up
                for fn in sides.values():
                    await fn()
            times: dict[str, list[float]] = {name: [] for name in sides}
            cpu = {name: _cpu(pid) for name, pid in pids.items()}
            cpu["in_process"] = cpu["turn_call"] = 0.0
            order = list(sides)
            for n in range(calls):
                at = n % len(order)  # each side takes every place in the turn in its turn
                for name in order[at:] + order[:at]:
                    start, used = time.perf_counter(), time.process_time()
                    await sides[name]()
                    times[name].append(time.perf_counter() - start)
                    if name in ("in_process", "turn_call"):
                        cpu[name] += time.process_time() - used
            cpu = {
                name: (_cpu(pids[name]) - cpu[name]) / calls if name in pids else cpu[name] / calls
                for name in sides
            }
        md, pd = _stats(times["direct"])
        ms, ps = _stats(times["session"])
        mg, pg = _stats(times["governed"])
        print(
            f"4 KiB file read over MCP stdio, {calls} calls each, interleaved,"
            f" load average {os.getloadavg()[0]:.2f}"
        )
        print(
            f"  npm server-filesystem read_text_file  median {md * 1e3:7.2f} ms"
            f"   p95 {pd * 1e3:7.2f} ms   server CPU {cpu['direct'] * 1e3:5.2f} ms/call"
        )
        print(
            f"  proctor mcp --tool fs.read (session) median {ms * 1e3:7.2f} ms"
            f"   p95 {ps * 1e3:7.2f} ms   server CPU {cpu['session'] * 1e3:5.2f} ms/call"
        )
        print(
            f"  proctor mcp, skill step fs.read      median {mg * 1e3:7.2f} ms"
            f"   p95 {pg * 1e3:7.2f} ms   server CPU {cpu['governed'] * 1e3:5.2f} ms/call"
        )
        mi, pi = _stats(times["in_process"])
        print(
            f"  the same run in process, no MCP      median {mi * 1e3:7.2f} ms"
            f"   p95 {pi * 1e3:7.2f} ms   CPU        {cpu['in_process'] * 1e3:5.2f} ms/call"
        )
        mt, pt = _stats(times["turn_call"])
        print(
            f"  the session's call in process, no MCP median {mt * 1e3:7.2f} ms"
            f"   p95 {pt * 1e3:7.2f} ms   CPU        {cpu['turn_call'] * 1e3:5.2f} ms/call"
        )
        print(f"  ratio session / npm (medians)         {ms / md:7.2f}x   (target <= 2x)")
        print(f"  ratio per run / npm (medians)         {mg / md:7.2f}x")
        print(f"  ratio in process / npm (medians)      {mi / md:7.2f}x   (the run alone)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    if not (SERVER / "dist" / "index.js").is_file():
        sys.exit("the filesystem server is not installed (.ci/run installs it into .ci/node)")
    import anyio

    anyio.run(_main, options.calls)


if __name__ == "__main__":
    main()
