"""Instructions per call of ``proctor mcp --transport http`` against the same runs in process,
counted by callgrind: the CPU ratio of bench/mcp_http.py in a form a shared machine's load
does not move.

    .venv/bin/python bench/mcp_http_instructions.py [--calls 100] [--workers 1] [--client sdk|raw]
        [--protocol modern|legacy|both] [--clients 1] [--keep DIR] [--src PATH]

Both sides run under ``valgrind --tool=callgrind`` with instrumentation off until warmed up
(10 calls), then on for ``--calls`` calls:

- in process (the yardstick): one session made as the MCP server makes its pool's (managed,
  the sandbox required) runs hello-world's ``greet``;
- http: the server (``--workers``, default 1: one process, so the count is of one
  interpreter) serves one client in this process, uninstrumented: the official SDK's (``sdk``,
  the default) or bench/mcp_http.py's lean ``raw`` one, speaking ``--protocol``: ``modern``
  (2026-07-28, the SDK client's default: each request self-contained), ``legacy`` (the
  handshake protocol, a session), or ``both`` (one server each, printed apart).

``--src`` counts another checkout's proctor (both sides).

Prints user-space instructions per call (each thread of the server apart: the event loop's
thread is the transport's cost) and the ratio http / in process. System calls and the
scheduler are not counted: bench/mcp_http.py measures time. Needs valgrind.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
KEY = "bench-key-0123456789abcdef"
SRC = [REPO / "src"]  # the proctor both sides run (--src)
WARM = 10

IN_PROCESS = """
import os, subprocess, sys
from pathlib import Path
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
root, calls = Path(sys.argv[1]), int(sys.argv[2])
s = Session(Workspace(root), environ=dict(os.environ), sandbox_default="required", managed=True)
ref = f"{root / 'skills' / 'hello-world'}#greet"
for i in range(WARM):
    s.run(ref, inputs={"message": f"w{i}"}, cwd=root)
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], **quiet)
for i in range(calls):
    assert s.run(ref, inputs={"message": f"m{i}"}, cwd=root).outcome == "completed"
subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], **quiet)
s.close()
""".replace("WARM", str(WARM))


def _workspace(tmp: Path) -> tuple[Path, dict[str, str]]:
    root = tmp / "work"
    (root / ".proctor").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "hello-world", root / "skills" / "hello-world")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(tmp / "home")
    env["PYTHONPATH"] = str(SRC[0])
    return root, env


def _valgrind(out: Path) -> list[str]:
    return ["valgrind", "-q", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
            f"--callgrind-out-file={out}.%p"]  # fmt: skip


def _per_thread(out: Path) -> list[int]:
    """Instructions counted in each thread's file (threads that ran nothing left out)."""
    counts = []
    for path in sorted(out.parent.glob(out.name + ".*-*")):
        # the "totals:" line (callgrind writes it last), else the sum of the cost lines
        text = path.read_text(errors="replace")
        found = re.search(r"^totals:\s+(\d+)", text, re.M)
        if found is None:
            found = re.search(r"^summary:\s+(\d+)", text, re.M)
        total = int(found.group(1)) if found is not None else 0
        if total == 0:
            annotated = subprocess.run(
                ["callgrind_annotate", "--inclusive=no", str(path)], capture_output=True, text=True
            ).stdout
            match = re.search(r"^([\d,]+) .*PROGRAM TOTALS", annotated, re.M)
            total = int(match.group(1).replace(",", "")) if match else 0
        if total:
            counts.append(total)
    return counts


def in_process(tmp: Path, calls: int) -> list[int]:
    root, env = _workspace(tmp / "in")
    out = tmp / "in.cg"
    argv = [*_valgrind(out), sys.executable, "-c", IN_PROCESS, str(root), str(calls)]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _per_thread(out)


