"""What one ``process.start`` supervisor costs: its memory and the time to start it.

Starts N sandboxed ``sleep`` processes (each in a run of its own, so the per-tree quota does
not stop the bench), then prints, over the supervisors:
  rss     resident set size (shared library pages included: what ``ps`` shows);
  uss     unique set size (what the machine gets back when the supervisor ends);
  start   the ``process.start`` handler's time, from the call to the supervisor's word;
each as median and p95, and the sum of RSS and USS over the N supervisors. Every process is
stopped at the end.

Run: .venv/bin/python bench/supervisors.py [count]
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from proctor.runtime.boundary.sandbox import SANDBOX_EXTRA, SandboxUse, probe
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.procs import process_tools
from proctor.runtime.tools.procs_log import list_processes, stop

SLEEP = "/bin/sleep"


def _stats(values: list[float]) -> tuple[float, float]:
    got = sorted(values)
    return statistics.median(got), got[max(0, int(len(got) * 0.95) - 1)]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    bwrap = shutil.which("bwrap")
    if not probe(bwrap).available or bwrap is None:
        raise SystemExit(f"bubblewrap does not work here: {probe(bwrap).reason}")
    start_tool = next(t for t in process_tools() if t.name == "process.start")
    use = SandboxUse("bubblewrap", "required", bwrap=bwrap)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / ".proctor").mkdir(parents=True)
        ws = Workspace(root)
        store = SQLiteRunStore(root / ".proctor" / "runs.sqlite")
        processes = root / ".proctor" / "processes"
        rss: list[float] = []
        uss: list[float] = []
        took: list[float] = []
        try:
            for index in range(n):
                ctx = ToolContext(
                    workspace=ws,
                    store=store,
                    run_id=f"bench-{index}",
                    call_id=f"bench-{index}/1",
                    extras={SANDBOX_EXTRA: use},
                )
                began = time.perf_counter()
                out = start_tool.handler(ctx, {"command": SLEEP, "args": ["600"]})
                took.append((time.perf_counter() - began) * 1000)
                state = json.loads((processes / out["process_id"] / "state.json").read_text())
                info = psutil.Process(int(state["supervisor_pid"])).memory_full_info()
                rss.append(info.rss / 2**20)
                uss.append(info.uss / 2**20)
        finally:
            for item in list_processes(processes):
                if item["running"]:
                    stop(processes / item["process_id"])
            store.close()
    print(f"process.start supervisors, {n} sandboxed sleeps")
    for label, values, unit in (("rss", rss, "MiB"), ("uss", uss, "MiB"), ("start", took, "ms")):
        median, p95 = _stats(values)
        print(f"  {label:6s} median {median:8.2f} {unit}  p95 {p95:8.2f} {unit}")
    print(f"  total rss {sum(rss):8.1f} MiB, uss {sum(uss):8.1f} MiB over {n} supervisors")


if __name__ == "__main__":
    main()
