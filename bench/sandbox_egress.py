"""Cost of the egress proxy per command, against bare bubblewrap, measured in one run.

A sandboxed process never shares the host's network; with an egress grant it gets the egress
proxy (started on the host for the command's life) and the relay inside its sandbox (a small
Python program that listens on its loopback, then becomes the command). Prints median and p95
in milliseconds for ``/bin/true``:

  bwrap          subprocess.run of the sandbox's bubblewrap command line (bare bubblewrap);
  bwrap+relay    the same with the relay in front of the program (no proxy: the relay alone);
  proxy          starting and stopping an egress proxy alone (part of tool+egress);
  tool           command.execute's handler under bubblewrap, no egress grant;
  tool+egress    command.execute's handler under bubblewrap with a grant (proxy and relay);

then the ratio of each to bare bubblewrap, and the per-command cost the proxy adds (tool+egress
minus tool). Last, one connection: an HTTP GET of a loopback server through the proxy, from
inside the sandbox, against the same GET made by a program with the host's network.

Run: .venv/bin/python bench/sandbox_egress.py [iterations]
"""

from __future__ import annotations

import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from proctor.runtime.boundary.egress_allow import EgressAllow
from proctor.runtime.boundary.egress_proxy import EgressProxy
from proctor.runtime.boundary.netrelay import Relay
from proctor.runtime.boundary.sandbox import (
    SANDBOX_EXTRA,
    EgressLog,
    SandboxUse,
    bwrap_argv,
    probe,
)
from proctor.runtime.boundary.sandbox_paths import run_sandbox
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.command import COMMAND_EXECUTE

TRUE = "/bin/true"
GET = (
    "import sys, urllib.request\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    urllib.request.urlopen(sys.argv[1], timeout=10).read()\n"
)


def _measure(cases: dict[str, Callable[[], object]], n: int) -> dict[str, tuple[float, float]]:
    """Median and p95 of each case; the cases take turns, so a load that comes and goes on a
    shared machine weighs on each of them alike."""
    for fn in cases.values():
        for _ in range(min(5, n)):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(n):
        for name, fn in cases.items():
            start = time.perf_counter_ns()
            fn()
            samples[name].append((time.perf_counter_ns() - start) / 1e6)
    out = {}
    for name, got in samples.items():
        got.sort()
        out[name] = (statistics.median(got), got[max(0, int(len(got) * 0.95) - 1)])
    return out


def _ctx(ws: Workspace, use: SandboxUse) -> ToolContext:
    # the handler reads only the workspace and its extras; the run store is admission's
    return ToolContext(
        workspace=ws, store=cast(Any, None), run_id="bench", call_id="bench/1",
        extras={SANDBOX_EXTRA: use},
    )  # fmt: skip


class _Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"ok"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    bwrap = shutil.which("bwrap")
    if not probe(bwrap).available or bwrap is None:
        raise SystemExit(f"bubblewrap does not work here: {probe(bwrap).reason}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / ".proctor").mkdir(parents=True)
        ws = Workspace(root)
        env = {"PATH": os.environ.get("PATH", os.defpath)}
        spec, _ = run_sandbox(ws, environ=os.environ, env=env, cwd=root, network=True)
        bare = bwrap_argv(spec, [TRUE], bwrap=bwrap)
        folder = Path(tmp) / "relay"
        folder.mkdir()
        relayed = bwrap_argv(spec, [TRUE], bwrap=bwrap, relay=Relay(folder, egress=True))
        args = {"argv": [TRUE], "timeout_seconds": 30}
        plain = _ctx(ws, SandboxUse("bubblewrap", "required", bwrap=bwrap))

        def granted() -> object:
            use = SandboxUse("bubblewrap", "required", network=True, bwrap=bwrap,
                             egress=("127.0.0.1",), log=EgressLog())  # fmt: skip
            return COMMAND_EXECUTE.handler(_ctx(ws, use), dict(args))

        def proxy_alone() -> None:
            EgressProxy(EgressAllow.parse(["127.0.0.1"])).start().stop()

        got = _measure(
            {
                "bwrap": lambda: subprocess.run(bare, env=env, check=True),
                "bwrap+relay": lambda: subprocess.run(relayed, env=env, check=True),
                "proxy": proxy_alone,
                "tool": lambda: COMMAND_EXECUTE.handler(plain, dict(args)),
                "tool+egress": granted,
            },
            n,
        )
        per_get = _connections(spec, bwrap, env, root)
    print(f"egress proxy, /bin/true, {n} iterations (milliseconds)")
    base = got["bwrap"][0]
    for name, (median, p95) in got.items():
        print(
            f"  {name:12s} median {median:7.2f}  p95 {p95:7.2f}  x{median / base:5.2f} bare bwrap"
        )
    added = got["tool+egress"][0] - got["tool"][0]
    added95 = got["tool+egress"][1] - got["tool"][1]
    print(f"  proxy adds per command: median {added:6.2f}  p95 {added95:6.2f}")
    direct, proxied = per_get
    print(f"  one HTTP GET of a loopback server (200 in one program, median of 5): "
          f"host network {direct:6.3f}, through the proxy {proxied:6.3f}")  # fmt: skip


def _connections(spec: Any, bwrap: str, env: dict[str, str], root: Path) -> tuple[float, float]:
    """Per-GET time (ms) from a host program and from a sandboxed one through the proxy."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    count = 200
    script = root / "get.py"
    script.write_text(GET)
    try:
        with EgressProxy(EgressAllow.parse(["127.0.0.1"])) as proxy:
            assert proxy.folder is not None
            relay = Relay(proxy.folder, egress=True)

            def host(reps: int) -> list[str]:
                return [sys.executable, str(script), url, str(reps)]

            def boxed(reps: int) -> list[str]:
                return bwrap_argv(spec, host(reps), bwrap=bwrap, relay=relay)

            per: dict[str, list[float]] = {"direct": [], "proxied": []}
            for _ in range(5):  # the two programs take turns; the median of 5 differences
                for name, argv in (("direct", host), ("proxied", boxed)):
                    took = []
                    for reps in (1, count + 1):  # the difference removes the start-up
                        start = time.perf_counter()
                        subprocess.run(argv(reps), env=env, check=True)
                        took.append(time.perf_counter() - start)
                    per[name].append((took[1] - took[0]) / count * 1000)
        direct = statistics.median(per["direct"])
        proxied = statistics.median(per["proxied"])
    finally:
        server.shutdown()
        server.server_close()
    return direct, proxied


if __name__ == "__main__":
    main()
