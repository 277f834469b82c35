#!/usr/bin/env python3
"""Worker steps and artifacts: what a worker costs to start and to call back, and how fast an
artifact reads.

  worker start-up       one worker.run call of a function that returns at once (sandbox set-up,
                        python -I -S start, protocol, kill of the tree), through the tool handler
  worker round trip     per ctx.call("echo") from inside a running worker: the pipe, admission
                        of the call, its record in the SQLite run store, the reply
  artifact admit        artifact.admit of a 64 MiB file (read, per-block digests, copy)
  artifact read         artifact.read of that file in 4 MiB base64 pages, whole file (MiB/s)

Under bubblewrap when it works here (the default ``PROCTOR_SANDBOX=required`` otherwise refuses).

    .venv/bin/python bench/compute.py [--rounds 20] [--calls 500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _timing import measure

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODULE = """
def nothing(inputs, ctx):
    return {}

def echoes(inputs, ctx):
    for _ in range(inputs["n"]):
        ctx.call("echo", {"text": "x"})
    return {}
"""
MIB = 1024 * 1024


def _session(root: Path):  # type: ignore[no-untyped-def]
    from tests.runtime.driver_support import make_skill, make_workspace, session

    make_workspace(root)
    for name, function in (("nothing", "nothing"), ("echoes", "echoes")):
        make_skill(
            root,
            name,
            f"""minimum_proctor: 0.1.0
methods:
  main:
    inputs: {{type: object}}
    steps:
      - id: work
        worker: {{module: work.py, function: {function}, calls: {{tools: [echo]}},
                  max_calls: 10000}}
        inputs: {{n: $input.n}}
""",
        )
        (root / "skills" / name / "work.py").write_text(MODULE)
    return session(root)


def _percentiles(label: str, times: list[float], unit: str = "ms") -> float:
    times.sort()
    median = statistics.median(times)
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    print(f"{label:<34} median {median:9.2f} {unit}   p95 {p95:9.2f} {unit}")
    return median


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--artifact-mib", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        s = _session(root)
        try:
            whole: list[float] = []

            def one() -> None:
                env = s.run("nothing", cwd=root, inputs={"n": 0})
                assert env.outcome == "completed", env.refusal

            base_us = measure(
                "worker start-up (whole 1-step run)", one, args.rounds, warm=2, width=34
            )
            env = s.run("nothing", cwd=root, inputs={"n": 0})
            (call,) = [c for c in s.store.calls(env.run_id or "") if c.tool == "worker.run"]
            print(f"{'  of which worker.run':<34} {call.result['result']['duration_ms']:9d} ms")
            for _ in range(max(1, args.rounds // 5)):
                began = time.perf_counter()
                env = s.run("echoes", cwd=root, inputs={"n": args.calls})
                assert env.outcome == "completed", env.refusal
                whole.append((time.perf_counter() - began) * 1000)
            per = [(w - base_us / 1000) * 1000 / args.calls for w in whole]
            _percentiles(f"ctx.call round trip ({args.calls}/run)", per, "us")
        finally:
            s.close()
        _artifacts(Path(tmp), args.artifact_mib)


def _artifacts(tmp: Path, mib: int) -> None:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.sqlite import SQLiteRunStore
    from proctor.runtime.tools.base import ToolContext
    from proctor.runtime.tools.registry import native_tools

    root = tmp / "art"
    (root / ".proctor").mkdir(parents=True)
    (root / "big.bin").write_bytes(os.urandom(mib * MIB))
    store = SQLiteRunStore(root / ".proctor" / "runs.sqlite")
    tools = native_tools()
    ctx = ToolContext(workspace=Workspace(root), store=store, run_id="bench", call_id="c")
    began = time.perf_counter()
    desc = tools["artifact.admit"].handler(ctx, {"path": "big.bin"})
    admit = time.perf_counter() - began
    print(f"{f'artifact admit ({mib} MiB)':<34} {admit * 1000:9.1f} ms   {mib / admit:8.1f} MiB/s")
    rates = []
    for _ in range(3):
        offset, began = 0, time.perf_counter()
        while True:
            page = tools["artifact.read"].handler(
                ctx, {"ref": desc["ref"], "offset": offset, "length": 4 * MIB}
            )
            offset = page["next_offset"]
            if page["eof"]:
                break
        rates.append(mib / (time.perf_counter() - began))
    rate = statistics.median(rates)
    print(f"{'artifact read (4 MiB base64 pages)':<34} median {rate:8.1f} MiB/s")
    page_us = measure(
        "artifact.read one 4 MiB page",
        lambda: tools["artifact.read"].handler(ctx, {"ref": desc["ref"], "length": 4 * MIB}),
        20,
        warm=2,
        width=34,
    )
    print(f"{'  as throughput':<34} {4 / (page_us / 1e6):8.1f} MiB/s")
    store.close()


if __name__ == "__main__":
    main()
