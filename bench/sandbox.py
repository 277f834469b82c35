"""Cost of the process sandbox per command.

Prints median and p95 in milliseconds for ``/bin/true``:
  raw          subprocess.run, no sandbox;
  bare         subprocess.run of a bare bubblewrap of the same program (``/`` bound read-only,
               the same namespaces and dropped privileges, a fresh /tmp, nothing else): the
               peer the allowlist is compared with;
  raw+bwrap    subprocess.run of the bubblewrap command line a run's sandbox builds (the
               allowlist view: system folders, toolchains, /etc's secrets hidden ...);
  tool         command.execute's handler, unsandboxed (PROCTOR_SANDBOX=off);
  tool+bwrap   command.execute's handler under bubblewrap (what a run pays per command:
               building the spec from the workspace, bubblewrap, the PID namespace teardown);
  spec         building the sandbox's spec alone (part of tool+bwrap);
the deltas (sandboxed minus unsandboxed, medians), and the ratios of the allowlist sandbox to
the bare bubblewrap (median and p95; target <= 1.5x). Admission and the run store are the same
either way and left out. The target is under 20 ms per command.

Run: .venv/bin/python bench/sandbox.py [iterations]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from proctor.runtime.boundary.sandbox import (
    _BASE_MOUNTS,
    _ISOLATION,
    SANDBOX_EXTRA,
    SandboxUse,
    bwrap_argv,
    probe,
)
from proctor.runtime.boundary.sandbox_paths import run_sandbox
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.command import COMMAND_EXECUTE

TRUE = "/bin/true"


def _measure(cases: dict[str, Callable[[], object]], n: int) -> dict[str, tuple[float, float]]:
    """Median and p95 of each case; the cases take turns, so a load that comes and goes on a
    shared machine weighs on each of them alike."""
    for fn in cases.values():
        for _ in range(min(10, n)):
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
        workspace=ws,
        store=cast(Any, None),
        run_id="bench",
        call_id="bench/1",
        extras={SANDBOX_EXTRA: use},
    )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    bwrap = shutil.which("bwrap")
    if not probe(bwrap).available or bwrap is None:
        raise SystemExit(f"bubblewrap does not work here: {probe(bwrap).reason}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / ".proctor").mkdir(parents=True)
        (root / "policies").mkdir()
        ws = Workspace(root)
        env = {"PATH": os.environ.get("PATH", os.defpath)}
        spec, _ = run_sandbox(ws, environ=os.environ, env=env, cwd=root, network=False)
        sandboxed = bwrap_argv(spec, [TRUE], bwrap=bwrap)
        args = {"argv": [TRUE], "timeout_seconds": 30}
        off = _ctx(ws, SandboxUse("none", "off", network=True))
        on = _ctx(ws, SandboxUse("bubblewrap", "required", bwrap=bwrap))

        def raw() -> None:
            subprocess.run([TRUE], env=env, check=True)

        # the same namespaces and privileges, the host's / bound whole: what the view adds
        bare = [bwrap, *_ISOLATION, "--unshare-net", *_BASE_MOUNTS, "--", TRUE]

        def bare_bwrap() -> None:
            subprocess.run(bare, env=env, check=True)

        def raw_bwrap() -> None:
            subprocess.run(sandboxed, env=env, check=True)

        def spec_only() -> None:
            run_sandbox(ws, environ=os.environ, env=env, cwd=root, network=False)

        got = _measure(
            {
                "raw": raw,
                "bare": bare_bwrap,
                "raw+bwrap": raw_bwrap,
                "tool": lambda: COMMAND_EXECUTE.handler(off, dict(args)),
                "tool+bwrap": lambda: COMMAND_EXECUTE.handler(on, dict(args)),
                "spec": spec_only,
            },
            n,
        )
    print(f"process sandbox, /bin/true, {n} iterations (milliseconds)")
    for name, (median, p95) in got.items():
        print(f"  {name:11s} median {median:7.2f}  p95 {p95:7.2f}")
    print(f"  delta raw   median {got['raw+bwrap'][0] - got['raw'][0]:7.2f}")
    print(f"  delta tool  median {got['tool+bwrap'][0] - got['tool'][0]:7.2f}  (target < 20)")
    for name in ("raw+bwrap", "tool+bwrap"):
        median = got[name][0] / got["bare"][0]
        p95 = got[name][1] / got["bare"][1]
        print(f"  {name} / bare  median {median:5.2f}x  p95 {p95:5.2f}x  (target <= 1.5x)")


if __name__ == "__main__":
    main()