def _raw_client() -> Any:
    """bench/mcp_http.py's RawClient (loaded by path: this folder's mcp.py is not the SDK)."""
    spec = importlib.util.spec_from_file_location(
        "bench_mcp_http", Path(__file__).with_name("mcp_http.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RawClient


async def over_http(
    tmp: Path,
    calls: int,
    workers: int,
    client_kind: str = "sdk",
    clients: int = 1,
    protocol: str = "modern",
) -> list[int]:
    root, env = _workspace(tmp / f"http-{protocol}")
    env["PROCTOR_MCP_API_KEY"] = KEY
    out = tmp / f"http-{protocol}.cg"
    argv = [*_valgrind(out), sys.executable, "-m", "proctor", "mcp", "skills/hello-world",
            "--transport", "http", "--port", "0", "--workers", str(workers)]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=root, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = ""
    while "serving" not in line:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit("the server did not start")
    url = re.search(r"serving (http://\S+)", line).group(1)  # type: ignore[union-attr]

    def instrument(on: bool) -> None:
        flag = "on" if on else "off"
        subprocess.run(
            ["callgrind_control", "-i", flag, str(proc.pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    try:
        if client_kind == "raw" and clients > 1:
            await anyio.to_thread.run_sync(_raw_clients, url, calls, clients, instrument, protocol)
        elif client_kind == "raw":
            raw = _raw_client()(url, KEY, protocol)
            for n in range(WARM + calls):
                if n == WARM:
                    instrument(True)
                raw.greet(f"m{n}")
            instrument(False)
            raw.close()
        else:
            await _sdk_calls(url, calls, instrument, protocol)
    finally:
        proc.terminate()
        proc.wait(timeout=300)
    return _per_thread(out)


def _raw_clients(url: str, calls: int, clients: int, instrument: Any, protocol: str) -> None:
    """``clients`` raw clients at once, each on its own thread and connection, ``calls`` calls
    among them counted (after each has made its warm-up calls)."""
    import threading

    made = [_raw_client()(url, KEY, protocol) for _ in range(clients)]
    warm = threading.Barrier(clients + 1)
    done = threading.Barrier(clients + 1)

    def client(k: int) -> None:
        for n in range(WARM):
            made[k].greet(f"w{k}-{n}")
        warm.wait()
        warm.wait()  # instrumented from here
        for n in range(k, calls, clients):
            made[k].greet(f"m{n}")
        done.wait()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    warm.wait()
    instrument(True)
    warm.wait()
    done.wait()
    instrument(False)
    for thread in threads:
        thread.join()
    for raw in made:
        raw.close()


async def _sdk_calls(url: str, calls: int, instrument: Any, protocol: str) -> None:
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {KEY}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="legacy" if protocol == "legacy" else "auto",  # auto: the modern protocol
        ) as client,
    ):
        for n in range(WARM + calls):
            if n == WARM:
                instrument(True)
            result = await client.call_tool("hello-world__greet", {"message": f"m{n}"})
            assert result.structured_content["outcome"] == "completed", result
        instrument(False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--client", choices=["sdk", "raw"], default="sdk")
    parser.add_argument("--protocol", choices=["modern", "legacy", "both"], default="both")
    parser.add_argument(
        "--clients", type=int, default=1, help="raw clients at once (the counted calls shared)"
    )
    parser.add_argument(
        "--keep", type=Path, help="copy callgrind's files here (for callgrind_annotate)"
    )
    parser.add_argument("--src", type=Path, help="the proctor source both sides run")
    options = parser.parse_args()
    if options.src is not None:
        SRC[0] = options.src.resolve()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    protocols = ["modern", "legacy"] if options.protocol == "both" else [options.protocol]
    load = os.getloadavg()[0]
    served: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        local = in_process(tmp, options.calls)
        for protocol in protocols:
            served[protocol] = anyio.run(
                over_http,
                tmp,
                options.calls,
                options.workers,
                options.client,
                options.clients,
                protocol,
            )
        if options.keep is not None:
            options.keep.mkdir(parents=True, exist_ok=True)
            for path in tmp.glob("*.cg.*"):
                shutil.copy(path, options.keep / path.name)
    n = options.calls
    base = sum(local) / n
    print(f"hello-world#greet, {n} calls a side under callgrind; load average {load:.2f};"
          f" proctor from {SRC[0]}")  # fmt: skip
    print(f"  in process  {base / 1e6:6.2f} M instructions/call")
    kind = options.client if options.clients == 1 else f"{options.client} x{options.clients}"
    for protocol, counts in served.items():
        total = sum(counts) / n
        threads = ", ".join(f"{c / n / 1e6:.2f}" for c in counts)
        print(
            f"  http ({kind}, {protocol})  {total / 1e6:6.2f} M instructions/call"
            f" (threads: {threads})"
        )
        print(f"    ratio http / in process: {total / base:5.2f}x (the CPU target: <= 1.3x)")


if __name__ == "__main__":
    main()
